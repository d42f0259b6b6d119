"""Placement groups: the State API's page, the GCS's strategies and counts per state, pending ones explained."""

from __future__ import annotations

import re

from ray_mcp import models
from ray_mcp.answers.nodes import Nodes
from ray_mcp.diagnosis.rules.placement import explain_pending_group
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.shaping.placement_groups import build_pg_list, pg_state_counts, placement_group_from_state
from ray_mcp.sources.dashboard import Dashboard, gather
from ray_mcp.sources.gcs import Gcs
from ray_mcp.sources.query import has, where
from ray_mcp.text import first_sentence


class PlacementGroups:
    """The placement groups of one cluster. ``nodes`` gives the capacities that explain a pending group."""

    def __init__(self, client: Dashboard, gcs: Gcs, nodes: Nodes) -> None:
        self.client = client
        self.gcs = gcs
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
        of its facts are unknown."""
        pg = placement_group
        is_id = pg is not None and re.fullmatch(r"[0-9a-fA-F]{36}", pg) is not None
        by_id, by_name = (pg, None) if is_id else (None, pg)
        filters = where(placement_group_id=by_id, name=by_name, state=state, creator_job_id=job_id)
        page, table = await gather(
            self.client.state_page("placement_groups", filters=filters, limit=limit, detail=True),
            self._table_or_reason(),
        )
        total, matched, rows, ray_notes = page
        if pg is not None and not rows:
            raise NotFound(
                f"No placement group with id or name {pg!r} in the cluster at {self.client.dashboard_url}. "
                "Call pg_status without placement_group to list them."
            )
        counted = not has(filters, "state")
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
        pending = any(row.get("state") == "PENDING" for row in rows)
        nodes, capacities = await self.nodes.capacities() if pending else ([], [])
        free = {c.node_id: c.available for c in capacities}
        groups = []
        for row in rows:
            strategy = strategies.get(str(row.get("placement_group_id")))
            why = None
            if row.get("state") == "PENDING":  # the diagnosis's answer, in its words
                fact = explain_pending_group(nodes, {**row, "strategy": strategy}, free=free)
                why = (fact.text, fact.say.infeasible) if fact is not None else None
            groups.append(placement_group_from_state(row, strategy=strategy, why=why))
        return build_pg_list(
            total=total,
            matched=matched,
            groups=groups,
            by_state=by_state,
            limit=limit,
            notes=notes + ray_notes,
        )

    async def strategies(self) -> dict[str, str]:
        """Every placement group's strategy by id (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD), from the GCS's
        table in one call: the State API leaves strategies out. Raises our errors when the GCS cannot answer."""
        table = await self.gcs.placement_group_table()
        return {row["placement_group_id"]: row["strategy"] for row in table}

    async def _table_or_reason(self) -> list[dict[str, str]] | str:
        """The GCS's placement group table, or why it could not be read (for the answer's note)."""
        try:
            return await self.gcs.placement_group_table()
        except RayMCPError as exc:
            reason = first_sentence(str(exc)).rstrip(".")
            return reason[:1].lower() + reason[1:]
