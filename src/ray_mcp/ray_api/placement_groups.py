"""Placement groups: the State API's list joined with the GCS's table (strategies), pending ones explained."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ray_mcp import models
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.ray_api import gcs, ray_import
from ray_mcp.ray_api.client import gather
from ray_mcp.ray_api.nodes import NodesAPI
from ray_mcp.ray_api.query import Filter, has, where
from ray_mcp.shaping.nodes import NodeCapacity
from ray_mcp.shaping.placement_groups import build_pg_list, pg_state_counts, placement_group_from_state

log = logging.getLogger(__name__)
T = TypeVar("T")


class PlacementGroupsAPI(NodesAPI):
    """The placement groups of one cluster."""

    async def pg_status(
        self,
        *,
        placement_group: str | None,
        state: str | None,
        job_id: str | None,
        limit: int,
        notes: list[str],
    ) -> models.PlacementGroupList:
        pg = placement_group
        is_id = pg is not None and re.fullmatch(r"[0-9a-fA-F]{36}", pg) is not None
        by_id, by_name = (pg, None) if is_id else (None, pg)
        filters = where(placement_group_id=by_id, name=by_name, state=state, creator_job_id=job_id)
        if not ray_import.is_loaded("gcs"):
            # A fresh server: the strategies (only the GCS has them) over gcs_h2 beside one State API page,
            # instead of waiting ~0.3 s for Ray's modules. The same answer as Ray's path below (tested).
            page, fast = await gather(
                _or_none(self._state_page("placement_groups", filters=filters, limit=limit, detail=True)),
                self._pg_table_without_ray(),
            )
            if page is not None and fast is not None:
                return await self._pg_list_with(pg, page, fast, filters, limit, notes)
        # Ray's GCS channel: the table read, filtered, sorted and cut here as the State API would.
        reached, gcs_page = await self._gcs_pg_page(filters, limit)
        if gcs_page is not None:
            # The GCS's table in one call, filtered, sorted and cut here as the State API would (with strategies):
            # only the page is converted (the State API converts every group: ~0.7 s at 1,000).
            total, matched, rows, counts = gcs_page
            by_state = {} if has(filters, "state") else counts
            return await self._pg_list(pg, total, matched, rows, by_state, limit, notes)
        # One State API page and (for a filter the page above cannot read) the GCS's placement group table
        # (states and strategies), side by side.
        page, table = await gather(
            self._state_page("placement_groups", filters=filters, limit=limit, detail=True),
            self._pg_table() if reached else _none(),
        )
        return await self._pg_list_with(pg, page, table, filters, limit, notes)

    async def _pg_list_with(
        self, pg: str | None, page: tuple[int, int, list[dict[str, Any]], list[str]],
        table: list[dict[str, str]] | None, filters: list[Filter], limit: int, notes: list[str],
    ) -> models.PlacementGroupList:  # fmt: skip
        """A State API page joined with the GCS's table (strategies, counts per state), or without it."""
        total, matched, rows, ray_notes = page
        if table is None:
            ray_notes.append(
                "Strategies unknown: the GCS did not answer, so STRICT_* constraints are not checked."
            )
            by_state = await self._pg_counts(filters)
        else:
            by_state = {} if has(filters, "state") else pg_state_counts(table, filters)
        strategies = {r["placement_group_id"]: r["strategy"] for r in table or []}
        rows = [{**row, "strategy": strategies.get(row.get("placement_group_id", ""))} for row in rows]
        return await self._pg_list(pg, total, matched, rows, by_state, limit, notes + ray_notes)

    async def _pg_list(
        self, pg: str | None, total: int, matched: int, rows: list[dict[str, Any]], by_state: dict[str, int],
        limit: int, notes: list[str],
    ) -> models.PlacementGroupList:  # fmt: skip
        """The page as our models; the node capacities only when a shown group is PENDING (they explain why
        it waits)."""
        if pg is not None and not rows:
            raise NotFound(
                f"No placement group with id or name {pg!r} in the cluster at {self.dashboard_url}. "
                "Call pg_status without placement_group to list them."
            )
        capacities: list[NodeCapacity] = []
        if any(row.get("state") == "PENDING" for row in rows):
            _nodes, capacities = await self.node_capacities()
        groups = [
            placement_group_from_state(row, strategy=row.get("strategy"), nodes=capacities) for row in rows
        ]
        return build_pg_list(
            total=total, matched=matched, groups=groups, by_state=by_state, limit=limit, notes=notes
        )

    async def _gcs_pg_page(
        self, filters: list[Filter], limit: int
    ) -> tuple[bool, tuple[int, int, list[dict[str, Any]], dict[str, int]] | None]:
        """(whether the GCS answered, its page: None for a filter the page cannot read)."""
        try:
            await ray_import.ensure("gcs")
            return True, await anyio.to_thread.run_sync(
                lambda: gcs.placement_group_page(self._gcs(), filters, limit, self.timeout_s)
            )
        except Exception:  # the GCS cannot be reached from here: the State API answers instead
            return False, None

    async def _pg_counts(self, filters: list[Filter]) -> dict[str, int]:
        """Exact count per state without the GCS: one limit=1 State API call per state (each returns a total)."""
        if has(filters, "state"):
            return {}
        states = ("PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING")
        pages = await gather(
            *(self._state_page("placement_groups", filters=[*filters, ("state", "=", s)], limit=1, detail=False)
              for s in states)
        )  # fmt: skip
        return {s: p[1] for s, p in zip(states, pages, strict=True) if p[1]}

    async def _pg_table_without_ray(self) -> list[dict[str, str]] | None:
        """_pg_table's rows over gcs_h2 (no Ray import); None when that path cannot answer."""
        from ray_mcp.ray_api import gcs_h2

        address = await self.gcs_address_without_ray()
        if address is None:
            return None
        try:
            return await gcs_h2.placement_group_table(address, self.authorization(), self.timeout_s)
        except gcs_h2.GrpcFailed as exc:
            log.info(
                "ray-mcp: the GCS's placement group table over HTTP/2 failed (%s); asking through Ray", exc
            )
            return None

    async def _pg_table(self) -> list[dict[str, str]] | None:
        """Every placement group's id, name, state, creator job and strategy, from the GCS in one call (the
        State API omits the strategy and has no per-state summary). None if the GCS is unreachable."""
        if not ray_import.is_loaded("gcs") and (fast := await self._pg_table_without_ray()) is not None:
            return fast
        try:
            await ray_import.ensure("gcs")
            return await anyio.to_thread.run_sync(
                lambda: gcs.placement_group_table(self._gcs(), self.timeout_s)
            )
        except Exception:  # the GCS may be unreachable from here; the answer says so
            return None


async def _none() -> None:
    return None


async def _or_none(aw: Awaitable[T]) -> T | None:
    """``aw``'s result, or None when the dashboard could not give it (the caller then asks another way)."""
    try:
        return await aw
    except RayMCPError:
        return None
