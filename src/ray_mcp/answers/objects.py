"""The object store: the objects every worker references (State API), each node's store stats (its raylet),
and who owns what (workers, actors, jobs): what ``ray memory`` shows, grouped."""

from __future__ import annotations

from typing import Any

from ray_mcp import models
from ray_mcp.answers.nodes import Nodes
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import STATE_API_MAX_ROWS
from ray_mcp.shaping.objects import Owners, build_object_store, store_nodes
from ray_mcp.sources.dashboard import Dashboard, gather


class Objects:
    """What fills the object store, per node and per holder."""

    def __init__(self, client: Dashboard, nodes: Nodes) -> None:
        self.client = client
        self.nodes = nodes

    async def _rows(self, resource: str, notes: list[str], **extra: Any) -> list[dict[str, Any]]:
        """One State API list, every row; a failure is a note (the answer says what it could not read)."""
        try:
            result = await self.client.list_state(
                resource, what=f"the {resource} list (/api/v0/{resource})", limit=STATE_API_MAX_ROWS, **extra
            )
        except RayMCPError as exc:
            notes.append(f"The {resource} list could not be read: {str(exc).split('. ')[0]}.")
            return []
        notes += [w for w in [result.get("partial_failure_warning")] if w]
        return [dict(r) for r in result.get("result") or []]

    async def store_stats(self, notes: list[str]) -> list[models.StoreNode]:
        """Each alive node's object store use and spill totals (/nodes?view=summary), fullest first."""
        nodes, summary = await gather(self._rows("nodes", notes, detail=True), self._summary(notes))
        return store_nodes(nodes, summary)

    async def _summary(self, notes: list[str]) -> dict[str, Any]:
        try:
            data = await self.nodes.summary()
        except RayMCPError as exc:
            notes.append(f"Store use and spilling per node unknown: {str(exc).split('. ')[0]}.")
            return {}
        return dict(data or {})

    async def summarize(self, *, limit: int) -> models.ObjectStoreSummary:
        notes: list[str] = []
        stores, objects, workers, actors, jobs = await gather(
            self.store_stats(notes),
            self._rows("objects", notes, detail=True),
            self._rows("workers", notes, detail=True),
            self._rows("actors", notes, detail=True),
            self._jobs(notes),
        )
        owners = Owners.of(workers=workers, actors=actors, jobs=jobs)
        return build_object_store(stores=stores, objects=objects, owners=owners, limit=limit, notes=notes)

    async def _jobs(self, notes: list[str]) -> list[dict[str, Any]]:
        try:
            return await self.client.job_rows()
        except RayMCPError as exc:
            notes.append(
                f"The job list could not be read: {str(exc).split('. ')[0]} (finished owners not known)."
            )
            return []
