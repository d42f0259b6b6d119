"""Placement groups: the bounded list and its text (why a PENDING one waits is the diagnosis's placement rules'
answer, the same words diagnose_job and cluster_health give)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import resource_shape
from ray_mcp.limits import BUNDLES_SHOWN
from ray_mcp.shaping.common import narrowing_hint, to_number
from ray_mcp.text import quoted


def placement_group_from_state(
    raw: Mapping[str, Any], *, strategy: str | None, why: tuple[str, bool] | None = None
) -> models.PlacementGroup:
    """A group from its State API row and its strategy (the GCS's); ``why``: for a PENDING group, why it waits
    and whether it ever can (the diagnosis's placement rules: answers/placement_groups.py asks them)."""
    stats = raw.get("stats") or {}
    bundles = []
    for i, b in enumerate(raw.get("bundles") or []):
        index = to_number((b.get("bundle_id") or {}).get("bundle_index", i))
        resources = {str(k): float(v) for k, v in (b.get("unit_resources") or {}).items()}
        selector = {str(k): str(v) for k, v in (b.get("label_selector") or {}).items()} or None
        bundles.append(
            models.Bundle(
                index=int(index),
                resources=resources,
                node_id=b.get("node_id") or None,
                label_selector=selector,
            )
        )
    pg = models.PlacementGroup(
        placement_group_id=str(raw.get("placement_group_id", "")),
        name=raw.get("name") or None,
        state=str(raw.get("state", "")),
        strategy=strategy,
        creator_job_id=raw.get("creator_job_id") or None,
        is_detached=raw.get("is_detached"),
        scheduling_state=stats.get("scheduling_state") or None,
        bundles=bundles,
        topology_strategy=label_map(raw.get("topology_strategy")),
        topology_assignments=label_map(raw.get("topology_assignments"))
        if raw.get("topology_strategy")
        else None,
    )
    if pg.state == "PENDING" and why is not None:
        text, infeasible = why
        if strategy is None:
            text += " (its strategy is unknown: the GCS was not reachable)"
        pg.why_pending, pg.infeasible = text, infeasible
    return pg


def label_map(value: Any) -> dict[str, str] | None:
    """Ray's label dict (a topology strategy, its assignments) as strings; None when empty or not a dict."""
    return {str(k): str(v) for k, v in value.items()} or None if isinstance(value, Mapping) else None


def topology_line(strategy: Mapping[str, str] | None, assignments: Mapping[str, str] | None) -> str:
    """Label locality in one line: each topology key's strategy and the value chosen for it (or none yet)."""
    if not strategy:
        return ""
    chosen = ", ".join(f"{quoted(k)}={quoted(v)}" for k, v in (assignments or {}).items())
    keys = ", ".join(f"{quoted(k)}: {v}" for k, v in strategy.items())
    return f"topology {{{keys}}}; " + (f"assigned {chosen}" if chosen else "no label value assigned yet")


def selector_text(selector: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in selector.items())


def pg_state_counts(
    table: Sequence[Mapping[str, str]], filters: Sequence[tuple[str, str, str]]
) -> dict[str, int]:
    """Count the GCS's placement group rows per state, keeping those that pass the State API style ``=``
    filters (placement_group_id, name, state, creator_job_id)."""
    kept = (
        (row for row in table if passes(row, filters)) if filters else table
    )  # a thousand rows: no call each
    return dict(Counter(row["state"] for row in kept))


def passes(row: Mapping[str, str], filters: Sequence[tuple[str, str, str]]) -> bool:
    """Whether a GCS table row passes the State API style ``=`` filters."""
    return all(str(row.get(key, "")) == value for key, _predicate, value in filters)


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
    shown = groups[:limit]  # the edge fits the answer to its byte budget (shaping.common.fit_page)
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
        if topology := topology_line(g.topology_strategy, g.topology_assignments):
            lines.append(f"    {topology}")
        placed = [
            f"{b.index}:{resource_shape(b.resources)}"
            + (f"[{quoted(selector_text(b.label_selector))}]" if b.label_selector else "")
            + (f"@{b.node_id}" if b.node_id else "")
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
            ray = f"; Ray's scheduling state {g.scheduling_state}" if g.scheduling_state else ""
            lines.append(f"    why pending ({verdict}{ray}): {g.why_pending}")
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)
