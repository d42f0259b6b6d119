"""The HTTP transports' listener: bound before anything else starts, with bounded headers, connections, sessions.

* The port is bound first (before uvicorn's lifespan, so before an embedded Ray cluster starts), and a port in
  use is one line naming the port and the fix, not a traceback after a cluster start.
* Every connection must deliver complete request headers within ``http_header_timeout_s`` (h11 keeps a
  connection that trickles a partial request forever: slowloris); the same bound applies between the requests
  of a keep-alive connection.
* ``http_max_connections`` caps open connections and requests in flight (uvicorn answers 503 above it), and
  ``max_sessions`` caps the streamable HTTP sessions (the SDK answers 503 above it), of which one client holds
  at most ``max_sessions_per_client`` (shares.py), a client being its peer address (X-Forwarded-For counts only
  from ``--trusted-proxy`` addresses).
* HttpGuard checks the bearer token; the SDK checks Host and Origin behind it (guard/http.py sets both up).
* uvicorn logs through our stderr handler: its default config writes the access log to stdout.

And the stdio transport, which answers every request that has an id (see reject_line).
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, ErrorData, JSONRPCError, JSONRPCRequest
from pydantic import ValidationError

from ray_mcp import sdk_private
from ray_mcp.guard.redaction import clean_text
from ray_mcp.server.shares import SessionShares

if TYPE_CHECKING:
    import uvicorn

    from ray_mcp.server.build import RayMCPServer
    from ray_mcp.settings import Settings

log = logging.getLogger("ray_mcp")


async def serve_http(server: RayMCPServer, settings: Settings, sock: socket.socket) -> None:
    """Serve the MCP HTTP app (streamable HTTP or SSE) on an already bound socket until uvicorn stops."""
    import uvicorn

    await uvicorn.Server(http_config(server, settings, sock)).serve(sockets=[sock])


def http_config(server: RayMCPServer, settings: Settings, sock: socket.socket) -> uvicorn.Config:
    """uvicorn's configuration of the guarded MCP HTTP app on ``sock`` (said on stderr, with the line to paste)."""
    import uvicorn

    from ray_mcp.guard.http import HttpGuard, transport_security

    security = transport_security(settings.host, settings.allowed_origins)
    max_body = settings.http_max_request_kib * 1024
    if settings.transport == "sse":
        asgi: Any = server.sse_app(
            transport_security=security, host=settings.host, max_request_body_size=max_body
        )
        path = "/sse"
    else:
        asgi = server.streamable_http_app(
            transport_security=security,
            host=settings.host,
            max_sessions=settings.max_sessions,
            session_idle_timeout=settings.session_idle_timeout_s,
            max_request_body_size=max_body,
        )
        asgi = SessionShares(
            asgi,
            server.session_manager,
            per_client=settings.max_sessions_per_client,
            unused_timeout_s=settings.session_unused_timeout_s,
            use=server.session_use,
        )
        path = "/mcp"
    token = settings.resolved_auth_token()
    guarded = HttpGuard(asgi, token=token)
    kind = "SSE" if settings.transport == "sse" else "streamable HTTP"
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    log.info(
        "ray-mcp: serving MCP over %s at http://%s:%d%s (%s)",
        kind,
        host,
        port,
        path,
        "bearer token required" if token else "no token: loopback clients only",
    )
    # The exact line to paste: this server's own address (the embedded cluster's dashboard is on a random port).
    log.info(
        "ray-mcp: add it to Claude Code with: claude mcp add --transport %s ray http://%s:%d%s%s",
        "sse" if settings.transport == "sse" else "http",
        host,
        port,
        path,
        ' --header "Authorization: Bearer $RAY_MCP_AUTH_TOKEN"' if token else "",
    )
    if settings.transport == "sse":
        log.warning(
            "ray-mcp: the SSE transport is deprecated (MCP 2026-07-28); use --transport streamable-http."
        )
    else:
        log.info("ray-mcp: %s", http_mode(settings))
    return uvicorn.Config(
        guarded,
        host=settings.host,
        port=port,
        http=sdk_private.bounded_h11_protocol(settings.http_header_timeout_s),
        limit_concurrency=settings.http_max_connections,
        # X-Forwarded-For only from the proxies the operator names: uvicorn's default trusts it from loopback,
        # where any local process could then claim any address (and so any caller's share)
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=settings.trusted_proxies or None,
        timeout_keep_alive=5,
        log_config=None,  # uvicorn's own config sends the access log to stdout; ours is stderr only
        log_level=settings.log_level.lower(),
    )


def http_mode(settings: Settings) -> str:
    """Which clients a streamable HTTP deployment can spread over replicas (said at start, and by doctor)."""
    if settings.replica_key_file is None:
        return (
            "one replica: 2026-07-28 requests are stateless, but confirmation tokens and elicitation state are "
            "this process's own; set --replica-key-file on every replica to run several."
        )
    return (
        "replicated: 2026-07-28 clients: any replica (stateless requests, shared replica key); 2025 clients keep "
        f"a session on one replica (at most {settings.max_sessions}), so route them with session affinity."
    )


# -- stdio ----------------------------------------------------------------------------------------------------


def reject_line(line: str) -> JSONRPCError | None:
    """The JSON-RPC error for a request the SDK would drop without an answer, or None to pass the line on.

    mcp 2.3's stdio reader validates each line as a whole message; a request whose params are not an object
    (or whose id is not a string or integer, or which lacks "jsonrpc") fails that, is logged, and the client
    waits forever. Anything with an "id" and a "method" gets an error reply here instead.
    """
    try:
        message = json.loads(line)
    except ValueError:
        return None  # not JSON: no id to answer (the SDK logs it)
    if isinstance(message, list):
        if any(isinstance(m, dict) and "id" in m and "method" in m for m in message):
            return _error(
                None, INVALID_REQUEST, "JSON-RPC batches are not part of MCP: send one request per line."
            )
        return None
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        return None
    try:
        JSONRPCRequest.model_validate(message)
        return None
    except ValidationError as exc:
        problems = exc.errors()
    request_id = message["id"]
    echo = request_id if isinstance(request_id, str) or type(request_id) is int else None
    method = message.get("method")
    fields = {str(p["loc"][0]) for p in problems if p["loc"]}
    if fields == {"params"}:
        kind = type(message["params"]).__name__
        return _error(
            echo, INVALID_PARAMS, f"Invalid params for {method!r}: params must be an object, not {kind}."
        )
    detail = "; ".join(f"{'.'.join(map(str, p['loc'])) or 'message'}: {p['msg']}" for p in problems[:3])
    return _error(echo, INVALID_REQUEST, f"Invalid request ({detail}).")


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    """An error sent on the wire before the SDK (and so the middleware) sees the line: guarded here."""
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=clean_text(message)))


@asynccontextmanager
async def answering_stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport, reading the wire through reject_line so every request gets an answer.

    Like the SDK, fd 0 then points at the null device, so that Ray and other children never read the wire.
    """
    wire = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # closefd=False: a worker thread may still block on this descriptor after the transport exits.
    stdin = anyio.wrap_file(
        io.TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="replace")
    )
    ready = anyio.Event()
    replies: list[Any] = []

    async def lines() -> AsyncIterator[str]:
        await ready.wait()
        async for line in stdin:
            error = reject_line(line)
            if error is None:
                yield line
            else:
                log.warning("ray-mcp: answered a malformed request: %s", error.error.message)
                await replies[0].send(SessionMessage(error))

    async with stdio_server(stdin=cast(Any, lines())) as (read_stream, write_stream):
        replies.append(write_stream)
        ready.set()
        yield read_stream, write_stream


async def serve_stdio(server: RayMCPServer) -> None:
    lowlevel = sdk_private.lowlevel_server(server)
    async with answering_stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
