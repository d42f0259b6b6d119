"""Every private name of a dependency that ray-mcp uses: of the MCP SDK, uvicorn, and Ray.

Tested with mcp 2.3.0 (pyproject.toml pins ``mcp>=2.3,<2.4``), uvicorn 0.54.0 and Ray 2.60.0 (pinned).
tests/test_sdk_private.py fails, naming the attribute, when one of the names below moves, and fails when any
other module of ray-mcp uses a private name of mcp, mcp_types, uvicorn, h11 or ray. At the package root, as
server/, guard/, sources/ and answers/ use it; it imports Ray at module level, as sources/ do (see
tests/test_parallel_first_calls.py). What each name is for, and why no public one does it:

* ``MCPServer._lowlevel_server``, the low-level ``Server`` behind an MCPServer (whose ``add_request_handler``
  and ``run`` are public). MCPServer has no hook for the 2025 ``resources/subscribe`` and
  ``resources/unsubscribe`` requests (an ``Extension``'s methods may not be spec methods), and the
  ``resources.subscribe`` capability is derived from the low-level server's handlers; and stdio runs
  ``Server.run`` on streams that answer malformed lines (``MCPServer.run_stdio_async`` takes no streams).
* ``Server.create_initialization_options`` wrapped on the low-level server (``announce_tool_list_changes``): the
  2025 ``tools.listChanged`` capability comes from the ``NotificationOptions`` each transport passes (none, so
  off), and MCPServer takes none; ray-mcp's offered tools do change (server/toolsets.py) and it says so.
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
* Ray's ``ray._private.runtime_env.packaging._dir_travel`` and ``_get_excludes``: the walk Ray's packaging
  makes of a ``working_dir`` (same excludes, ``.gitignore`` and ``.rayignore``), so that sources/uploads.py
  checks exactly the files Ray will zip. Ray has no public walk. And its ``GCS_STORAGE_MAX_SIZE``: the most a
  zipped working_dir may weigh (the GCS's gRPC message limit, RAY_max_grpc_message_size), which kuberay_lint
  holds a local working_dir to. Ray names it nowhere public.
* Ray's ``ray._private.grpc_utils.init_grpc_channel``, ``ray._private.authentication.authentication_utils
  .is_token_auth_enabled`` and ``ray._common.tls_utils.load_certs_from_env``: a GCS channel with Ray's own TLS
  (RAY_USE_TLS) and token settings (sources/gcs.py). Ray's public API reaches the GCS only through
  ``ray.init``, which joins the cluster as a driver.
* Ray's ``JobSubmissionClient._do_request``: every request of the Job SDK, overridden by ``job_client`` to
  send through the cluster's own HTTP client (exactly this cluster's headers, a timeout on every request).
  The SDK's public constructor sends with ``requests``: no timeout, and in token mode this process's token
  to every cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from mcp.server.connection import Connection
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from ray._common.tls_utils import load_certs_from_env
from ray._private.authentication import authentication_utils
from ray._private.grpc_utils import init_grpc_channel
from ray._private.runtime_env.packaging import GCS_STORAGE_MAX_SIZE, _dir_travel, _get_excludes
from ray.job_submission import JobSubmissionClient

SessionT = TypeVar("SessionT", bound=ServerSession)


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """The low-level Server that an MCPServer dispatches requests with."""
    return server._lowlevel_server


def announce_tool_list_changes(server: MCPServer[Any]) -> None:
    """Declare ``tools.listChanged`` to 2025 clients (2026 ones derive it from subscriptions/listen)."""
    low = server._lowlevel_server
    make = low.create_initialization_options

    def with_tools_changed(
        notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> InitializationOptions:
        return make(notification_options or NotificationOptions(tools_changed=True), *args, **kwargs)

    low.create_initialization_options = with_tools_changed  # type: ignore[method-assign]


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


# -- Ray ----------------------------------------------------------------------------------------------------


# The most a package (a working_dir, a py_module) may weigh zipped: what Ray's upload through the GCS takes.
RAY_UPLOAD_LIMIT_BYTES = int(GCS_STORAGE_MAX_SIZE)


def walk_like_ray_packaging(
    top: Path, excludes: list[str], check: Callable[[Path], None], *, include_gitignore: bool, logger: Any
) -> None:
    """Call ``check`` on every path Ray's packaging would zip under ``top`` (its excludes and ignore files)."""
    _dir_travel(
        top, [_get_excludes(top, excludes)], check, include_gitignore=include_gitignore, logger=logger
    )


def ray_grpc_channel(address: str) -> Any:
    """Ray's own synchronous gRPC channel to ``address``: Ray's TLS and, in token mode, this process's token."""
    return init_grpc_channel(address, asynchronous=False)


def ray_token_auth_enabled() -> bool:
    """Whether this process's Ray runs in token mode (RAY_AUTH_MODE=token)."""
    return bool(authentication_utils.is_token_auth_enabled())


def ray_tls_certs() -> tuple[bytes | None, bytes | None, bytes | None]:
    """Ray's TLS certificate chain, private key and CA, as RAY_USE_TLS's environment names them."""
    chain, key, ca = load_certs_from_env()
    return chain, key, ca


class SendingJobSubmissionClient(JobSubmissionClient):
    """Ray's JobSubmissionClient whose every request (the version check its constructor makes included) is
    ``send(method, endpoint, data, json_data)``, returning what the SDK reads of a ``requests`` response
    (status_code, text, json(), raise_for_status())."""

    def __init__(self, address: str, send: Callable[[str, str, bytes | None, Any], Any]) -> None:
        self.ray_mcp_send = send  # before super().__init__, whose version check is a request
        super().__init__(address)

    def _do_request(
        self, method: str, endpoint: str, *, data: bytes | None = None, json_data: Any = None, **_: Any
    ) -> Any:
        return self.ray_mcp_send(method, endpoint, data, json_data)


def job_client(address: str, send: Callable[[str, str, bytes | None, Any], Any]) -> JobSubmissionClient:
    """Ray's JobSubmissionClient for ``address``, sending every request through ``send``."""
    return SendingJobSubmissionClient(address, send)
