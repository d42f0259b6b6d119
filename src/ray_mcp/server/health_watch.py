"""The cluster's health, live: the resource ``ray://cluster/health`` (``?cluster=<name>`` on a server of several
clusters), which clients can subscribe to.

Reading it gives cluster_health's answer, the firing alerts of the cluster's Prometheus when one is known, and the
changes the last notification was about. Subscribing starts one shared poller per cluster, however many sessions
subscribe: every ``HEALTH_POLL_S`` it runs one cluster_health round (diagnosis/watch.py) and, when a problem
appeared, changed severity or cleared (shaping/health_watch.py), notifies every subscriber once
(``notifications/resources/updated``); the subscriber reads the resource again. The first round, made before the
subscribe is answered, is the baseline: what the subscriber reads then is not news.

Both protocol eras are served, as for the job resources (live.py routes each subscription here by its URI):
2025 ``resources/subscribe`` and 2026 ``subscriptions/listen``. Bounds: ``HEALTH_WATCHES_PER_SESSION`` clusters per
client connection; a poller stops when its last subscriber leaves (unsubscribe, a closed listen stream, a session
that is gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus, urlencode

from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ray_mcp.diagnosis.watch import health_round, unreachable_round
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import HEALTH_POLL_S, HEALTH_WATCHES_PER_SESSION
from ray_mcp.server.context import CURRENT_CLUSTER
from ray_mcp.shaping.health_watch import Change, Problem, Round, advance, render_changes, render_problems
from ray_mcp.sources.scope import read_scope

if TYPE_CHECKING:
    from ray_mcp.server.context import App

log = logging.getLogger("ray_mcp.server.health_watch")

HEALTH_URI = "ray://cluster/health"
HEALTH_URI_TEMPLATE = HEALTH_URI + "{?cluster}"
HEALTH_URI_RE = re.compile(r"^ray://cluster/health(?:\?cluster=([^&#]{1,512}))?$")


def is_health_uri(uri: str) -> bool:
    return uri.startswith(HEALTH_URI)


def health_uri(cluster: str | None) -> str:
    return f"{HEALTH_URI}?{urlencode({'cluster': cluster})}" if cluster else HEALTH_URI


def cluster_of_uri(app: App, uri: str) -> str:
    """The cluster a health URI names, checked (one this server serves; named when it serves several)."""
    from ray_mcp.server.live import cluster_of_link

    match = HEALTH_URI_RE.match(uri)
    if match is None:
        raise MCPError(
            INVALID_PARAMS,
            f"Cannot subscribe to {uri!r}: the cluster's health is {HEALTH_URI}, with ?cluster=<name> on a server "
            "of several clusters.",
        )
    return cluster_of_link(app, unquote_plus(match.group(1)) if match.group(1) else None)


@dataclass
class HealthWatch:
    """One cluster's poller, who listens to it, and the problems it holds."""

    cluster: str
    sessions: dict[int, tuple[ServerSession, str]] = field(
        default_factory=dict
    )  # 2025: connection -> (it, uri)
    listeners: Counter[tuple[int, str]] = field(default_factory=Counter)  # 2026: (connection, uri) -> streams
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # the baseline round is in
    problems: dict[str, Problem] | None = None
    last_changes: list[Change] = field(default_factory=list)
    changed_at: float | None = None
    rounds: int = 0
    notified: int = 0

    @property
    def wanted(self) -> bool:
        return sum(self.listeners.values()) > 0 or len(self.sessions) > 0


class HealthWatchers:
    """The shared pollers, one per watched cluster. Safe under concurrent subscribes and unsubscribes."""

    def __init__(
        self,
        app: App,
        publish: Callable[[str], Awaitable[None]],
        *,
        poll_interval_s: float = HEALTH_POLL_S,
        per_session: int = HEALTH_WATCHES_PER_SESSION,
    ) -> None:
        self.app = app
        self._publish = publish
        self._poll_interval_s = poll_interval_s
        self._per_session = per_session
        self._watches: dict[str, HealthWatch] = {}
        self._owned: dict[int, set[str]] = {}  # client connection -> the clusters it watches
        self._lock = asyncio.Lock()

    @property
    def watched(self) -> dict[str, int]:
        """Cluster -> number of subscribers (for tests and logs)."""
        return {c: len(w.sessions) + sum(w.listeners.values()) for c, w in self._watches.items()}

    def watch_of(self, cluster: str) -> HealthWatch | None:
        return self._watches.get(cluster)

    def check(self, uri: str) -> None:
        cluster_of_uri(self.app, uri)

    async def subscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        """Watch the cluster's health for ``session`` (2025) or one listen stream of connection ``owner`` (2026);
        answered once the watch's baseline round is in."""
        from ray_mcp.server.live import connection_key

        cluster = cluster_of_uri(self.app, uri)
        key = connection_key(session) if session is not None else owner or 0
        async with self._lock:
            owned = self._owned.setdefault(key, set())
            if cluster not in owned and len(owned) >= self._per_session:
                raise MCPError(
                    INVALID_PARAMS,
                    f"This client already watches the health of {len(owned)} clusters, the most one client may "
                    f"({self._per_session}); unsubscribe from one first.",
                )
            watch = self._watches.get(cluster)
            if watch is None:
                watch = self._watches[cluster] = HealthWatch(cluster)
            owned.add(cluster)
            if session is None:
                watch.listeners[key, uri] += 1
            else:
                watch.sessions[key] = (session, uri)
            if watch.task is None or watch.task.done():
                watch.task = asyncio.get_running_loop().create_task(
                    self._poll(watch), name=f"health watch {cluster}"
                )
        await watch.ready.wait()

    async def unsubscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        from ray_mcp.server.live import connection_key

        cluster = cluster_of_uri(self.app, uri)
        key = connection_key(session) if session is not None else owner or 0
        async with self._lock:
            owned = self._owned.get(key)
            watch = self._watches.get(cluster)
            if watch is None:
                return
            if session is None:
                watch.listeners[key, uri] -= 1
                if watch.listeners[key, uri] <= 0:
                    del watch.listeners[key, uri]
            else:
                watch.sessions.pop(key, None)
            if owned is not None and not self._still_watches(watch, key):
                owned.discard(cluster)
                if not owned:
                    del self._owned[key]
            if not watch.wanted:
                self._watches.pop(cluster, None)
                if watch.task is not None and watch.task is not asyncio.current_task():
                    watch.task.cancel()

    @staticmethod
    def _still_watches(watch: HealthWatch, key: int) -> bool:
        return key in watch.sessions or any(owner == key for owner, _uri in watch.listeners)

    async def aclose(self) -> None:
        async with self._lock:
            tasks = [w.task for w in self._watches.values() if w.task is not None]
            self._watches.clear()
            self._owned.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task

    async def _poll(self, watch: HealthWatch) -> None:
        """One round every poll interval while anyone listens; notify each round that changed something."""
        try:
            while watch.wanted and self._watches.get(watch.cluster) is watch:
                try:
                    now, _text = await self.one_round(watch.cluster)
                except Exception:  # a bug in a round: logged, and the next round tries again
                    log.exception("ray-mcp: a health round of cluster %s failed", watch.cluster)
                else:
                    state, changes = advance(watch.problems or {}, now)
                    first = watch.problems is None
                    watch.problems = state
                    watch.rounds += 1
                    if changes and not first:
                        watch.last_changes, watch.changed_at = changes, time.time()
                        await self._notify(watch)
                finally:
                    watch.ready.set()
                await asyncio.sleep(self._poll_interval_s)
        finally:
            watch.ready.set()  # a subscriber never waits on a poller that is gone

    async def one_round(self, cluster: str) -> tuple[Round, str]:
        """One round of the cluster's health, read afresh; an unreachable round when the cluster is not found."""
        token = CURRENT_CLUSTER.set(cluster)
        try:
            api = await self.app.api()
            with read_scope():  # each round reads afresh (not through a subscribe call's scope)
                return await health_round(api)
        except RayMCPError as exc:
            log.info("ray-mcp: cannot read the health of cluster %s (will retry): %s", cluster, exc)
            return unreachable_round(str(exc)), f"The cluster could not be read: {exc}"
        finally:
            CURRENT_CLUSTER.reset(token)

    async def _notify(self, watch: HealthWatch) -> None:
        watch.notified += 1
        log.info(
            "ray-mcp: the health of cluster %s changed (%d changes); notifying its subscribers",
            watch.cluster,
            len(watch.last_changes),
        )
        for key, (session, uri) in list(watch.sessions.items()):
            try:
                await session.send_resource_updated(uri)  # the request's session: guarded (guard/middleware)
            except Exception as exc:  # the session is gone: it no longer listens
                log.info("ray-mcp: dropping a subscriber of %s: %s", uri, type(exc).__name__)
                watch.sessions.pop(key, None)
        for uri in {uri for _owner, uri in watch.listeners}:
            await self._publish(uri)


async def read_health(watchers: HealthWatchers, cluster: str | None) -> str:
    """The resource: cluster_health's answer, the watch's problems and its last notified changes, and how to
    subscribe."""
    app = watchers.app
    name = cluster_of_uri(app, health_uri(cluster))
    now, text = await watchers.one_round(name)
    parts = [text]
    alerts = [p for p in now.problems.values() if p.source == "alerts"]
    if alerts:
        parts += ["", "Firing Prometheus alerts:", *render_problems({p.key: p for p in alerts})]
    parts += [f"Note: {n}" for n in now.notes]
    watch = watchers.watch_of(name)
    if watch is not None:
        parts += ["", *render_changes(watch.last_changes, watch.changed_at)]
    parts.append(
        f"\nSubscribe to {health_uri(cluster)} to be notified when a problem appears, changes severity or clears "
        f"(one round every {HEALTH_POLL_S:g} s)."
    )
    return "\n".join(parts)
