"""Placement groups: why a PENDING one waits (and whether it ever can), the bounded list, and its text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.limits import BUNDLES_SHOWN
from ray_mcp.shaping.common import cap_items, narrowing_hint, to_number
from ray_mcp.shaping.nodes import BYTE_RESOURCES, NodeCapacity, fits, format_amount, format_shape
from ray_mcp.text import quoted


def _plural(name: str, amount: float) -> str:
    if name in BYTE_RESOURCES:
        return f"{format_amount(name, amount)} of {name}"
    return f"{amount:g} {name}{'s' if name.isupper() and amount != 1 else ''}"


def _merge(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    merged: dict[str, float] = {}
    for bundle in bundles:
        for name, amount in bundle.items():
            merged[name] = merged.get(name, 0.0) + float(amount)
    return merged


def _missing(bundle: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> tuple[str, float] | None:
    """The first resource of ``bundle`` that no node has enough of, with the largest amount any node has."""
    if any(fits(bundle, node) for node in nodes):
        return None
    for name, amount in bundle.items():
        best = max((float(node.get(name, 0.0)) for node in nodes), default=0.0)
        if float(amount) > best + 1e-9:
            return name, best
    # Each resource fits somewhere, but no single node has them all.
    return "", 0.0


def _no_node_text(label: str, bundle: Mapping[str, float], missing: tuple[str, float], free: bool) -> str:
    name, best = missing
    what = "free now" if free else ""
    if not name:
        return f"{label} wants {format_shape(bundle)} and no node has all of it {what}".rstrip()
    if best <= 0:
        return f"{label} wants {format_shape(bundle)} and no node has any {name} {what}".rstrip()
    more = f"more than {_plural(name, best)}" + (" free" if free else "")
    return f"{label} wants {format_shape(bundle)} and no node has {more}"


def _strict_pack(
    bundles: Sequence[Mapping[str, float]], nodes: Sequence[Mapping[str, float]], *, free: bool
) -> str | None:
    """Why all the bundles together fit on none of ``nodes`` (totals, or what is free now); None if they do."""
    merged = _merge(bundles)
    missing = _missing(merged, nodes)
    if missing is None:
        return None
    label = (
        f"STRICT_PACK (all {len(bundles)} bundles on one node):"
        if free
        else (f"STRICT_PACK puts all {len(bundles)} bundles on one node:")
    )
    return _no_node_text(label, merged, missing, free=free)


def _never_fits(
    bundles: Sequence[Mapping[str, float]], strategy: str | None, nodes: list[NodeCapacity], ray_says: str
) -> str | None:
    """Why the group can never be placed on these nodes, whatever is freed; None if it could be."""
    totals = [n.total for n in nodes]
    # 1. Can it ever fit, by node totals?
    for i, bundle in enumerate(bundles):
        missing = _missing(bundle, totals)
        if missing:
            return _no_node_text(f"bundle {i}", bundle, missing, free=False) + ray_says
    if strategy == "STRICT_SPREAD" and len(bundles) > len(nodes):
        return (
            f"STRICT_SPREAD puts each of its {len(bundles)} bundles on a different node and only "
            f"{len(nodes)} node(s) are alive" + ray_says
        )
    if strategy == "STRICT_PACK" and (why := _strict_pack(bundles, totals, free=False)):
        return why + ray_says
    return None


def _busy(
    bundles: Sequence[Mapping[str, float]], strategy: str | None, nodes: list[NodeCapacity], ray_says: str
) -> str | None:
    """Why the group waits for resources in use now; None if the free resources hold it."""
    frees = [n.available for n in nodes]
    # 2. It fits the cluster's shape; what is in use now?
    if strategy == "STRICT_PACK":
        why = _strict_pack(bundles, frees, free=True)
        if why:
            return why + "; it waits for resources held by other tasks, actors or placement groups" + ray_says
    elif strategy == "STRICT_SPREAD":
        for i, bundle in enumerate(bundles):
            room = sum(1 for free in frees if fits(bundle, free))
            if room < len(bundles):
                return (
                    f"STRICT_SPREAD needs {len(bundles)} nodes with {format_shape(bundle)} free (bundle {i}) and "
                    f"only {room} have it now; it waits for resources held by others" + ray_says
                )
    else:
        for i, bundle in enumerate(bundles):
            missing = _missing(bundle, frees)
            if missing:
                return (
                    _no_node_text(f"bundle {i}", bundle, missing, free=True)
                    + "; it waits for resources held by other tasks, actors or placement groups"
                    + ray_says
                )
        need = _merge(bundles)
        have = _merge(frees)
        for name, amount in need.items():
            if amount > have.get(name, 0.0) + 1e-9:
                return (
                    f"its bundles want {_plural(name, amount)} in all and the cluster has "
                    f"{_plural(name, have.get(name, 0.0))} free; it waits for resources held by others"
                    + ray_says
                )
    return None


def explain_pending_pg(
    bundles: Sequence[Mapping[str, float]],
    strategy: str | None,
    scheduling_state: str | None,
    nodes: list[NodeCapacity],
) -> tuple[str, bool]:
    """Why a PENDING placement group waits: the failing constraint, and whether it can ever be placed."""
    ray_says = f" (Ray's scheduling state: {scheduling_state})" if scheduling_state else ""
    if not nodes:
        return "no node is alive to hold it" + ray_says, True
    why = _never_fits(bundles, strategy, nodes, ray_says)
    if why is not None:
        return why, True
    why = _busy(bundles, strategy, nodes, ray_says)
    if why is not None:
        return why, False
    if scheduling_state == "INFEASIBLE":
        return (
            "Ray marks it INFEASIBLE though its resources fit a node: check its bundles' label selectors "
            "and the nodes' labels (list_nodes)",
            True,
        )
    return "it fits the free resources now; Ray has not placed it yet" + ray_says, False


def placement_group_from_state(
    raw: Mapping[str, Any], *, strategy: str | None, nodes: list[NodeCapacity]
) -> models.PlacementGroup:
    stats = raw.get("stats") or {}
    bundles = []
    for i, b in enumerate(raw.get("bundles") or []):
        index = to_number((b.get("bundle_id") or {}).get("bundle_index", i))
        resources = {str(k): float(v) for k, v in (b.get("unit_resources") or {}).items()}
        bundles.append(models.Bundle(index=int(index), resources=resources, node_id=b.get("node_id") or None))
    pg = models.PlacementGroup(
        placement_group_id=str(raw.get("placement_group_id", "")),
        name=raw.get("name") or None,
        state=str(raw.get("state", "")),
        strategy=strategy,
        creator_job_id=raw.get("creator_job_id") or None,
        is_detached=raw.get("is_detached"),
        scheduling_state=stats.get("scheduling_state") or None,
        bundles=bundles,
    )
    if pg.state == "PENDING":
        why, infeasible = explain_pending_pg(
            [b.resources for b in bundles], strategy, pg.scheduling_state, nodes
        )
        if strategy is None:
            why += " (its strategy is unknown: the GCS was not reachable)"
        pg.why_pending, pg.infeasible = why, infeasible
    return pg


def pg_state_counts(
    table: Sequence[Mapping[str, str]], filters: Sequence[tuple[str, str, str]]
) -> dict[str, int]:
    """Count the GCS's placement group rows per state, keeping those that pass the State API style ``=``
    filters (placement_group_id, name, state, creator_job_id)."""
    counts: dict[str, int] = {}
    for row in table:
        if all(str(row.get(key, "")) == value for key, _predicate, value in filters):
            counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts


def build_pg_list(
    *,
    total: int,
    matched: int,
    groups: list[models.PlacementGroup],
    by_state: dict[str, int],
    limit: int,
    notes: list[str],
) -> models.PlacementGroupList:
    order = {"PENDING": 0, "RESCHEDULING": 1, "PREPARED": 2, "CREATED": 3, "REMOVED": 4}
    groups = sorted(groups, key=lambda g: (order.get(g.state, 9), g.name or "", g.placement_group_id))
    # The same order whatever source counted them (the GCS's table comes in hash-map order).
    by_state = dict(sorted(by_state.items(), key=lambda item: (order.get(item[0], 9), item[0])))
    shown = cap_items(groups, limit, notes, "placement groups")
    hints = []
    hint = narrowing_hint(matched - len(shown), by_state, "placement groups", "state or job")
    if hint:
        hints.append(hint)
    return models.PlacementGroupList(
        total=total,
        matched=matched,
        shown=len(shown),
        by_state=by_state,
        placement_groups=shown,
        notes=notes,
        hints=hints,
    )


def render_pg_list(page: models.PlacementGroupList) -> str:
    # no counts by state when they were not read (a state filter): say nothing rather than "(none)"
    counts = ", ".join(f"{n:,} {s}" for s, n in page.by_state.items())
    counts = f" ({counts})" if counts else ""
    lines = [f"Placement groups: {page.matched:,} match of {page.total:,}{counts}; showing {page.shown}."]
    for g in page.placement_groups:
        head = f"  {g.placement_group_id}" + (f" name={quoted(g.name)}" if g.name else "") + f" {g.state}"
        head += f" {g.strategy or 'strategy?'}" + (f" job={g.creator_job_id}" if g.creator_job_id else "")
        head += " detached" if g.is_detached else ""
        lines.append(head)
        placed = [
            f"{b.index}:{format_shape(b.resources)}@{b.node_id}"
            if b.node_id
            else f"{b.index}:{format_shape(b.resources)}"
            for b in g.bundles
        ]
        if placed:
            lines.append(
                "    bundles "
                + "; ".join(placed[:BUNDLES_SHOWN])
                + (f"; … {len(placed) - BUNDLES_SHOWN} more" if len(placed) > BUNDLES_SHOWN else "")
            )
        if g.why_pending:
            verdict = "INFEASIBLE" if g.infeasible else "waiting"
            lines.append(f"    why pending ({verdict}): {g.why_pending}")
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)
