"""Ray Serve: status of applications (with a failing replica's log), deploy a config, delete one application."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from typing import Any

from ray_mcp import models
from ray_mcp.answers.logs import Logs, LogSource
from ray_mcp.answers.secrets import JobSecrets
from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError
from ray_mcp.limits import (
    DEAD_REPLICAS_READ,
    LINE_CHARS,
    SERVE_CONTROLLER_LOG_BYTES,
    SERVE_CONTROLLER_LOG_LINES,
    SERVE_PROBLEMS,
)
from ray_mcp.shaping.serve import (
    Decisions,
    build_serve_status,
    config_without_app,
    declared_serve_apps,
    failing_deployments,
    log_decisions,
    merge_serve_config,
)
from ray_mcp.sources import scope
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.text import head_text


class Serve:
    """Ray Serve on one cluster, through the dashboard's Serve REST API. ``logs`` reads a failing replica's
    log; ``secrets`` holds the apps' env_vars, which their replicas' logs may print."""

    def __init__(self, sources: ClusterSources, logs: Logs, secrets: JobSecrets) -> None:
        self.sources = sources
        self.api = sources.serve
        self.logs = logs
        self.secrets = secrets

    async def details(self) -> dict[str, Any]:
        body = await self.api.applications()
        self.secrets.hold_serve(body)  # kept: the replicas' logs outlive the apps
        return body

    async def app_instances(self, *, deleting: bool = True) -> dict[str, str]:
        """Each declared Serve app's instance key: its last deploy time and a digest of its config.
        ``deleting=False`` leaves out the apps Serve is already deleting (they go away on their own)."""
        apps = (await self.details()).get("applications") or {}
        return {
            name: serve_app_instance(raw)
            for name, raw in apps.items()
            if isinstance(raw, Mapping) and (deleting or raw.get("status") != "DELETING")
        }

    async def decisions(
        self, details: Mapping[str, Any]
    ) -> tuple[tuple[Decisions, dict[tuple[str, str], float]] | None, str | None]:
        """The autoscaling decisions the Serve controller logged, per (app, deployment), when a deployment
        autoscales and Ray leaves its autoscaling_detail empty (Ray 2.60's controller never fills it); else
        (None, why they are unknown)."""
        deployments = [
            d
            for a in (details.get("applications") or {}).values()
            if isinstance(a, Mapping)
            for d in (a.get("deployments") or {}).values()
            if isinstance(d, Mapping)
        ]
        if not any(
            (d.get("deployment_config") or {}).get("autoscaling_config") and not d.get("autoscaling_detail")
            for d in deployments
        ):
            return None, None
        controller = details.get("controller_info") or {}
        node_id, path = controller.get("node_id"), str(controller.get("log_file_path") or "").lstrip("/")
        if not node_id or not path:
            return None, "Ray reports neither autoscaling_detail nor the Serve controller's log file"
        source = LogSource(
            {"node_id": node_id, "filename": path}, f"Serve controller log {path}", node_id, path, None
        )
        try:
            section = await self.logs.tail_source(
                source, lines=SERVE_CONTROLLER_LOG_LINES, max_bytes=SERVE_CONTROLLER_LOG_BYTES
            )
        except RayMCPError as exc:
            return None, f"the Serve controller's log {path} could not be read ({exc})"
        return log_decisions(section.lines), None

    async def status(self, *, app: str | None, log_lines: int) -> models.ServeStatus:
        details = await self.details()
        logged, unknown = await self.decisions(details)
        status = build_serve_status(details, app=app, logged=logged, unknown=unknown)
        if app is not None and not status.apps:
            names = ", ".join(sorted(details.get("applications") or {})) or "none"
            where = "applications" if status.running else "Serve is not running, so none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.sources.dashboard_url} ({where}: {names}). "
                "Call serve_status without app to see them all."
            )
        if log_lines > 0:
            for application, deployment in failing_deployments(status):
                await self._attach_replica_log(application.name, deployment, log_lines)
        return status

    async def _attach_replica_log(self, app: str, deployment: models.ServeDeployment, lines: int) -> None:
        """The last lines of a failing replica's Serve log (a replica that is not RUNNING, else the latest DEAD
        one), falling back to its worker's stderr."""
        replica = next((r for r in deployment.replicas if r.state != "RUNNING" and r.node_id), None)
        if replica is not None:
            replica_id, node_id, actor_id = replica.replica_id, replica.node_id, replica.actor_id
        else:
            found = await self.sources.state.actors(
                filters=[
                    ("class_name", "=", f"ServeReplica:{app}:{deployment.name}"),
                    ("state", "=", "DEAD"),
                ],
                limit=DEAD_REPLICAS_READ,
                detail=False,
            )
            rows = found["result"]
            if not rows:
                return
            row = rows[-1]
            replica_id, node_id, actor_id = (
                str(row.get("name", "")).rsplit("#", 1)[-1],
                row.get("node_id"),
                row.get("actor_id"),
            )
        sources = []
        if replica_id and node_id:
            filename = f"serve/replica_{app}_{deployment.name}_{replica_id}.log"
            sources.append(
                LogSource(
                    {"node_id": node_id, "filename": filename},
                    f"Serve log {filename}",
                    node_id,
                    filename,
                    None,
                )
            )
        if actor_id:
            sources.append(
                LogSource(
                    {"actor_id": actor_id, "suffix": "err"},
                    f"stderr of replica actor {actor_id}",
                    node_id,
                    None,
                    "err",
                )
            )
        for source in sources:
            try:
                section = await self.logs.tail_source(source, lines=lines, max_bytes=lines * LINE_CHARS)
            except RayMCPError:
                continue
            tail = [ln for ln in section.lines if ln.strip() and not ln.startswith(":")][-lines:]
            if tail:
                deployment.log_tail = [head_text(ln, LINE_CHARS) or "" for ln in tail]
                deployment.log_source = source.source
                return

    async def _put(self, config: dict[str, Any]) -> None:
        """PUT a whole Serve config; a config Ray's schema refuses is the caller's mistake."""
        response = await self.api.put(config)
        if response.status == 400:  # the dashboard checks the config against Ray's schema first
            raise InvalidArgument(
                f"The Serve config is not valid, nothing was deployed: {schema_problems(response.text)}."
            )

    async def deploy(self, config: dict[str, Any], *, replace: bool) -> models.ServeChange:
        validated = validate_serve_config(config)
        scope.fresh()  # the config merged into is the one Serve runs now (a confirmation may have waited)
        current = await self.details()
        new_names = [a.get("name", "default") for a in validated.get("applications") or []]
        current_apps = [] if replace else declared_serve_apps(current, dropping=new_names)
        merged = merge_serve_config(current_apps, validated, replace=replace)
        await self._put(merged)
        status = await self.status(app=None, log_lines=0)
        names = [a.get("name", "default") for a in merged["applications"]]
        return models.ServeChange(action="deployed", applications=names, status=status)

    async def delete_app(self, app: str) -> models.ServeChange:
        scope.fresh()  # the apps as they are now (a confirmation may have waited)
        current = await self.details()
        if app not in details_apps(current):
            names = ", ".join(sorted(details_apps(current))) or "none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.sources.dashboard_url} (applications: "
                f"{names}). "
                "Call serve_status to see them."
            )
        config = config_without_app(declared_serve_apps(current, dropping=[app]), app)
        await self._put(config)
        status = await self.status(app=None, log_lines=0)
        return models.ServeChange(
            action=f"deleted {app}",
            applications=[a.get("name", "default") for a in config["applications"]],
            status=status,
        )


def validate_serve_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check the shape a merge needs; the dashboard checks the rest against Ray's schema on the PUT."""
    apps = config.get("applications") if isinstance(config, Mapping) else None
    if not isinstance(apps, list) or not all(isinstance(a, Mapping) for a in apps):
        raise InvalidArgument(
            'A Serve config is {"applications": [{"name": ..., "import_path": "module:app", "route_prefix": ..., '
            '"runtime_env": {...}, "deployments": [...]}]}; the one given has no "applications" list of objects.'
        )
    return dict(config)


def schema_problems(text: str) -> str:
    """The field paths and messages of the pydantic ValidationError repr the dashboard answers a bad config
    with, without the input values it echoes (a runtime_env may hold secrets)."""
    lines = text.splitlines()
    problems = [
        f"{loc.strip()}: {msg.strip().split(' [type=')[0]}"
        for loc, msg in itertools.pairwise(lines[1:])
        if loc and not loc[0].isspace() and msg.startswith("  ") and not msg.startswith("    ")
    ]
    return "; ".join(problems[:SERVE_PROBLEMS]) or head_text(text, LINE_CHARS) or "no reason given"


def serve_app_instance(raw: Mapping[str, Any]) -> str:
    """One incarnation of a Serve app: a redeploy (new config or not) changes its last deploy time."""
    config = json.dumps(raw.get("deployed_app_config") or {}, sort_keys=True, default=str)
    digest = hashlib.sha256(config.encode()).hexdigest()[:16]
    return f"deployed_s={raw.get('last_deployed_time_s')} config={digest}"


def details_apps(details: Mapping[str, Any]) -> list[str]:
    return list((details.get("applications") or {}).keys())
