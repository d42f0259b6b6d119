"""Every private name of a dependency's server stack that ray-mcp uses: of the MCP SDK, and of uvicorn.

Tested with mcp 2.3.0 (pyproject.toml pins ``mcp>=2.3,<2.4``) and uvicorn 0.54.0. tests/test_sdk_private.py
fails, naming the attribute, when one of the names below moves, and fails when any other module of ray-mcp uses
a private name of mcp, mcp_types, uvicorn or h11. At the package root, as both server/ and guard/ use it. What
each name is for, and why no public one does it:

* ``MCPServer._lowlevel_server``, the low-level ``Server`` behind an MCPServer (whose ``add_request_handler``
  and ``run`` are public). MCPServer has no hook for the 2025 ``resources/subscribe`` and
  ``resources/unsubscribe`` requests (an ``Extension``'s methods may not be spec methods), and the
  ``resources.subscribe`` capability is derived from the low-level server's handlers; and stdio runs
  ``Server.run`` on streams that answer malformed lines (``MCPServer.run_stdio_async`` takes no streams).
* ``MCPServer._tool_manager``, for the registered ``Tool`` whose description and schemas build.py compacts once
  (publish_compact): MCPServer lists its tools from these, and has no public way to register a ``Tool`` built
  beforehand other than its constructor.
* ``ServerSession._connection``, the client connection a request's session belongs to. A 2025 subscription
  lasts as long as the connection (each request gets its own session object): the connection is its key,
  and its public ``exit_stack`` drops the subscription when the connection closes.
* ``ServerSession``'s instance state, copied by ``session_as``: SafetyMiddleware hands each request a copy of
  its session that redacts what it sends (three public methods overridden); the SDK has no public way to make
  one session from another.
* ``StreamableHTTPSessionManager._server_instances`` and ``._discard_session``: the sessions open now, and
  closing one (shares.py closes a session never used after its ``initialize``, and counts each caller's open
  sessions). The manager only closes a session on the client's DELETE or after its one idle timeout.
* uvicorn's ``H11Protocol`` (``uvicorn.protocols.http.h11_impl``), its ``on_response_complete`` hook and its
  ``conn``, ``loop``, ``transport`` and ``logger`` attributes: uvicorn's ``Config`` has no timeout for request
  headers (``timeout_keep_alive`` stops once a byte of the next request arrives), and h11 keeps a connection
  that trickles a partial request forever (slowloris). ``h11.Connection.their_state`` is h11's public API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, TypeVar

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

SessionT = TypeVar("SessionT", bound=ServerSession)


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The low-level Server that an MCPServer dispatches requests with."""
    return server._lowlevel_server


def registered_tool(server: MCPServer[Any], name: str) -> Tool | None:
    """The Tool that ``server.add_tool`` registered under ``name``."""
    return server._tool_manager.get_tool(name)


def connection_of(session: ServerSession) -> Connection:
    """The client connection a request's session belongs to (the same object for every request on it)."""
    return session._connection


def open_sessions(manager: StreamableHTTPSessionManager) -> Mapping[str, Any]:
    """The streamable HTTP sessions open now, by session id."""
    return manager._server_instances


async def close_session(manager: StreamableHTTPSessionManager, session_id: str) -> None:
    """Close one session now: its id answers 404 from then on, and its server task ends."""
    transport = manager._server_instances.get(session_id)
    if transport is not None:
        await manager._discard_session(session_id, transport)


def session_as(session: ServerSession, kind: type[SessionT]) -> SessionT:
    """A copy of the request's session as ``kind``, a subclass that overrides only public methods: it sends
    through the same channels, for the same request, with the same log levels."""
    copy = kind.__new__(kind)
    copy.__dict__.update(vars(session))
    return copy


def bounded_h11_protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request headers are not complete in time."""
    import h11  # HTTP only: stdio never imports them
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm_header_timer()  # the next request on this keep-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            super().connection_lost(exc)

        def _arm_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_overdue)

        def _headers_overdue(self) -> None:
            self._header_timer = None
            # IDLE: h11 has not seen a complete request line and headers since the connection (or the last
            # response) began. A request in progress (body, or a long SSE response) is left alone.
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.logger.debug("Closing a connection whose request headers did not arrive in time")
                self.transport.close()

    return BoundedH11Protocol
