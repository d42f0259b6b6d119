"""Ray Serve: the dashboard's Serve details as ServeStatus, its text, and the merged config to deploy."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import FAILING_DEPLOYMENTS_WITH_LOGS, LINE_CHARS, MAX_REPLICAS_SHOWN, SERVE_ERROR_CHARS
from ray_mcp.shaping.common import to_number
from ray_mcp.text import head_text, quoted, quoted_block, single_line, tail_text

SERVE_FAILING = frozenset({"UNHEALTHY", "DEPLOY_FAILED"})


# The deployment settings that decide whether a call is served, queued or rejected (max_queued_requests -1: no limit).
REQUEST_LIMITS = ("max_ongoing_requests", "max_queued_requests")


def serve_is_running(details: Mapping[str, Any]) -> bool:
    """An empty ``controller_info`` is what the dashboard returns when Serve was never started (or shut down)."""
    return bool(details.get("controller_info")) or bool(details.get("applications"))


def _utc(ts: Any) -> str | None:
    import datetime

    try:
        value = float(ts)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    return datetime.datetime.fromtimestamp(value, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def serve_deployment(raw: Mapping[str, Any]) -> models.ServeDeployment:
    config = raw.get("deployment_config") or {}
    replicas = [
        models.ServeReplica(
            replica_id=r.get("replica_id"),
            state=str(r.get("state", "")),
            actor_name=r.get("actor_name"),
            actor_id=r.get("actor_id"),
            pid=to_number(r.get("pid")) or None,
            node_id=r.get("node_id") or None,
            node_ip=r.get("node_ip") or None,
        )
        for r in raw.get("replicas") or []
    ]
    # Replicas that are not RUNNING are the interesting ones.
    replicas.sort(key=lambda r: (r.state == "RUNNING", r.replica_id or ""))
    status = str(raw.get("status", ""))
    target = raw.get("target_num_replicas", config.get("num_replicas"))
    return models.ServeDeployment(
        name=str(raw.get("name", "")),
        status=status,
        status_trigger=raw.get("status_trigger") or None,
        message=head_text(raw.get("message"), LINE_CHARS) if status not in SERVE_FAILING else None,
        target_replicas=to_number(target) if target is not None else None,
        running_replicas=sum(1 for r in replicas if r.state == "RUNNING"),
        autoscaling_config={
            k: v for k, v in (config.get("autoscaling_config") or {}).items() if v is not None
        }
        or None,
        limits={k: config[k] for k in REQUEST_LIMITS if config.get(k) is not None} or None,
        scaling=scaling_reason(raw, replicas, to_number(target) if target is not None else None),
        required_resources={
            str(k): float(v)
            for k, v in (raw.get("required_resources") or {}).items()
            if isinstance(v, int | float)
        }
        or None,
        replicas=replicas[:MAX_REPLICAS_SHOWN],
        replicas_total=len(replicas),
        error=tail_text(raw.get("message"), SERVE_ERROR_CHARS) if status in SERVE_FAILING else None,
    )


# Serve's controller says this in the deployment's message once replicas waited SLOW_STARTUP_WARNING_S (30 s).
_UNSCHEDULED = re.compile(
    r"has (?P<n>\d+) replicas that have taken more than (?P<s>\d+)s to be scheduled.*?"
    r"Resources required for each replica: (?P<need>\{.*?\}), total resources available: (?P<free>\{.*?\})",
    re.S,
)
_SLOW_INIT = re.compile(r"has (?P<n>\d+) replicas that have taken more than (?P<s>\d+)s to initialize")
_STARTING = frozenset({"STARTING", "UPDATING", "RECOVERING"})


def scaling_reason(raw: Mapping[str, Any], replicas: list[models.ServeReplica], target: Any) -> str | None:
    """Why a deployment runs another number of replicas than its target, from its replicas, its message and
    its autoscaling config (Ray's dashboard does not report the requests ongoing or queued per replica)."""
    running = sum(1 for r in replicas if r.state == "RUNNING")
    starting = sum(1 for r in replicas if r.state in _STARTING)
    config = (raw.get("deployment_config") or {}).get("autoscaling_config") or {}
    message = str(raw.get("message") or "")
    reasons: list[str] = []
    if isinstance(target, int) and running < target:
        if m := _UNSCHEDULED.search(message):
            reasons.append(
                f"{m['n']} replica(s) unscheduled for over {m['s']} s: each needs {m['need']}, the "
                f"cluster has {m['free']} free (the autoscaler, if any, must add a node)"
            )
        elif m := _SLOW_INIT.search(message):
            reasons.append(
                f"{m['n']} replica(s) slow to initialize (over {m['s']} s in __init__ or reconfigure)"
            )
        elif starting:
            need = raw.get("required_resources")
            reasons.append(
                f"{starting} replica(s) {'/'.join(sorted({r.state for r in replicas if r.state in _STARTING}))}"
                + (f", each needs {json.dumps(need)}" if need else "")
            )
        else:
            reasons.append(f"{target - running} replica(s) not started yet")
    if isinstance(target, int) and running > target:
        delay = config.get("downscale_delay_s")
        reasons.append(
            f"downscaling to {target}"
            + (f" (after downscale_delay_s={delay:g})" if isinstance(delay, int | float) else "")
        )
    if config and isinstance(target, int):
        high, low = config.get("max_replicas"), config.get("min_replicas")
        if isinstance(high, int) and target >= high:
            reasons.append(f"at max_replicas={high}: more load queues instead of adding replicas")
        elif isinstance(low, int) and target <= low and reasons:
            reasons.append(f"at min_replicas={low}")
        goal = config.get("target_ongoing_requests")
        if reasons and goal is not None:
            reasons.append(f"target_ongoing_requests={goal:g} per replica")
    return "; ".join(reasons) or None


def build_serve_status(details: Mapping[str, Any], *, app: str | None) -> models.ServeStatus:
    if not serve_is_running(details):
        return models.ServeStatus(
            running=False,
            notes=["Serve is not running on this cluster: no Serve controller, no applications."],
            hints=["serve_deploy starts Serve and deploys applications from a config."],
        )
    controller = details.get("controller_info") or {}
    http = details.get("http_options") or {}
    apps_raw = details.get("applications") or {}
    apps = []
    for name, raw in sorted(apps_raw.items()):
        if app is not None and name != app:
            continue
        deployments = [serve_deployment(d) for _n, d in sorted((raw.get("deployments") or {}).items())]
        config = raw.get("deployed_app_config") or {}
        status = str(raw.get("status", ""))
        apps.append(
            models.ServeApp(
                name=name,
                status=status,
                message=(tail_text if status in SERVE_FAILING else head_text)(
                    raw.get("message"), SERVE_ERROR_CHARS
                )
                or None,
                route_prefix=raw.get("route_prefix"),
                last_deployed=_utc(raw.get("last_deployed_time_s")),
                import_path=config.get("import_path"),
                deployments=deployments,
            )
        )
    hints = []
    if app is None and any(a.status != "RUNNING" for a in apps):
        hints.append("serve_status(app=...) focuses on one application.")
    return models.ServeStatus(
        running=True,
        controller_node_id=controller.get("node_id"),
        proxies={str(k): str((v or {}).get("status", "")) for k, v in (details.get("proxies") or {}).items()},
        http=f"{http.get('host')}:{http.get('port')}" if http.get("port") else None,
        apps_total=len(apps_raw),
        apps=apps,
        hints=hints,
    )


def failing_deployments(
    status: models.ServeStatus, limit: int = FAILING_DEPLOYMENTS_WITH_LOGS
) -> list[tuple[models.ServeApp, models.ServeDeployment]]:
    out = [(a, d) for a in status.apps for d in a.deployments if d.status in SERVE_FAILING]
    return out[:limit]


def render_serve_status(s: models.ServeStatus) -> str:
    if not s.running:
        return "\n".join([*s.notes, *(f"Hint: {h}" for h in s.hints)])
    lines = [
        f"Serve is running: {s.apps_total} application(s)" + (f"; HTTP on {s.http}" if s.http else "") + "."
    ]
    if s.proxies:
        lines.append("Proxies: " + ", ".join(f"{node} {st}" for node, st in s.proxies.items()))
    for a in s.apps:
        head = f"App {quoted(a.name)}: {a.status}" + (
            f" route {quoted(a.route_prefix)}" if a.route_prefix else ""
        )
        head += f" import {quoted(a.import_path)}" if a.import_path else ""
        head += f", last deployed {a.last_deployed}" if a.last_deployed else ""
        lines.append(head)
        if a.message and a.status not in SERVE_FAILING:
            lines.append(f"  message: {quoted(head_text(a.message, LINE_CHARS))}")
        for d in a.deployments:
            target = "?" if d.target_replicas is None else str(d.target_replicas)
            line = f"  deployment {quoted(d.name)}: {d.status}" + (
                f" ({d.status_trigger})" if d.status_trigger else ""
            )
            line += f", replicas {d.running_replicas}/{target} running"
            if d.autoscaling_config:
                auto = {
                    k: d.autoscaling_config[k]
                    for k in ("min_replicas", "max_replicas")
                    if k in d.autoscaling_config
                }
                line += f", autoscaling {json.dumps(auto)}"
            if d.limits:
                line += ", " + ", ".join(f"{k} {v:g}" for k, v in d.limits.items())
            lines.append(line)
            if d.scaling:
                lines.append(f"    scaling: {d.scaling}")
            if d.message:
                lines.append(f"    message: {quoted(d.message, LINE_CHARS)}")
            for r in d.replicas:
                where = f" node={r.node_id}" if r.node_id else ""
                lines.append(
                    f"    replica {quoted(r.replica_id)} {r.state} actor={quoted(r.actor_name)} pid={r.pid}{where}"
                )
            if d.replicas_total > len(d.replicas):
                lines.append(f"    … {d.replicas_total - len(d.replicas)} more replicas")
            if d.error:
                lines.append("    error:\n" + quoted_block(d.error, "      > "))
            if d.log_tail:
                lines.append(f"    last log lines ({d.log_source}):")
                lines += [f"      > {single_line(line)}" for line in d.log_tail]
    lines += [f"Note: {n}" for n in s.notes] + [f"Hint: {h}" for h in s.hints]
    return "\n".join(lines)


def merge_serve_config(
    current_apps: Sequence[Mapping[str, Any]], new_config: Mapping[str, Any], *, replace: bool
) -> dict[str, Any]:
    """The full config to PUT: the apps already declared (unless ``replace``) with the new ones replacing
    those of the same name. The PUT replaces Serve's whole declared state, so leaving an app out deletes it."""
    new_apps = list(new_config.get("applications") or [])
    names = {a.get("name", "default") for a in new_apps}
    kept = [] if replace else [dict(a) for a in current_apps if a.get("name", "default") not in names]
    merged = {k: v for k, v in new_config.items() if k != "applications"}
    merged["applications"] = kept + new_apps
    return merged


def config_without_app(current_apps: Sequence[Mapping[str, Any]], app: str) -> dict[str, Any]:
    return {"applications": [dict(a) for a in current_apps if a.get("name", "default") != app]}


def declared_serve_apps(details: Mapping[str, Any], *, dropping: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The config each app was declared with (``deployed_app_config``), to re-send in a merged PUT.

    ``dropping`` names the apps the caller replaces or deletes (their config is not needed). Any other app
    without a config (deployed from Python with serve.run, or one Ray kept no config for) would be removed by
    the PUT, so refuse and say how to proceed.
    """
    out = []
    skip = set(dropping)
    for name, app in (details.get("applications") or {}).items():
        config = app.get("deployed_app_config")
        if name in skip or app.get("status") == "DELETING":  # a DELETING app is already out of the config
            continue
        if not config:
            how = (
                "was deployed from Python (serve.run)"
                if app.get("source") == "imperative"
                else "has no recorded config"
            )
            raise InvalidArgument(
                f"Serve application {name!r} {how}, so a config deploy would remove it; nothing was changed. "
                "Include it in the config, delete it first with serve_delete_app, or pass replace=true to replace "
                "every application on purpose."
            )
        out.append(dict(config))
    return out
