"""Actors: list them with exact totals, show one (State API), kill one (through the GCS, as ray.kill does)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import anyio

from ray_mcp import models
from ray_mcp.answers.secrets import JobSecrets, job_ids_of
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.limits import ACTORS_COUNTED
from ray_mcp.shaping.actors import actor_from_state, build_actor_list
from ray_mcp.shaping.common import state_notes
from ray_mcp.sources import scope
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.gcs import GCS_ACTOR_FILTERS, GCS_RETRY_S
from ray_mcp.sources.ids import check_id
from ray_mcp.sources.query import Filter
from ray_mcp.sources.state import actor_summary_from_rows
from ray_mcp.text import as_token

KILL_WAIT_S = 10.0
MATCHED_KEPT = 32  # the lists whose last match count is remembered


class Actors:
    """The actors of one cluster. Their death causes quote what their jobs printed: ``secrets`` learns those
    jobs' env_vars first."""

    def __init__(self, sources: ClusterSources, secrets: JobSecrets) -> None:
        self.sources = sources
        self.state = sources.state
        self.secrets = secrets
        self._matched: dict[str, int] = {}  # a list's filters -> how many it matched last time (timing only)
        self._gcs_missed_at = -GCS_RETRY_S  # when the GCS last could not count actors (timing only)

    async def _gcs_counts(self, filters: list[Filter]) -> dict[str, dict[str, int]] | None:
        """The matching actors counted per class and state from the GCS's table, or None when the GCS cannot
        answer (then the list counts through the dashboard, and asks the GCS again only after GCS_RETRY_S)."""
        try:
            return await self.sources.gcs.actor_counts(filters)
        except RayMCPError:
            self._gcs_missed_at = time.monotonic()
            return None

    async def get(self, actor_id: str) -> models.Actor:
        check_id("actor", actor_id)
        row = await self.state.actor(actor_id)
        if row is None:
            raise NotFound(
                f"No actor {actor_id!r} in the cluster at {self.sources.dashboard_url}. "
                "Call list_actors to see the actor ids that exist."
            )
        await self.secrets.learn(job_ids_of([row]))
        return actor_from_state(row, detail=True)

    async def kill(self, actor: models.Actor, *, no_restart: bool) -> models.ActorKill:
        """Force-kill an actor through the GCS (KillActorViaGcs: what ray.kill does, without a driver; the
        dashboard has no route for it), then watch it leave its state (bounded: the GCS updates within a
        second or two)."""
        await self.sources.gcs.kill_actor(actor.actor_id, no_restart=no_restart)
        after = actor.state
        with anyio.move_on_after(KILL_WAIT_S):
            while after == actor.state:
                await anyio.sleep(0.25)
                scope.fresh()  # each round reads the actor again
                after = (await self.get(actor.actor_id)).state
        done = "is now" if after != actor.state else "was killed; Ray still reports it"
        return models.ActorKill(
            actor_id=actor.actor_id,
            done=True,
            no_restart=no_restart,
            state_before=actor.state,
            state_after=after,
            message=f"Actor {actor.actor_id} ({actor.class_name}) {done} {after}.",
        )

    async def page(
        self, *, filters: list[Filter], limit: int, detail: bool, notes: list[str]
    ) -> models.ActorList:
        """One page of actors (detail=1 always: restarts and the death cause are detail columns in Ray's schema)
        and the counts per class and state. Ray converts every actor for each list request, and sends those of
        the page. A list that matched more than its page the last time reads its page and, at the same time, the
        GCS's actor table (counted here: the dashboard does not convert or send the rows left out); else, or
        without the GCS, one request reads up to ACTORS_COUNTED matching actors and counts them here, and for a
        list that matched more than that, the page and Ray's summary are read together."""
        key = repr(filters)
        known = self._matched.get(key, 0)
        by_gcs = (
            known > limit
            and time.monotonic() - self._gcs_missed_at >= GCS_RETRY_S
            and all(k in GCS_ACTOR_FILTERS and p == "=" for k, p, _v in filters)
        )
        counted: dict[str, dict[str, int]] | None = None
        if by_gcs:
            found, counted = await gather(
                self.state.actors(filters=filters, limit=max(1, limit)), self._gcs_counts(filters)
            )
            summary = None
        elif known > ACTORS_COUNTED:
            found, summary = await gather(
                self.state.actors(filters=filters, limit=max(1, limit)),
                self.state.summary("actors", filters=filters),
            )
        else:
            found, summary = await self.state.actors(filters=filters, limit=max(limit, ACTORS_COUNTED)), None
        matched = int(found.get("num_filtered") or 0)
        self._matched[key] = matched
        while len(self._matched) > MATCHED_KEPT:
            del self._matched[next(iter(self._matched))]
        every = found["result"]
        cluster: Mapping[str, Any] | None
        if len(every) >= matched:
            cluster = actor_summary_from_rows(every)
        elif counted is not None:
            cluster = {"summary": {as_token(c): {"state_counts": n} for c, n in counted.items()}}
        else:
            summary = summary if summary is not None else await self.state.summary("actors", filters=filters)
            cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster")
        rows = every[:limit]
        await self.secrets.learn(job_ids_of(rows))
        return build_actor_list(
            total=int(found.get("total") or 0),
            matched=matched,
            rows=rows,
            summary=cluster,
            limit=limit,
            detail=detail,
            notes=notes + state_notes("actors", found),
        )
