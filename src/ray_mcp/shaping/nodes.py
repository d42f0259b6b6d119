"""Nodes and their resources: units, what is free, whether a demand can ever fit; the node list."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from ray_mcp import models
from ray_mcp.amounts import BYTE_RESOURCES, resource_amount
from ray_mcp.limits import GPUS_SHOWN, LINE_CHARS, MEMORY_USAGE_THRESHOLD
from ray_mcp.shaping.common import to_number
from ray_mcp.text import quoted

# Ray reports these resources in bytes.


@functools.lru_cache(maxsize=65_536)
def _camel(name: str) -> str:
    """A resource name as the dashboard's autoscaler report spells it (each placement group adds two names per
    resource, which stay the same from one call to the next: worth remembering)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def uncamel_usage(usage_by_node: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Each node's (used, total) per resource from the autoscaler report's ``usageByNode``, in the State API's
    resource names (those of the nodes' ``resources_total``, camelCased once for all nodes: the report camelCases
    its keys, ``objectStoreMemory``). The report also holds every placement group bundle's own resources
    (thousands at a thousand groups), which nothing here reads: only the known names are looked up."""
    names = _camel_names({name for node in nodes for name in (node.get("resources_total") or {})})
    return {node_id: _uncamel(usage, names) for node_id, usage in usage_by_node.items()}


def usage_from_free(
    nodes: Iterable[Mapping[str, Any]], free: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, tuple[float, float]]]:
    """Each node's (used, total) per resource from what the GCS says it has free (``free``, by node id; Ray
    leaves out a resource with nothing free): the same pairs ``uncamel_usage`` reads from the autoscaler report.
    A node the GCS has no entry for yet is left out, as the report leaves it out."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for node in nodes:
        node_id = str(node.get("node_id", ""))
        if node_id not in free:
            continue
        has = free[node_id]
        totals = node.get("resources_total") or {}
        out[node_id] = {k: (max(0.0, float(v) - float(has.get(k, 0.0))), float(v)) for k, v in totals.items()}
    return out


def _camel_names(known: Iterable[str]) -> dict[str, str]:
    """Each known name by its camelCased spelling (the byte resources always among them)."""
    return {_camel(name): name for name in {*known, *BYTE_RESOURCES}}


def _uncamel(usage: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for key, name in names.items():
        pair = usage.get(key, usage.get(name)) if isinstance(usage, Mapping) else None
        try:
            used, total = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        out[name] = (used, total)
    return out


def is_internal_resource(name: str) -> bool:
    """Ray's implicit per-node resources (``node:<ip>``, ``node:__internal_head__``) are noise for an agent."""
    return name.startswith("node:") or name.startswith("accelerator_type:")


def node_resources(
    totals: Mapping[str, Any], usage: Mapping[str, tuple[float, float]]
) -> dict[str, models.ResourceUse]:
    out: dict[str, models.ResourceUse] = {}
    for name, total in totals.items():
        if is_internal_resource(name):
            continue
        used = usage.get(name, (0.0, float(total)))[0]
        out[name] = models.ResourceUse(used=used, total=float(total))
    return dict(sorted(out.items()))


def fits(bundle: Mapping[str, float], capacity: Mapping[str, float]) -> bool:
    return all(
        float(amount) <= float(capacity.get(name, 0.0)) + 1e-9 for name, amount in bundle.items() if amount
    )


def demand_is_feasible(
    bundles: Sequence[Mapping[str, float]],
    node_shapes: Sequence[Mapping[str, float]],
    *,
    strategy: str | None,
) -> bool:
    """Could this demand ever be placed on nodes of these shapes (ignoring what is in use now)?"""
    if not bundles:
        return True
    if not node_shapes:
        return False
    if strategy == "STRICT_PACK":
        merged: dict[str, float] = {}
        for bundle in bundles:
            for name, amount in bundle.items():
                merged[name] = merged.get(name, 0.0) + float(amount)
        return any(fits(merged, shape) for shape in node_shapes)
    if strategy == "STRICT_SPREAD" and len(bundles) > len(node_shapes):
        return False
    return all(any(fits(bundle, shape) for shape in node_shapes) for bundle in bundles)


def node_identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every view of a node shares, from a State API node row; a DEAD node carries its reason."""
    alive = row.get("state") == "ALIVE"
    return {
        "node_id": str(row.get("node_id", "")),
        "ip": str(row.get("node_ip", "")),
        "state": "ALIVE" if alive else "DEAD",
        "is_head": bool(row.get("is_head_node")),
        "death_reason": None if alive else (row.get("state_message") or "no reason recorded"),
    }


class NodeCapacity(BaseModel):
    node_id: str
    total: dict[str, float]
    available: dict[str, float]


def node_capacities(
    nodes: Sequence[Mapping[str, Any]], usage_by_node: Mapping[str, Mapping[str, tuple[float, float]]]
) -> list[NodeCapacity]:
    """Total and available resources of each ALIVE node (available = total - used from the autoscaler report)."""
    out = []
    for node in nodes:
        if node.get("state") != "ALIVE":
            continue
        node_id = str(node.get("node_id", ""))
        totals = {
            k: float(v) for k, v in (node.get("resources_total") or {}).items() if not is_internal_resource(k)
        }
        usage = usage_by_node.get(node_id, {})
        available = {k: max(0.0, v - usage.get(k, (0.0, v))[0]) for k, v in totals.items()}
        out.append(NodeCapacity(node_id=node_id, total=totals, available=available))
    return out


def node_model(
    row: Mapping[str, Any],
    by_id: Mapping[str, NodeCapacity],
    summary: Mapping[str, Mapping[str, Any]] | None,
    notes: list[str],
) -> models.Node:
    """One node as list_nodes and get_node show it: resources, labels, host use (alive) or why it died.
    ``notes``: the answer's, told what is unknown of this node (its host use, when the node summary that was read
    has no entry for it: a node that joined after it was taken)."""
    alive = row.get("state") == "ALIVE"
    node_id = str(row.get("node_id", ""))
    cap = by_id.get(node_id)
    if alive and summary and node_id not in summary:
        notes.append(f"Host use of node {node_id} unknown: the dashboard's node summary has no entry for it.")
    totals = {
        k: float(v) for k, v in (row.get("resources_total") or {}).items() if not is_internal_resource(k)
    }
    return models.Node(
        **node_identity(row),
        name=row.get("node_name") if row.get("node_name") != row.get("node_ip") else None,
        resources_total=dict(sorted(totals.items())),
        resources_available=dict(sorted(cap.available.items())) if cap and alive else {},
        labels={str(k): str(v) for k, v in (row.get("labels") or {}).items() if k != "ray.io/node-id"},
        usage=host_usage((summary or {}).get(node_id), totals.get("object_store_memory")) if alive else None,
    )


def node_hints(node: models.Node) -> list[str]:
    """What to call next about one node (get_node): why a dead one died and what died with it, what runs on an
    alive one and its raylet's log, and first what holds its memory when it is under pressure."""
    nid = node.node_id
    if node.state == "DEAD":
        return [
            f"list_events node={nid} says what happened to it; list_actors node_id={nid} state=DEAD shows what died with it."
        ]
    hints = [
        f"list_actors node_id={nid} shows what runs there; tail_logs node={nid} filename=raylet.out reads its raylet's log."
    ]
    if node.usage and node.usage.memory_pressure:
        hints.insert(
            0,
            f"Under memory pressure (Ray's memory monitor kills workers at {MEMORY_USAGE_THRESHOLD:.0%}): list_actors node_id={nid} shows what holds it.",
        )
    return hints


def render_node(node: models.Node, notes: list[str]) -> str:
    """get_node's text: the verdict (alive or dead and why), the node's line as list_nodes writes it, notes and
    what to call next."""
    alive = node.state == "ALIVE"
    page = models.NodeList(total=1, matched=1, shown=1, alive=int(alive), dead=int(not alive), nodes=[node])
    line = render_node_list(page).splitlines()[1].strip()
    role = "head" if node.is_head else "worker"
    verdict = f"Node {node.node_id} ({role}) is {node.state}" + (
        "." if alive else f": {quoted(node.death_reason or '', LINE_CHARS)}"
    )
    return "\n".join(
        [verdict, line, *(f"Note: {n}" for n in notes), *(f"Hint: {h}" for h in node_hints(node))]
    )


def build_node_list(
    *,
    rows: Sequence[Mapping[str, Any]],
    capacities: list[NodeCapacity],
    limit: int,
    notes: list[str],
    summary: Mapping[str, Mapping[str, Any]] | None = None,
) -> models.NodeList:
    by_id = {c.node_id: c for c in capacities}
    nodes = [node_model(row, by_id, summary, notes) for row in rows]
    nodes.sort(key=lambda n: (not n.is_head, n.state != "ALIVE", n.ip, n.node_id))
    alive = sum(1 for n in nodes if n.state == "ALIVE")
    shown = nodes[:limit]  # the edge fits the answer to its byte budget (shaping.common.fit_page)
    hints = []
    if len(shown) < len(nodes):
        hints.append(f"{len(nodes) - len(shown):,} more nodes not shown; filter by state (ALIVE or DEAD).")
    pressure = [n for n in nodes if n.usage and n.usage.memory_pressure]
    if pressure:
        hints.insert(
            0,
            f"{len(pressure)} node(s) under memory pressure (at or above {MEMORY_USAGE_THRESHOLD:.0%}): "
            "call list_actors node_id=<id> to see what runs there.",
        )
    return models.NodeList(
        total=len(nodes),
        matched=len(nodes),
        shown=len(shown),
        alive=alive,
        dead=len(nodes) - alive,
        nodes=shown,
        notes=notes,
        hints=hints,
    )


def render_node_list(page: models.NodeList) -> str:
    pressure = sum(1 for n in page.nodes if n.usage and n.usage.memory_pressure)
    lines = [
        f"Nodes: {page.alive} alive, {page.dead} dead; showing {page.shown}."
        + (f" {pressure} under MEMORY PRESSURE." if pressure else "")
    ]
    for n in page.nodes:
        role = "head" if n.is_head else "worker"
        line = f"  {n.node_id} {n.ip} {role} {n.state}"
        if n.state == "ALIVE":
            res = ", ".join(
                f"{k} {resource_amount(k, n.resources_available.get(k, 0.0))}/{resource_amount(k, v)} free"
                for k, v in n.resources_total.items()
            )
            line += f" {res}"
        else:
            line += f": {quoted(n.death_reason or '', LINE_CHARS)}"
        if n.usage:
            line += "; " + format_host_usage(n.usage)
        if n.labels:
            line += " labels " + json.dumps(n.labels)
        lines.append(line)
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


# -- host use (the dashboard agent's node stats) ---------------------------------------------------------------

# Ray's memory monitor kills workers when a node's memory use reaches MEMORY_USAGE_THRESHOLD (limits.py): a
# cluster's own value is not exposed over REST, so nodes are flagged against the default.
MIB = 1024**2


def summary_by_node(data: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """/nodes?view=summary's entries by node id."""
    return {
        str((n.get("raylet") or {}).get("nodeId")): n
        for n in ((data or {}).get("summary") or [])
        if isinstance(n, Mapping)
    }


def host_usage(
    entry: Mapping[str, Any] | None, object_store_total: float | None = None
) -> models.HostUsage | None:
    """One node's host CPU, memory, object store and GPUs from its /nodes?view=summary entry."""
    if not entry:
        return None
    usage = models.HostUsage(object_store_total=object_store_total)
    cpu = entry.get("cpu")
    if isinstance(cpu, int | float):
        usage.cpu_percent = float(cpu)
    mem = entry.get("mem")  # psutil: [total, available, percent, ...]
    if isinstance(mem, list | tuple) and len(mem) >= 2 and float(mem[0]) > 0:
        total, available = float(mem[0]), float(mem[1])
        usage.memory_total, usage.memory_used = total, max(0.0, total - available)
        usage.memory_fraction = round(usage.memory_used / total, 4)
        usage.memory_pressure = usage.memory_fraction >= MEMORY_USAGE_THRESHOLD
    raylet = entry.get("raylet") or {}
    used = raylet.get("objectStoreUsedMemory")
    if used is None:
        used = (raylet.get("storeStats") or {}).get("objectStoreBytesUsed")
    if used is not None:
        usage.object_store_used = float(to_number(used) or 0)
    for g in entry.get("gpus") or []:
        if isinstance(g, Mapping):
            usage.gpus.append(
                models.GPUUse(
                    index=to_number(g.get("index")),
                    name=g.get("name"),
                    utilization_percent=g.get("utilizationGpu"),
                    memory_used=float(g["memoryUsed"]) * MIB if g.get("memoryUsed") is not None else None,
                    memory_total=float(g["memoryTotal"]) * MIB if g.get("memoryTotal") is not None else None,
                )
            )
    return usage


def format_host_usage(u: models.HostUsage) -> str:
    parts = []
    if u.cpu_percent is not None:
        parts.append(f"host CPU {u.cpu_percent:.0f}%")
    if u.memory_fraction is not None and u.memory_total:
        text = f"memory {u.memory_fraction:.0%} of {resource_amount('memory', u.memory_total)}"
        if u.memory_pressure:
            text += f" MEMORY PRESSURE (Ray's memory monitor kills workers at {MEMORY_USAGE_THRESHOLD:.0%})"
        parts.append(text)
    if u.object_store_used is not None:
        total = (
            f"/{resource_amount('object_store_memory', u.object_store_total)}" if u.object_store_total else ""
        )
        parts.append(f"object store {resource_amount('object_store_memory', u.object_store_used)}{total}")
    for g in u.gpus[:GPUS_SHOWN]:
        text = f"GPU {g.index} {g.name or ''}".rstrip()
        if g.utilization_percent is not None:
            text += f" {g.utilization_percent:.0f}%"
        if g.memory_used is not None and g.memory_total:
            text += f" mem {g.memory_used / g.memory_total:.0%}"
        parts.append(text)
    if len(u.gpus) > 8:
        parts.append(f"+{len(u.gpus) - 8} GPUs")
    return ", ".join(parts)
