"""Ray Serve: the dashboard's Serve details as ServeStatus, its text, and the merged config to deploy."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import (
    FAILING_DEPLOYMENTS_WITH_LOGS,
    LINE_CHARS,
    MAX_REPLICAS_SHOWN,
    SERVE_AUTOSCALER_ERRORS,
    SERVE_CONTROLLER_LAG_S,
    SERVE_DECISIONS,
    SERVE_ERROR_CHARS,
    SERVE_METRICS_SHOWN,
)
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


# The Serve controller logs each autoscaling decision in these words (deployment_state.py, Ray 2.60):
# "INFO 2026-12-04 14:03:56,880 controller 1767 -- Upscaling Deployment(name='Slow', app='scaler') from 1 to 3
# replicas. Current ongoing requests: 6.00, current running replicas: 1."
CONTROLLER_DECISION = re.compile(
    r"^\w+ (?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\S* controller \d+ -- (?P<way>Upscaling|Downscaling) "
    r"Deployment\(name='(?P<deployment>[^']*)', app='(?P<app>[^']*)'\) from (?P<prev>\d+) to (?P<new>\d+) replicas\. "
    r"Current ongoing requests: (?P<ongoing>[\d.]+), current running replicas: (?P<running>\d+)\."
)
Decisions = dict[tuple[str, str], list[models.ServeScalingDecision]]


def log_decisions(lines: Iterable[str]) -> tuple[Decisions, dict[tuple[str, str], float]]:
    """Each deployment's decisions in the controller's log, newest first, and the requests ongoing at the last."""
    found: Decisions = {}
    ongoing: dict[tuple[str, str], float] = {}
    for line in lines:
        m = CONTROLLER_DECISION.match(line.strip())
        if m is None:
            continue
        key = (m["app"], m["deployment"])
        load = float(m["ongoing"])
        found.setdefault(key, []).insert(
            0,
            models.ServeScalingDecision(
                at=m["at"],
                prev_replicas=int(m["prev"]),
                new_replicas=int(m["new"]),
                reason=f"{load:g} requests ongoing on {m['running']} running replica(s)",
                source="controller log",
            ),
        )
        ongoing[key] = load
    return found, ongoing


def _detail_decisions(detail: Mapping[str, Any]) -> list[models.ServeScalingDecision]:
    rows = [d for d in detail.get("decisions") or [] if isinstance(d, Mapping)]
    rows.sort(key=lambda d: -(to_float(d.get("timestamp_s")) or 0.0))
    return [
        models.ServeScalingDecision(
            at=_utc(d.get("timestamp_s")) or "?",
            prev_replicas=to_number(d.get("prev_num_replicas")) or 0,
            new_replicas=to_number(d.get("curr_num_replicas")) or 0,
            reason=head_text(d.get("reason"), LINE_CHARS) or "no reason given",
            policy=head_text(d.get("policy"), LINE_CHARS) or None,
            source="autoscaling_detail",
        )
        for d in rows
    ]


def to_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def serve_autoscaling(
    raw: Mapping[str, Any],
    logged: list[models.ServeScalingDecision] | None,
    ongoing: float | None,
    unknown: str | None,
) -> models.ServeAutoscaling | None:
    """A deployment's autoscaler in Ray's words: autoscaling_detail where Ray fills it (its status, decisions,
    metrics and their health, errors), else the decisions its controller logged (``logged``; None: not read,
    and ``unknown`` says why)."""
    detail = raw.get("autoscaling_detail")
    config = (raw.get("deployment_config") or {}).get("autoscaling_config")
    if not isinstance(detail, Mapping):
        if not config:
            return None
        status = str(raw.get("status") or "")
        decisions = logged or []
        return models.ServeAutoscaling(
            status=status
            if status in ("UPSCALING", "DOWNSCALING")
            else "STABLE"
            if status == "HEALTHY"
            else None,
            decisions=decisions[:SERVE_DECISIONS],
            decisions_total=len(decisions),
            ongoing_requests=ongoing,
            unknown=unknown if logged is None else None,
        )
    decisions = _detail_decisions(detail)
    raw_metrics = detail.get("metrics")
    metrics: Mapping[str, Any] = raw_metrics if isinstance(raw_metrics, Mapping) else {}
    shown: dict[str, object] = {
        str(k): v
        for k, v in list(metrics.items())[:SERVE_METRICS_SHOWN]
        if isinstance(v, int | float | str | bool)
    }
    return models.ServeAutoscaling(
        status=str(detail.get("scaling_status") or "") or None,
        decisions=decisions[:SERVE_DECISIONS],
        decisions_total=len(decisions),
        ongoing_requests=to_float(metrics.get("total_ongoing_requests", metrics.get("ongoing_requests"))),
        metrics_health=str(detail.get("metrics_health") or "") or None,
        metrics=shown or None,
        errors=[head_text(str(e), LINE_CHARS) or "" for e in (detail.get("errors") or [])][
            -SERVE_AUTOSCALER_ERRORS:
        ],
    )


def serve_controller(details: Mapping[str, Any]) -> models.ServeController:
    """Where the controller runs and how its control loop keeps up (controller_health_metrics, Ray >= 2.5x)."""
    info = details.get("controller_info") or {}
    health = details.get("controller_health_metrics")
    if not isinstance(health, Mapping) or not health.get("num_control_loops"):
        return models.ServeController(node_id=info.get("node_id"))
    raw_loop = health.get("loop_duration_s")
    loop: Mapping[str, Any] = raw_loop if isinstance(raw_loop, Mapping) else {}
    delay = to_float(health.get("event_loop_delay_s"))
    stamp, last = to_float(health.get("timestamp")), to_float(health.get("last_control_loop_time"))
    return models.ServeController(
        node_id=info.get("node_id"),
        state="lagging" if delay is not None and delay >= SERVE_CONTROLLER_LAG_S else "ok",
        loops_per_second=_round(health.get("loops_per_second")),
        loop_mean_s=_round(loop.get("mean")),
        loop_max_s=_round(loop.get("max")),
        event_loop_delay_s=_round(delay),
        last_loop_age_s=_round(stamp - last) if stamp and last else None,
        asyncio_tasks=to_number(health.get("num_asyncio_tasks")),
    )


def _round(value: Any) -> float | None:
    number = to_float(value)
    return None if number is None else float(f"{number:.3g}")


def serve_deployment(
    raw: Mapping[str, Any],
    logged: list[models.ServeScalingDecision] | None = None,
    ongoing: float | None = None,
    unknown: str | None = None,
) -> models.ServeDeployment:
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
        scaling=scaling_reason(raw, replicas, to_number(target) if target is not None else None, ongoing),
        required_resources={
            str(k): float(v)
            for k, v in (raw.get("required_resources") or {}).items()
            if isinstance(v, int | float)
        }
        or None,
        replicas=replicas[:MAX_REPLICAS_SHOWN],
        replicas_total=len(replicas),
        error=tail_text(raw.get("message"), SERVE_ERROR_CHARS) if status in SERVE_FAILING else None,
        autoscaling=serve_autoscaling(raw, logged, ongoing, unknown),
    )


# Serve's controller says this in the deployment's message once replicas waited SLOW_STARTUP_WARNING_S (30 s).
_UNSCHEDULED = re.compile(
    r"has (?P<n>\d+) replicas that have taken more than (?P<s>\d+)s to be scheduled.*?"
    r"Resources required for each replica: (?P<need>\{.*?\}), total resources available: (?P<free>\{.*?\})",
    re.S,
)
_SLOW_INIT = re.compile(r"has (?P<n>\d+) replicas that have taken more than (?P<s>\d+)s to initialize")
_STARTING = frozenset({"STARTING", "UPDATING", "RECOVERING"})


def unscheduled(message: str) -> tuple[int, str, str] | None:
    """Replicas Serve's controller could not schedule, in its words: (how many, what each needs, what is free)."""
    m = _UNSCHEDULED.search(message)
    return None if m is None else (int(m["n"]), m["need"], m["free"])


def scaling_reason(
    raw: Mapping[str, Any], replicas: list[models.ServeReplica], target: Any, ongoing: float | None = None
) -> str | None:
    """Why a deployment runs another number of replicas than its target, from its replicas, its message, its
    autoscaling config and the requests ongoing that its autoscaler counted at its last decision."""
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
        if reasons and ongoing is not None:
            reasons.append(f"{ongoing:g} requests ongoing at the autoscaler's last decision")
        if reasons and goal is not None:
            reasons.append(f"target_ongoing_requests={goal:g} per replica")
    return "; ".join(reasons) or None


def build_serve_status(
    details: Mapping[str, Any],
    *,
    app: str | None,
    logged: tuple[Decisions, dict[tuple[str, str], float]] | None = None,
    unknown: str | None = None,
) -> models.ServeStatus:
    """``logged``: the decisions read from the controller's log (None: not read, ``unknown`` says why)."""
    if not serve_is_running(details):
        return models.ServeStatus(
            running=False,
            notes=["Serve is not running on this cluster: no Serve controller, no applications."],
            hints=["serve_deploy starts Serve and deploys applications from a config."],
        )
    http = details.get("http_options") or {}
    apps_raw = details.get("applications") or {}
    apps = []
    for name, raw in sorted(apps_raw.items()):
        if app is not None and name != app:
            continue
        deployments = [
            serve_deployment(
                d,
                None if logged is None else logged[0].get((name, n), []),
                None if logged is None else logged[1].get((name, n)),
                unknown,
            )
            for n, d in sorted((raw.get("deployments") or {}).items())
        ]
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
        controller=serve_controller(details),
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
    if s.controller is not None and s.controller.state:
        c = s.controller
        lines.append(
            f"Controller: {c.state}: {c.loops_per_second:g} control loops/s, each {c.loop_mean_s:g} s on average "
            f"(max {c.loop_max_s:g} s), event loop {c.event_loop_delay_s:g} s late, "
            f"last loop {c.last_loop_age_s:g} s ago, {c.asyncio_tasks} asyncio tasks"
        )
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
            if d.autoscaling is not None:
                lines += autoscaling_lines(d.autoscaling)
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


def autoscaling_lines(a: models.ServeAutoscaling) -> list[str]:
    head = f"    autoscaler: {a.status or 'status unknown'}"
    if a.metrics_health:
        head += f", metrics {a.metrics_health}"
    if a.ongoing_requests is not None:
        head += f", {a.ongoing_requests:g} requests ongoing at its last decision"
    out = [head]
    for d in a.decisions:
        out.append(
            f"      {d.at}: {d.prev_replicas} -> {d.new_replicas} replicas because {quoted(d.reason)}"
            + (f" (policy {quoted(d.policy)})" if d.policy else "")
            + f" [{d.source}]"
        )
    if a.decisions_total > len(a.decisions):
        out.append(f"      … {a.decisions_total - len(a.decisions)} earlier decisions")
    if not a.decisions and a.unknown:
        out.append(f"      decisions: unknown, because {a.unknown}")
    elif not a.decisions:
        out.append("      no scaling decision recorded yet")
    if a.metrics:
        out.append("      metrics: " + ", ".join(f"{k} {v}" for k, v in a.metrics.items()))
    out += [f"      error: {quoted(e)}" for e in a.errors]
    return out


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
