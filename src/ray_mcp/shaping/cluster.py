"""The cluster's status (what ``ray status`` shows): nodes, resource use, pending demands, autoscaler."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import resource_shape, resource_use
from ray_mcp.limits import FAILED_NODES_SHOWN, PRESSURE_NODES_NAMED
from ray_mcp.shaping.events import AUTOSCALER_FAILED, AUTOSCALER_INFEASIBLE
from ray_mcp.shaping.nodes import (
    MEMORY_USAGE_THRESHOLD,
    demand_is_feasible,
    format_host_usage,
    host_usage,
    node_identity,
    node_resources,
    uncamel_usage,
)


def build_cluster_status(
    *,
    dashboard_url: str,
    source: str,
    version: Mapping[str, Any],
    nodes: list[Mapping[str, Any]],
    status: Mapping[str, Any],
    pending_placement_groups: int,
    max_nodes: int,
    summary: Mapping[str, Mapping[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> models.ClusterStatus:
    """Join the node list and the autoscaler report into one ClusterStatus (pure, tested without Ray)."""
    cluster_status = status.get("clusterStatus") or {}
    load = cluster_status.get("loadMetricsReport") or {}
    usage_by_node = uncamel_usage(load.get("usageByNode") or {}, nodes)

    node_models: list[models.NodeStatus] = []
    totals: dict[str, list[float]] = {}
    for node in nodes:
        alive = node.get("state") == "ALIVE"
        node_id = str(node.get("node_id", ""))
        used_total = usage_by_node.get(node_id, {})
        resources = node_resources(node.get("resources_total") or {}, used_total) if alive else {}
        if alive:
            for name, use in resources.items():
                acc = totals.setdefault(name, [0.0, 0.0])
                acc[0] += use.used
                acc[1] += use.total
        usage = (
            host_usage((summary or {}).get(node_id), _total(node, "object_store_memory")) if alive else None
        )
        node_models.append(models.NodeStatus(**node_identity(node), resources=resources, usage=usage))
    node_models.sort(key=lambda n: (not n.is_head, n.state != "ALIVE", n.ip, n.node_id))

    alive_totals = [n.resources for n in node_models if n.state == "ALIVE"]
    node_types = [shape for shape, _count in (load.get("nodeTypes") or [])]
    demands = _demands(load, alive_totals, node_types)

    autoscaler = _autoscaler(cluster_status.get("autoscalerReport"), status.get("autoscalingError"))
    shown = node_models[:max_nodes]
    alive_count = sum(1 for n in node_models if n.state == "ALIVE")
    pressure = [n for n in node_models if n.usage and n.usage.memory_pressure]
    hints = _status_hints(node_models, len(shown), pending_placement_groups, pressure, demands)
    return models.ClusterStatus(
        dashboard_url=dashboard_url,
        source=source,
        ray_version=str(version.get("ray_version", "unknown")),
        session_name=version.get("session_name"),
        nodes_alive=alive_count,
        nodes_dead=len(node_models) - alive_count,
        resources={name: models.ResourceUse(used=u, total=t) for name, (u, t) in sorted(totals.items())},
        nodes=shown,
        nodes_shown=len(shown),
        pending_demands=demands,
        pending_placement_groups=pending_placement_groups,
        autoscaler=autoscaler,
        memory_pressure_nodes=len(pressure),
        notes=list(notes or []),
        hints=hints,
    )


def _status_hints(
    node_models: list[models.NodeStatus],
    shown: int,
    pending_placement_groups: int,
    pressure: list[models.NodeStatus],
    demands: list[models.Demand],
) -> list[str]:
    hints: list[str] = []
    if shown < len(node_models):
        hints.append(
            f"{len(node_models) - shown} more nodes not shown; call cluster_status with a larger max_nodes."
        )
    if pending_placement_groups:
        hints.append(
            f"{pending_placement_groups} placement groups are PENDING; pg_status explains why each waits."
        )
    if pressure:
        hints.insert(
            0,
            f"{len(pressure)} node(s) under memory pressure (at or above "
            f"{MEMORY_USAGE_THRESHOLD:.0%} of host memory, where Ray's memory monitor kills workers): "
            + ", ".join(n.node_id for n in pressure[:PRESSURE_NODES_NAMED])
            + ".",
        )
    if any(d.infeasible for d in demands):
        hints.append(
            "Some demands fit on no node: lower the request, or add a node with those resources "
            "(an autoscaler adds one only if a node type can hold it)."
        )
    return hints


def _total(node: Mapping[str, Any], name: str) -> float | None:
    value = (node.get("resources_total") or {}).get(name)
    return float(value) if value is not None else None


def _demands(
    load: Mapping[str, Any],
    node_resources_list: list[dict[str, models.ResourceUse]],
    node_types: list[Mapping[str, float]],
) -> list[models.Demand]:
    shapes = [{k: v.total for k, v in res.items()} for res in node_resources_list] + [
        dict(t) for t in node_types
    ]
    out: list[models.Demand] = []
    for shape, count in load.get("resourceDemand") or []:
        out.append(
            models.Demand(
                kind="task_or_actor",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    for pg, count in load.get("pgDemand") or []:
        bundles = [_clean_shape(b) for b, n in pg.get("bundles") or [] for _ in range(int(n))]
        strategy = pg.get("strategy")
        out.append(
            models.Demand(
                kind="placement_group",
                bundles=bundles,
                strategy=strategy,
                count=int(count),
                infeasible=not demand_is_feasible(bundles, shapes, strategy=strategy),
            )
        )
    for shape, count in load.get("requestDemand") or []:
        out.append(
            models.Demand(
                kind="request_resources",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    return out


def _clean_shape(shape: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in shape.items() if not str(k).startswith("node:")}


def _autoscaler(report: Mapping[str, Any] | None, error: str | None) -> models.AutoscalerStatus | None:
    if not report and not error:
        return None
    report = report or {}
    pending_nodes = [
        " ".join(str(x) for x in (p if isinstance(p, list | tuple) else [p]))
        for p in report.get("pendingNodes") or []
    ]
    failed_nodes = [
        " ".join(str(x) for x in (f if isinstance(f, list | tuple) else [f]))
        for f in report.get("failedNodes") or []
    ]
    launches = {str(k): int(v) for k, v in (report.get("pendingLaunches") or {}).items()}
    return models.AutoscalerStatus(
        # A "legacy" report with no launches and no node types is what a fixed-size cluster (ray start) shows.
        kind="legacy" if report.get("legacy") else "v2",
        active_nodes=sum(int(v) for v in (report.get("activeNodes") or {}).values()),
        pending_nodes=pending_nodes,
        pending_launches=launches,
        failed_nodes=failed_nodes,
        error=error or None,
    )


def with_decisions(status: models.ClusterStatus, decisions: list[str], notes: list[str]) -> None:
    """Add the autoscaler's recent events (its decisions) to a status, and what could not be read."""
    if decisions:
        if status.autoscaler is None:
            status.autoscaler = models.AutoscalerStatus(kind="v2", active_nodes=status.nodes_alive)
        status.autoscaler.decisions = decisions
        if any(AUTOSCALER_FAILED.search(d) or AUTOSCALER_INFEASIBLE.search(d) for d in decisions):
            status.hints.append(
                "The autoscaler failed to launch nodes: see autoscaler.decisions, then "
                "list_events source=AUTOSCALER for all of its events."
            )
    status.notes += notes


def render_cluster_status(status: models.ClusterStatus) -> str:
    lines = [
        f"Ray {status.ray_version} cluster at {status.dashboard_url} ({status.source}): "
        f"{status.nodes_alive} node(s) alive, {status.nodes_dead} dead"
        + (
            f"; {status.memory_pressure_nodes} under MEMORY PRESSURE."
            if status.memory_pressure_nodes
            else "."
        ),
        "Resources used/total: "
        + (", ".join(resource_use(k, v.used, v.total) for k, v in status.resources.items()) or "none"),
        f"Nodes ({status.nodes_shown} of {status.nodes_alive + status.nodes_dead}):",
    ]
    for node in status.nodes:
        role = "head" if node.is_head else "worker"
        if node.state == "ALIVE":
            use = ", ".join(resource_use(k, v.used, v.total) for k, v in node.resources.items())
            host = f"; {format_host_usage(node.usage)}" if node.usage else ""
            lines.append(f"  {node.node_id} {node.ip} {role} ALIVE {use}{host}")
        else:
            lines.append(f"  {node.node_id} {node.ip} {role} DEAD: {node.death_reason}")
    if status.pending_demands:
        lines.append("Pending demands:")
        for demand in status.pending_demands:
            shape = " + ".join(resource_shape(b) for b in demand.bundles)
            strategy = f" {demand.strategy}" if demand.strategy else ""
            verdict = "INFEASIBLE (fits no node)" if demand.infeasible else "waiting for free resources"
            lines.append(f"  {demand.kind}{strategy} {shape} x{demand.count}: {verdict}")
    else:
        lines.append("Pending demands: none.")
    lines.append(f"Pending placement groups: {status.pending_placement_groups}.")
    if status.autoscaler is None:
        lines.append("Autoscaler: no report.")
    else:
        a = status.autoscaler
        parts = [f"{a.active_nodes} active node(s)"]
        if a.pending_nodes or a.pending_launches:
            parts.append(f"pending: {', '.join(a.pending_nodes) or json.dumps(a.pending_launches)}")
        if a.failed_nodes:
            parts.append(f"failed: {', '.join(a.failed_nodes[:FAILED_NODES_SHOWN])}")
        if a.error:
            parts.append(f"error: {a.error}")
        lines.append(f"Autoscaler ({a.kind}): " + "; ".join(parts) + ".")
        lines += [f"  {d}" for d in a.decisions]
    lines += [f"Note: {note}" for note in status.notes] + [f"Hint: {hint}" for hint in status.hints]
    return "\n".join(lines)
