"""One shared poller per watched key, however many subscribers: what the job resources (live.py) and the cluster's
health (health_watch.py) both subscribe through.

A ``Feed`` says what is watched: the key a URI names (refusing any other URI), the state one key holds, and one
round of polling it. ``SharedPollers`` does the rest, the same for every feed: the first subscriber of a key starts
its poller, and a subscribe is answered once that poller's first round (the baseline) is in; every subscriber of a
round that changed something is notified once (2025 sessions through their own session, 2026 listen streams
through ``publish``); a client connection watches at most ``per_session`` keys, and the server at most
``max_watched`` when the feed has such a bound; the poller stops when its last subscriber leaves, or when the feed
says the key has ended. Polls are coroutines, so nothing blocks the event loop; one lock orders subscribes,
unsubscribes and a poller's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ray_mcp import sdk_private

log = logging.getLogger("ray_mcp.server.pollers")

K = TypeVar("K")
S = TypeVar("S")


class Then(enum.Enum):
    """What a poller does after a round."""

    AGAIN = "again"  # poll again after the interval
    END = "end"  # nothing changes any more: stop polling, keep the subscribers (the resource reads the end)
    GONE = "gone"  # the key no longer exists: drop its watch, subscribed or not


@dataclass(frozen=True)
class Polled:
    """One round's outcome: whether every subscriber is notified, and what the poller does next."""

    changed: bool = False
    then: Then = Then.AGAIN


class Feed(Protocol[K, S]):
    """What one kind of watch polls. ``share_full`` and ``all_full`` are the refusals, formatted with
    ``watching`` (the keys the client watches), ``per_session`` and ``max_watched``; a feed without ``all_full``
    has no bound on the keys watched at once."""

    @property
    def share_full(self) -> str: ...

    @property
    def all_full(self) -> str | None: ...

    def key_of(self, uri: str) -> K:
        """The key a URI names; raises MCPError (INVALID_PARAMS) for a URI that cannot be watched."""
        ...

    def label(self, key: K) -> str:
        """The watch's name in logs and its task's name."""
        ...

    async def admit(self, key: K) -> None:
        """Before a key's first watch starts: raise MCPError when there is nothing to watch."""
        ...

    def start(self, key: K) -> S:
        """The state of a new watch, before its baseline round."""
        ...

    async def poll(self, key: K, state: S) -> Polled:
        """One round: read afresh, update ``state``, say whether the subscribers hear of it."""
        ...


@dataclass
class Watch(Generic[K, S]):
    """One key's poller, who listens to it, and the feed's state of it."""

    key: K
    state: S
    sessions: dict[int, tuple[ServerSession, str]] = field(
        default_factory=dict
    )  # 2025: connection -> (it, uri)
    listeners: Counter[tuple[int, str]] = field(default_factory=Counter)  # 2026: (connection, uri) -> streams
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # the baseline round is in
    rounds: int = 0
    notified: int = 0

    @property
    def subscribers(self) -> int:
        return len(self.sessions) + sum(self.listeners.values())

    @property
    def wanted(self) -> bool:
        return self.subscribers > 0

    def holds(self, connection: int) -> bool:
        """Whether the client connection still subscribes, by a session or by any listen stream."""
        return connection in self.sessions or any(owner == connection for owner, _uri in self.listeners)


def connection_key(session: ServerSession) -> int:
    """One key per client connection (a 2025 session), whichever request's session object carries it."""
    return id(sdk_private.connection_of(session))


class SharedPollers(Generic[K, S]):
    """The shared pollers of one feed, one per watched key. Safe under concurrent subscribes and unsubscribes."""

    def __init__(
        self,
        feed: Feed[K, S],
        publish: Callable[[str], Awaitable[None]],
        *,
        poll_interval_s: float,
        per_session: int,
        max_watched: int | None = None,
    ) -> None:
        if max_watched is not None and feed.all_full is None:
            raise ValueError("a bound on the keys watched at once needs the feed's refusal (all_full)")
        self.feed = feed
        self._publish = publish  # the 2026 bus
        self.poll_interval_s = poll_interval_s  # read at each round (a test may shorten it)
        self._per_session = per_session
        self._max_watched = max_watched
        self._watches: dict[K, Watch[K, S]] = {}
        self._owned: dict[int, set[K]] = {}  # client connection -> the keys it watches
        self._lock = asyncio.Lock()

    @property
    def watched(self) -> dict[K, int]:
        """Key -> number of subscribers (for tests and logs)."""
        return {key: w.subscribers for key, w in self._watches.items()}

    def watch_of(self, key: K) -> Watch[K, S] | None:
        return self._watches.get(key)

    def check(self, uri: str) -> None:
        """Refuse, before anything is watched, a URI this feed cannot watch."""
        self.feed.key_of(uri)

    def _refusal(self, form: str, watching: int) -> MCPError:
        text = form.format(watching=watching, per_session=self._per_session, max_watched=self._max_watched)
        return MCPError(INVALID_PARAMS, text)

    async def subscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        """Watch the URI's key for ``session`` (2025) or for one listen stream of connection ``owner`` (2026);
        answered once the watch's baseline round is in."""
        key = self.feed.key_of(uri)
        connection = connection_key(session) if session is not None else owner or 0
        if key not in self._watches:
            await self.feed.admit(key)
        async with self._lock:
            owned = self._owned.setdefault(connection, set())
            if key not in owned and len(owned) >= self._per_session:
                raise self._refusal(self.feed.share_full, len(owned))
            for other, ended in list(self._watches.items()):  # ended keys whose subscribers are gone
                if not ended.wanted and (ended.task is None or ended.task.done()):
                    del self._watches[other]
            watch = self._watches.get(key)
            if watch is None:
                if (
                    self.feed.all_full
                    and self._max_watched is not None
                    and len(self._watches) >= self._max_watched
                ):
                    raise self._refusal(self.feed.all_full, len(owned))
                watch = self._watches[key] = Watch(key, self.feed.start(key))
            owned.add(key)
            if session is None:
                watch.listeners[connection, uri] += 1
            else:
                watch.sessions[connection] = (session, uri)
            if watch.task is None or watch.task.done():
                watch.task = asyncio.get_running_loop().create_task(
                    self._poll(watch), name=self.feed.label(key)
                )
        await watch.ready.wait()

    async def unsubscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        key = self.feed.key_of(uri)
        connection = connection_key(session) if session is not None else owner or 0
        async with self._lock:
            watch = self._watches.get(key)
            if watch is not None:
                if session is None:
                    watch.listeners[connection, uri] -= 1
                    if watch.listeners[connection, uri] <= 0:
                        del watch.listeners[connection, uri]
                else:
                    watch.sessions.pop(connection, None)
            if watch is None or not watch.holds(connection):
                self._disown(connection, key)
            if watch is not None and not watch.wanted:
                self._watches.pop(key, None)
                if watch.task is not None and watch.task is not asyncio.current_task():
                    watch.task.cancel()

    def _disown(self, connection: int, key: K) -> None:
        owned = self._owned.get(connection)
        if owned is not None:
            owned.discard(key)
            if not owned:
                del self._owned[connection]

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

    async def _poll(self, watch: Watch[K, S]) -> None:
        """One round every poll interval while anyone listens, until the feed says the key ended; notify each
        round that changed something."""
        then = Then.AGAIN
        try:
            while watch.wanted and self._watches.get(watch.key) is watch:
                try:
                    polled = await self.feed.poll(watch.key, watch.state)
                    watch.rounds += 1
                    then = polled.then
                    if polled.changed:
                        await self._notify(watch)
                except Exception:  # a bug in a round: logged, and the next round tries again
                    log.exception("ray-mcp: a round of %s failed", self.feed.label(watch.key))
                finally:
                    watch.ready.set()
                if then is not Then.AGAIN:
                    break
                await asyncio.sleep(self.poll_interval_s)
        finally:
            watch.ready.set()  # a subscriber never waits on a poller that is gone
        async with self._lock:
            if self._watches.get(watch.key) is watch and (not watch.wanted or then is Then.GONE):
                self._watches.pop(watch.key, None)  # a key that is gone holds no watch, subscribed or not
                for connection in list(self._owned):
                    self._disown(connection, watch.key)

    async def _notify(self, watch: Watch[K, S]) -> None:
        watch.notified += 1
        for connection, (session, uri) in list(watch.sessions.items()):
            try:
                await session.send_resource_updated(uri)  # the request's session: guarded (guard/middleware)
            except Exception as exc:  # the session is gone: it no longer listens
                log.info("ray-mcp: dropping a subscriber of %s: %s", uri, type(exc).__name__)
                watch.sessions.pop(connection, None)
        for uri in {uri for _owner, uri in watch.listeners}:
            await self._publish(uri)  # the bus cleans the URI where it is published (live.register)
