"""The per-call read scope: within one tool call (one resources/read, one prompts/get, one poll of a live job),
each distinct read is made once and every asker shares it, while it is in flight and after it ended.

The server opens a scope where a call enters (server/build.py's ReadScopes middleware; server/live.py per
poll). A source asks ``shared(key, read)``: inside a scope, the first asker makes the read and the others get
its result, or the same failure (one call gives consistent answers and sends a bounded number of requests);
outside a scope, the read is just made. Nothing outlives the call, so no answer is ever stale.

A write (any request that is not a GET) empties the scope: what the call reads after it is read again. So
does each round of a loop that polls (``fresh()``: wait_for_job, kill_actor's wait, following a log).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")


class ReadScope:
    """The reads of one call, by key: each one's outcome (a result or a failure), or the read under way."""

    def __init__(self) -> None:
        self._reads: dict[Hashable, asyncio.Future[Any]] = {}

    def clear(self) -> None:
        """Forget every read: the next asker of each reads again (a read under way still ends for its askers)."""
        self._reads.clear()

    async def shared(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        while True:
            known = self._reads.get(key)
            if known is None:
                break
            try:
                result: T = await asyncio.shield(known)
                return result
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not known.cancelled() or (task is not None and task.cancelling()):
                    raise  # this asker was cancelled, not the read it waited for
                # the asker that made the read was cancelled (it was forgotten): make it again
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._reads[key] = future
        try:
            value = await read()
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                if self._reads.get(key) is future:  # not an outcome: the next asker reads again
                    del self._reads[key]
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning when nobody else asked
            raise
        future.set_result(value)
        return value


_CURRENT: ContextVar[ReadScope | None] = ContextVar("ray_mcp_read_scope", default=None)


@contextmanager
def read_scope() -> Iterator[ReadScope]:
    """A new scope for what runs inside (a call, a poll), in place of any scope around it."""
    scope = ReadScope()
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


async def shared(key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
    """``read()``, made once per key within the current scope; outside a scope, made every time."""
    scope = _CURRENT.get()
    if scope is None:
        return await read()
    return await scope.shared(key, read)


def fresh() -> None:
    """What the current call reads from now on is read again: after a write, and at each round of a poll."""
    scope = _CURRENT.get()
    if scope is not None:
        scope.clear()
