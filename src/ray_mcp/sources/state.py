"""Ray's State API (``/api/v0/<resource>`` and ``/api/v0/<resource>/summarize``): lists of typed records
(records.py) with Ray's own counts, filtered by Ray (filters checked and encoded by query.py).

The reads several answers ask in one call are canonical, so the read scope makes each once: every node with
its detail columns (``nodes``), one actor or one task by id (``actor``, ``task_attempts``). An answer filters
such a list itself rather than asking Ray for a narrower one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ray_mcp.errors import RayRequestFailed
from ray_mcp.limits import STATE_API_MAX_ROWS
from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.query import Filter, encode
from ray_mcp.sources.records import (
    Actor,
    ClusterEvent,
    Node,
    Object,
    PlacementGroup,
    StateList,
    Task,
    Worker,
)

TASK_ATTEMPTS_READ = 100  # the attempts of one task id (Ray's default max_retries is 3)


class StateAPI:
    """The State API of one cluster, through its dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    async def page(
        self, resource: str, *, filters: Sequence[Filter] = (), limit: int, detail: bool
    ) -> StateList[Any]:
        """One list: at most ``limit`` rows matching ``filters`` (Ray filters every row it read)."""
        d = self.dashboard
        params: list[tuple[str, str]] = [("limit", str(max(1, limit))), ("detail", "1" if detail else "0")]
        params += [("timeout", str(max(1, int(d.timeout_s))))]
        params += encode(list(filters))
        what = f"the {resource.replace('_', ' ')} list (/api/v0/{resource})"
        data = await d.get_data(f"/api/v0/{resource}", what=what, params=params)
        result = data.get("result") if isinstance(data, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("result"), list):
            raise RayRequestFailed(f"The Ray dashboard at {d.dashboard_url} answered {what} without rows.")
        return cast(StateList[Any], result)

    async def actors(
        self, *, filters: Sequence[Filter] = (), limit: int, detail: bool = True
    ) -> StateList[Actor]:
        return await self.page("actors", filters=filters, limit=limit, detail=detail)

    async def actor(self, actor_id: str) -> Actor | None:
        """One actor by id, with its detail columns (restarts, death cause, placement group)."""
        found = await self.actors(filters=[("actor_id", "=", actor_id)], limit=1)
        return found["result"][0] if found["result"] else None

    async def tasks(
        self, *, filters: Sequence[Filter] = (), limit: int, detail: bool = False
    ) -> StateList[Task]:
        return await self.page("tasks", filters=filters, limit=limit, detail=detail)

    async def task_attempts(self, task_id: str) -> list[Task]:
        """Every attempt of one task (its basic columns), as Ray lists them."""
        found = await self.tasks(filters=[("task_id", "=", task_id)], limit=TASK_ATTEMPTS_READ)
        return found["result"]

    async def placement_groups(
        self, *, filters: Sequence[Filter] = (), limit: int, detail: bool = True
    ) -> StateList[PlacementGroup]:
        return await self.page("placement_groups", filters=filters, limit=limit, detail=detail)

    async def workers(
        self, *, filters: Sequence[Filter] = (), limit: int, detail: bool = True
    ) -> StateList[Worker]:
        return await self.page("workers", filters=filters, limit=limit, detail=detail)

    async def objects(self, *, limit: int = STATE_API_MAX_ROWS) -> StateList[Object]:
        return await self.page("objects", limit=limit, detail=True)

    async def nodes(self) -> StateList[Node]:
        """Every node with its detail columns, at the State API's own cap: one read serves every asker of a call
        (a node by id or IP, the alive ones, their capacities)."""
        return await self.page("nodes", limit=STATE_API_MAX_ROWS, detail=True)

    async def cluster_events(self, *, source: str | None = None, limit: int) -> StateList[ClusterEvent]:
        """The cluster events Ray keeps (it cuts at ``limit`` keeping the oldest). Always with detail: Ray 2.60
        answers 500 to the basic-columns variant of this list."""
        filters: list[Filter] = [("source_type", "=", source)] if source else []
        return await self.page("cluster_events", filters=filters, limit=limit, detail=True)

    async def summary(self, resource: str, *, filters: Sequence[Filter] = (), **extra: str) -> dict[str, Any]:
        """The State API's summary of a resource (``/api/v0/<resource>/summarize``), Ray's result as it is."""
        d = self.dashboard
        params: list[tuple[str, str]] = [("timeout", str(max(1, int(d.timeout_s))))]
        params += list(extra.items())
        params += encode(list(filters))
        data = await d.get_data(
            f"/api/v0/{resource}/summarize",
            what=f"the {resource} summary (/api/v0/{resource}/summarize)",
            params=params,
        )
        return dict(data.get("result") or {})


def actor_summary_from_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The State API's actor summary (``{"summary": {class: {"state_counts": {...}}}}``), counted from rows:
    exact when the rows are every matching actor, which spares the summary request."""
    summary: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        counts = summary.setdefault(str(row.get("class_name") or ""), {"state_counts": {}})["state_counts"]
        state = str(row.get("state") or "UNKNOWN")
        counts[state] = counts.get(state, 0) + 1
    return {"summary": summary}
