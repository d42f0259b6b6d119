"""Actors: list them with exact totals, show one, kill one (through the GCS, as ray.kill does)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread

from ray_mcp import models
from ray_mcp.errors import NotFound
from ray_mcp.ray_api import gcs, ray_import
from ray_mcp.ray_api.client import RayClient
from ray_mcp.ray_api.ids import check_id
from ray_mcp.ray_api.query import Filter
from ray_mcp.shaping.actors import actor_from_state, actor_summary_from_rows, build_actor_list

KILL_WAIT_S = 10.0


class ActorsAPI(RayClient):
    """The actors of one cluster."""

    async def list_actors(
        self, *, filters: list[Filter], limit: int, detail: bool, notes: list[str]
    ) -> models.ActorList:
        if self.gcs_connected and (page := await self._gcs_page(filters, limit)) is not None:
            # The GCS's actor table in one call (~5 ms at 400 actors), filtered and sorted here as the State API
            # would: the page and the exact counts from one read, past the State API's 10,000 cap too.
            total, matched, rows, counts = page
            await self.learn_job_secrets({str(r["job_id"]) for r in rows if r.get("job_id")})
            summary = {"summary": {cls: {"state_counts": states} for cls, states in counts.items()}}
            return build_actor_list(
                total=total,
                matched=matched,
                rows=rows,
                summary=summary,
                limit=limit,
                detail=detail,
                notes=notes,
            )
        # detail=1 always: restarts and the death cause are detail columns in Ray's schema. Only `limit` rows come.
        total, matched, rows, ray_notes = await self._state_page(
            "actors", filters=filters, limit=limit, detail=True
        )
        # The counts: from the page when every matching actor is on it, else the State API's summary (the same
        # counts as the GCS's table; a call without the GCS channel does not wait ~0.4 s for Ray's import and
        # the GCS's lookup: the warm-up opens it, and the GCS page above answers from then on).
        cluster: Mapping[str, Any] | None = actor_summary_from_rows(rows) if len(rows) >= matched else None
        if cluster is None:
            summary = await self._summary("actors", filters=filters)
            cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster")
        return build_actor_list(
            total=total, matched=matched, rows=rows, summary=cluster, limit=limit, detail=detail,
            notes=notes + ray_notes,
        )  # fmt: skip

    async def _gcs_page(
        self, filters: list[Filter], limit: int
    ) -> tuple[int, int, list[dict[str, Any]], dict[str, dict[str, int]]] | None:
        try:
            return await anyio.to_thread.run_sync(
                lambda: gcs.actor_page(self._gcs(), filters, limit, self.timeout_s)
            )
        except Exception:  # the GCS stopped answering: the State API answers instead
            return None

    async def actor_rows(self) -> list[dict[str, Any]] | None:
        """Every actor as the State API's detail rows, read from the GCS in one call (concurrent askers share
        it); their jobs' env_vars learnt as secrets. None when the GCS cannot be reached from here."""

        async def read() -> list[dict[str, Any]] | None:
            try:
                await ray_import.ensure("gcs")
                return await anyio.to_thread.run_sync(lambda: gcs.actor_rows(self._gcs(), self.timeout_s))
            except Exception:  # the GCS may be unreachable from here: the caller asks the State API
                return None

        rows: list[dict[str, Any]] | None = await self.shared("actor_rows", read)
        if rows is not None:
            await self.learn_job_secrets({str(r["job_id"]) for r in rows if r.get("job_id")})
        return rows

    async def get_actor(self, actor_id: str) -> models.Actor:
        check_id("actor", actor_id)
        _total, _matched, rows, _notes = await self._state_page(
            "actors", filters=[("actor_id", "=", actor_id)], limit=1, detail=True
        )
        if not rows:
            raise NotFound(
                f"No actor {actor_id!r} in the cluster at {self.dashboard_url}. "
                "Call list_actors to see the actor ids that exist."
            )
        return actor_from_state(rows[0], detail=True)

    async def kill_actor_and_wait(self, actor: models.Actor, *, no_restart: bool) -> models.ActorKill:
        """Kill, then watch the actor leave its state (bounded wait: the GCS updates within a second or two)."""
        await self.kill_actor(actor.actor_id, no_restart=no_restart)
        after = actor.state
        with anyio.move_on_after(KILL_WAIT_S):
            while after == actor.state:
                await anyio.sleep(0.25)
                after = (await self.get_actor(actor.actor_id)).state
        done = "is now" if after != actor.state else "was killed; Ray still reports it"
        return models.ActorKill(
            actor_id=actor.actor_id, done=True, no_restart=no_restart, state_before=actor.state, state_after=after,
            message=f"Actor {actor.actor_id} ({actor.class_name}) {done} {after}.",
        )  # fmt: skip

    async def kill_actor(self, actor_id: str, *, no_restart: bool) -> None:
        """Force-kill an actor through the GCS (KillActorViaGcs): what ray.kill does, without a driver."""
        kill = functools.partial(gcs.kill_actor, no_restart=no_restart, timeout_s=self.timeout_s)
        await ray_import.ensure("gcs")
        await anyio.to_thread.run_sync(lambda: kill(self._gcs(), str(self.gcs_address), actor_id))
