"""Placement groups: the State API's page, the GCS's strategies and counts per state, pending ones explained."""

from __future__ import annotations

import re

from ray_mcp import models
from ray_mcp.answers.nodes import Nodes
from ray_mcp.diagnosis.rules.placement import explain_pending_group
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.shaping.common import state_notes
from ray_mcp.shaping.nodes import NodeCapacity
from ray_mcp.shaping.placement_groups import (
    build_pg_list,
    passes,
    pg_state_counts,
    placement_group_from_state,
)
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.query import Filter, has, where
from ray_mcp.sources.records import Node, PlacementGroup
from ray_mcp.text import first_sentence


class PlacementGroups:
    """The placement groups of one cluster. ``nodes`` gives the capacities that explain a pending group."""

    def __init__(self, sources: ClusterSources, nodes: Nodes) -> None:
        self.sources = sources
        self.nodes = nodes

    async def status(
        self,
        *,
        placement_group: str | None,
        state: str | None,
        job_id: str | None,
        limit: int,
        notes: list[str],
    ) -> models.PlacementGroupList:
        """One page of groups (the State API's rows and exact totals) with each group's strategy and the counts
        per state (the GCS's table: the State API has no strategies, and would convert every group once per
        state to count them), and why each pending group shown waits. Without the GCS, the answer says which
        of its facts are unknown.

        The page and the GCS's reads go at once: the node capacities too, from the GCS, when its table says some
        group of the page may be pending; they are used only if one shown is."""
        pg = placement_group
        is_id = pg is not None and re.fullmatch(r"[0-9a-fA-F]{36}", pg) is not None
        by_id, by_name = (pg, None) if is_id else (None, pg)
        filters = where(placement_group_id=by_id, name=by_name, state=state, creator_job_id=job_id)
        found, (table, capacities) = await gather(
            self.sources.state.placement_groups(filters=filters, limit=max(1, limit), detail=True),
            self._table_and_capacities(state),
        )
        rows = found["result"][:limit]
        matched = int(found.get("num_filtered") or 0)
        ray_notes = state_notes("placement_groups", found)
        if pg is not None and not rows:
            raise NotFound(
                f"No placement group with id or name {pg!r} in the cluster at {self.sources.dashboard_url}. "
                "Call pg_status without placement_group to list them."
            )
        counted = not has(filters, "state")
        if counted and matched > len(rows) and isinstance(table, list):
            rows = await self._unplaced_first(rows, table, filters, limit)
        gcs_answered = isinstance(table, list)
        if isinstance(table, str):  # the GCS did not answer: say what that leaves unknown
            unknown = [
                what
                for what, needed in (("strategies", bool(rows)), ("counts per state", counted and matched))
                if needed
            ]
            if unknown:
                strict = ", so STRICT_* constraints are not checked" if rows else ""
                ray_notes.append(f"{' and '.join(unknown).capitalize()} unknown ({table}){strict}.")
            table = []
        by_state = pg_state_counts(table, filters) if counted else {}
        strategies = {r["placement_group_id"]: r["strategy"] for r in table}
        if any(row.get("state") == "PENDING" for row in rows) and capacities is None:
            # the table missed it (it moved), or the GCS is out: then from the dashboard, not after another timeout
            capacities = await self.nodes.capacities(from_gcs=gcs_answered)
        nodes, caps = capacities if capacities else ([], [])
        free = {c.node_id: c.available for c in caps}
        groups = []
        for row in rows:
            strategy = strategies.get(str(row.get("placement_group_id")))
            why = None
            if row.get("state") == "PENDING":  # the diagnosis's answer, in its words
                fact = explain_pending_group(nodes, {**row, "strategy": strategy}, free=free)
                why = (fact.text, fact.say.infeasible) if fact is not None else None
            groups.append(placement_group_from_state(row, strategy=strategy, why=why))
        if any(
            g.state not in ("CREATED", "REMOVED") and any(b.label_selector for b in g.bundles) for g in groups
        ):
            ray_notes += await self._selector_autoscaler_note()
        return build_pg_list(
            total=int(found.get("total") or 0),
            matched=matched,
            groups=groups,
            by_state=by_state,
            limit=limit,
            notes=notes + ray_notes,
        )

    async def _selector_autoscaler_note(self) -> list[str]:
        """A waiting group has bundle label selectors: whether the autoscaler honours them (only v2 does)."""
        try:
            status = await self.nodes.cluster_status(max_nodes=1)
        except RayMCPError as exc:
            return [
                f"Whether the autoscaler honours bundle label selectors is unknown ({str(exc).split('. ')[0]})."
            ]
        if status.autoscaler is None or status.autoscaler.kind != "legacy":
            return []
        return [
            "The autoscaler reports in v1's (legacy) form: autoscaler v1 ignores bundle label selectors when it "
            "picks nodes to launch (only v2 enforces them), so it may launch nodes whose labels do not match; on "
            "KubeRay set spec.autoscalerOptions.version: v2."
        ]

    async def _unplaced_first(
        self, rows: list[PlacementGroup], table: list[dict[str, str]], filters: list[Filter], limit: int
    ) -> list[PlacementGroup]:
        """The page with the groups not yet placed first. The State API pages in its own order, so on a cluster
        with hundreds of REMOVED groups a pending one can fall off the page; the GCS's table says whether one
        did, and only then are the unplaced groups asked for (one more request)."""
        shown = {row.get("placement_group_id") for row in rows}
        unplaced = [r for r in table if r["state"] not in ("CREATED", "REMOVED") and passes(r, filters)]
        if all(r["placement_group_id"] in shown for r in unplaced):
            return rows
        not_placed = [*filters, ("state", "!=", "CREATED"), ("state", "!=", "REMOVED")]
        found = await self.sources.state.placement_groups(filters=not_placed, limit=limit, detail=True)
        first = found["result"][:limit]
        ids = {row.get("placement_group_id") for row in first}
        return (first + [row for row in rows if row.get("placement_group_id") not in ids])[:limit]

    async def _table_and_capacities(
        self, state: str | None
    ) -> tuple[list[dict[str, str]] | str, tuple[list[Node], list[NodeCapacity]] | None]:
        """The GCS's table (or why it could not be read) and, when it holds a pending group that the page may
        show, the node capacities, from the GCS too: both are read while the page is on its way from the
        dashboard, which serves one request at a time."""
        table = await self._table_or_reason()
        if (
            state in (None, "PENDING")
            and isinstance(table, list)
            and any(r["state"] == "PENDING" for r in table)
        ):
            return table, await self.nodes.capacities(from_gcs=True)
        return table, None

    async def strategies(self) -> dict[str, str]:
        """Every placement group's strategy by id (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD), from the GCS's
        table in one call: the State API leaves strategies out. Raises our errors when the GCS cannot answer."""
        table = await self.sources.gcs.placement_group_table()
        return {row["placement_group_id"]: row["strategy"] for row in table}

    async def _table_or_reason(self) -> list[dict[str, str]] | str:
        """The GCS's placement group table, or why it could not be read (for the answer's note)."""
        try:
            return await self.sources.gcs.placement_group_table()
        except RayMCPError as exc:
            reason = first_sentence(str(exc)).rstrip(".")
            return reason[:1].lower() + reason[1:]
