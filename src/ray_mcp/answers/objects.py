"""The object store: the objects every worker references (State API), each node's store stats (its raylet),
and who owns what (workers, actors, jobs): what ``ray memory`` shows, grouped."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from ray_mcp import models
from ray_mcp.answers.secrets import JobSecrets
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import STATE_API_MAX_ROWS
from ray_mcp.shaping.objects import Owners, build_object_store, store_nodes
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.records import StateList


class Objects:
    """What fills the object store, per node and per holder."""

    def __init__(self, sources: ClusterSources, secrets: JobSecrets) -> None:
        self.sources = sources
        self.state = sources.state
        self.secrets = secrets

    async def _rows(
        self, what: str, read: Awaitable[StateList[Any]], notes: list[str]
    ) -> list[dict[str, Any]]:
        """One State API list, every row; a failure is a note (the answer says what it could not read)."""
        try:
            found = await read
        except RayMCPError as exc:
            notes.append(f"The {what} list could not be read: {str(exc).split('. ')[0]}.")
            return []
        notes += [w for w in [found.get("partial_failure_warning")] if w]
        return [dict(r) for r in found["result"]]

    async def store_stats(self, notes: list[str]) -> list[models.StoreNode]:
        """Each alive node's object store use and spill totals (/nodes?view=summary), fullest first."""
        nodes, summary = await gather(self._rows("nodes", self.state.nodes(), notes), self._summary(notes))
        return store_nodes(nodes, summary)

    async def _summary(self, notes: list[str]) -> dict[str, Any]:
        try:
            return await self.sources.routes.node_summary()
        except RayMCPError as exc:
            notes.append(f"Store use and spilling per node unknown: {str(exc).split('. ')[0]}.")
            return {}

    async def summarize(self, *, limit: int) -> models.ObjectStoreSummary:
        notes: list[str] = []
        s = self.state
        stores, objects, workers, actors, jobs = await gather(
            self.store_stats(notes),
            self._rows("objects", s.objects(), notes),
            self._rows("workers", s.workers(limit=STATE_API_MAX_ROWS), notes),
            self._rows("actors", s.actors(limit=STATE_API_MAX_ROWS), notes),
            self._jobs(notes),
        )
        owners = Owners.of(workers=workers, actors=actors, jobs=jobs)
        return build_object_store(stores=stores, objects=objects, owners=owners, limit=limit, notes=notes)

    async def _jobs(self, notes: list[str]) -> list[dict[str, Any]]:
        try:
            listed = await self.sources.jobs.job_list()
        except RayMCPError as exc:
            notes.append(
                f"The job list could not be read: {str(exc).split('. ')[0]} (finished owners not known)."
            )
            return []
        self.secrets.hold_listed(listed)  # the call sites quoted are the jobs' own code
        return [dict(j) for j in listed.jobs]
