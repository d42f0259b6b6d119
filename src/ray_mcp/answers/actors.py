"""Actors: list them with exact totals, show one (State API), kill one (through the GCS, as ray.kill does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from ray_mcp import models
from ray_mcp.errors import NotFound
from ray_mcp.shaping.actors import actor_from_state, actor_summary_from_rows, build_actor_list
from ray_mcp.sources import scope
from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.gcs import Gcs
from ray_mcp.sources.ids import check_id
from ray_mcp.sources.query import Filter

KILL_WAIT_S = 10.0


class Actors:
    """The actors of one cluster."""

    def __init__(self, client: Dashboard, gcs: Gcs) -> None:
        self.client = client
        self.gcs = gcs

    async def get(self, actor_id: str) -> models.Actor:
        check_id("actor", actor_id)
        _total, _matched, rows, _notes = await self.client.state_page(
            "actors", filters=[("actor_id", "=", actor_id)], limit=1, detail=True
        )
        if not rows:
            raise NotFound(
                f"No actor {actor_id!r} in the cluster at {self.client.dashboard_url}. "
                "Call list_actors to see the actor ids that exist."
            )
        return actor_from_state(rows[0], detail=True)

    async def kill(self, actor: models.Actor, *, no_restart: bool) -> models.ActorKill:
        """Force-kill an actor through the GCS (KillActorViaGcs: what ray.kill does, without a driver; the
        dashboard has no route for it), then watch it leave its state (bounded: the GCS updates within a
        second or two)."""
        await self.gcs.kill_actor(actor.actor_id, no_restart=no_restart)
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
        # detail=1 always: restarts and the death cause are detail columns in Ray's schema. Only `limit` rows come.
        total, matched, rows, ray_notes = await self.client.state_page(
            "actors", filters=filters, limit=limit, detail=True
        )
        # The counts per class and state: from the page when every matching actor is on it, else the State
        # API's summary.
        cluster: Mapping[str, Any] | None = actor_summary_from_rows(rows) if len(rows) >= matched else None
        if cluster is None:
            summary = await self.client.summary("actors", filters=filters)
            cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster")
        return build_actor_list(
            total=total,
            matched=matched,
            rows=rows,
            summary=cluster,
            limit=limit,
            detail=detail,
            notes=notes + ray_notes,
        )
