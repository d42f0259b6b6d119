"""Fair shares of what the server holds for its callers: HTTP sessions and long log follows.

A global cap alone lets one caller fill it and lock every other out. So each cap has a share per caller below
it, and what a caller takes beyond its share is refused at once, with the reason, while the rest stays free for
the others (the job watches of live.py follow the same rule, per client connection):

* ``SessionShares``, in front of the SDK's streamable HTTP session manager: one caller (its peer address,
  ``caller_of``) holds at most ``max_sessions_per_client`` of the ``max_sessions`` sessions; at a cap, its own
  longest-idle session makes room for its new one; and a session that made no request after its
  ``initialize`` is closed after ``session_unused_timeout_s`` (a bare ``initialize`` would otherwise hold its
  slot for the whole idle timeout).
* ``Shares`` for ``tail_logs`` follows, each of which holds one dashboard connection for up to a minute: at
  most ``LOG_FOLLOWS_MAX`` at once and ``LOG_FOLLOWS_PER_CLIENT`` per caller (``owner_of``), far below the
  dashboard client's ``DASHBOARD_CONNECTIONS``, so short calls always find a connection.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ray_mcp import sdk_private
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import SESSION_SWEEP_MAX_S as SWEEP_MAX_S
from ray_mcp.limits import SESSION_SWEEP_MIN_S as SWEEP_MIN_S

log = logging.getLogger("ray_mcp")


class ShareExhausted(RayMCPError):
    """A caller asked for more than its share of a bounded resource (or the resource is full)."""


class Shares:
    """Counts per owner under a total: ``take`` refuses past the owner's share or past the total."""

    def __init__(self, what: str, *, total: int, per_owner: int) -> None:
        self.what = what
        self.total = total
        self.per_owner = per_owner
        self._held: dict[object, int] = {}

    @property
    def held(self) -> int:
        return sum(self._held.values())

    @contextmanager
    def take(self, owner: object) -> Iterator[None]:
        """Hold one for ``owner`` for the block (the event loop's single thread: no lock needed)."""
        mine = self._held.get(owner, 0)
        if mine >= self.per_owner:
            raise ShareExhausted(
                f"This client already runs {mine} {self.what}, its share of the {self.total} ray-mcp runs at "
                "once; wait for one to end, or call without it."
            )
        if self.held >= self.total:
            raise ShareExhausted(
                f"ray-mcp already runs {self.total} {self.what}, the most at once; retry when one ends, or call "
                "without it."
            )
        self._held[owner] = mine + 1
        try:
            yield
        finally:
            left = self._held[owner] - 1
            if left:
                self._held[owner] = left
            else:
                del self._held[owner]


def caller_of(scope: Scope) -> str:
    """Who sends an HTTP request: its peer address, as the connection gives it, or as a proxy the operator named
    (``--trusted-proxy``: uvicorn then takes X-Forwarded-For from it, and from nothing else). Never what the
    client writes itself: not a forwarding header from anyone else, and not its Authorization header (with a
    token configured every client sends the same one; without, nothing checks it)."""
    client = scope.get("client")
    return str(client[0]) if client else "?"


LOCAL_CALLER = "local"  # stdio's one client (and an in-memory one): no peer, no credential


def caller_of_request(request: Any) -> str:
    """Who sends a request, from the SDK's per-request ``ctx.request``: over HTTP (a Starlette request) its
    caller (``caller_of``); otherwise the one local client."""
    scope = getattr(request, "scope", None)
    return caller_of(scope) if scope is not None else LOCAL_CALLER


def owner_of(ctx: Any) -> object:
    """Whose share a call takes: over HTTP its caller (a 2026-07-28 client sends each request on its own, so
    neither a session nor a connection names it); on stdio the one connection."""
    scope = getattr(ctx.request_context.request, "scope", None)
    if scope is not None:
        return caller_of(scope)
    return id(sdk_private.connection_of(ctx.session))


class SessionUse(ServerMiddleware[Any]):
    """Which streamable HTTP sessions have made an MCP request (anything but ``initialize`` and notifications
    such as ``notifications/initialized``): a session that made none is unused, whatever HTTP it sent."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        scope = getattr(ctx.request, "scope", None)
        if ctx.request_id is not None and ctx.method != "initialize" and scope is not None:
            session = Headers(scope=scope).get("mcp-session-id")
            if session is not None:
                self.used.add(session)
        return await call_next(ctx)


class SessionShares:
    """ASGI middleware before the SDK's streamable HTTP app: a share of sessions per caller, sessions never used
    closed after a short grace, and, at a cap, the caller's own longest-idle session closed to make room.

    * A session that made no MCP request (``SessionUse``) within ``unused_timeout_s`` of its ``initialize`` is
      closed, handshake finished or not: bare ``initialize`` requests cannot hold slots for the SDK's idle
      timeout (30 minutes).
    * A caller at its share (``per_client``), or any caller when every session is taken, that opens another gets
      it in place of its own longest-idle session (none with a request in progress); only when it has none to
      give up is it refused. So one caller never takes another's slot, and never locks itself out either.

    The session manager's own table is the truth of which sessions are open; this remembers who opened each,
    when each was last active, and what is in progress.
    """

    def __init__(
        self, app: ASGIApp, manager: Any, *, per_client: int, unused_timeout_s: float, use: SessionUse
    ) -> None:
        self.app = app
        self.manager = manager
        self.per_client = per_client
        self.unused_timeout_s = unused_timeout_s
        self.use = use
        self._callers: dict[str, str] = {}  # session id -> who opened it
        self._opened: dict[str, float] = {}  # session id -> when
        self._active: dict[str, float] = {}  # session id -> its last HTTP request (start or end)
        self._busy: dict[str, int] = {}  # session id -> its POST and DELETE requests in progress

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # the app's whole life: sweep unused sessions while it runs
            async with anyio.create_task_group() as sweeping:
                sweeping.start_soon(self._sweep)
                try:
                    await self.app(scope, receive, send)
                finally:
                    sweeping.cancel_scope.cancel()
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self._forget_closed()
        await self._close_unused()
        session = Headers(scope=scope).get("mcp-session-id")
        if session is not None:
            await self._in_session(session, scope, receive, send)
            return
        caller = caller_of(scope)
        if scope.get("method") == "POST" and not await self._room_for(caller):
            mine = sum(1 for c in self._callers.values() if c == caller)
            log.warning(
                "ray-mcp: refused a new session: its client holds %d, each with a request running", mine
            )
            await _refuse(send, mine, self.manager.max_sessions)
            return

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                opened = Headers(raw=message.get("headers") or []).get("mcp-session-id")
                if opened is not None:
                    self._callers[opened] = caller
                    self._opened[opened] = self._active[opened] = time.monotonic()
            await send(message)

        await self.app(scope, receive, watch)

    async def _in_session(self, session: str, scope: Scope, receive: Receive, send: Send) -> None:
        long_lived = scope.get("method") == "GET"  # the standalone SSE stream: open while the client listens
        self._active[session] = time.monotonic()
        if not long_lived:
            self._busy[session] = self._busy.get(session, 0) + 1
        try:
            await self.app(scope, receive, send)
        finally:
            if not long_lived:
                left = self._busy.get(session, 1) - 1
                if left > 0:
                    self._busy[session] = left
                else:
                    self._busy.pop(session, None)
            if session in self._callers:
                self._active[session] = time.monotonic()

    async def _room_for(self, caller: str) -> bool:
        """Whether a new session of ``caller`` may open, after closing its longest-idle one if it must."""
        mine = [s for s, c in self._callers.items() if c == caller]
        full = self.manager.max_sessions is not None and len(self._callers) >= self.manager.max_sessions
        if len(mine) < self.per_client and not full:
            return True
        idle = [s for s in mine if not self._busy.get(s)]
        if not idle:
            return not mine and not full  # a caller with nothing to give up: the SDK's own cap answers
        victim = min(idle, key=lambda s: self._active.get(s, 0.0))
        log.info("ray-mcp: closing session %s, its client's longest idle, for the new one", victim[:8])
        await self._close(victim)
        return True

    def _forget_closed(self) -> None:
        open_now = sdk_private.open_sessions(self.manager)
        for gone in [s for s in self._callers if s not in open_now]:
            self._forget(gone)

    def _forget(self, session: str) -> None:
        self._callers.pop(session, None)
        self._opened.pop(session, None)
        self._active.pop(session, None)
        self._busy.pop(session, None)
        self.use.used.discard(session)

    async def _close(self, session: str) -> None:
        self._forget(session)
        await sdk_private.close_session(self.manager, session)

    async def _sweep(self) -> None:
        """Close unused sessions on a timer too: on a server that gets no other request, a bare ``initialize``
        would otherwise hold its slot until the next request arrives (every request also sweeps)."""
        period = min(max(self.unused_timeout_s / 4, SWEEP_MIN_S), SWEEP_MAX_S)
        while True:
            await anyio.sleep(period)
            self._forget_closed()
            await self._close_unused()

    async def _close_unused(self) -> None:
        deadline = time.monotonic() - self.unused_timeout_s
        for session in [s for s, at in self._opened.items() if at < deadline and s not in self.use.used]:
            log.info("ray-mcp: closing session %s: no request since its initialize", session[:8])
            await self._close(session)


async def _refuse(send: Send, mine: int, total: int | None) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32603,
                "message": f"Too many sessions from this client: it holds {mine}, its share of the {total} ray-mcp "
                "serves at once. Close one (DELETE it) or reuse it.",
            },
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
