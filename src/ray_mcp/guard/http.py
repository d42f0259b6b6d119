"""The HTTP transports' guard: a bearer token checked in constant time, foreign Origins and (bound to loopback)
foreign Host headers rejected (DNS rebinding)."""

from __future__ import annotations

import hmac
import ipaddress

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _matches(value: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        if value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1])):
            return True
        if pattern.endswith(":*") and value == pattern[:-2]:
            return True
    return False


LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
LOOPBACK_HOST_HEADERS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


class HttpGuard:
    """ASGI middleware in front of the MCP HTTP app: Origin and Host checks, then the bearer token.

    * A browser page from another site (any Origin that is not loopback or configured) gets 403.
    * Bound to loopback, a Host header that is not loopback gets 421 (DNS rebinding).
    * With a token configured, a request without ``Authorization: Bearer <token>`` gets 401. The check is
      constant-time. ``/healthz`` answers without a token (it reveals nothing), for container healthchecks.
    """

    def __init__(
        self, app: ASGIApp, *, token: str | None, bind_host: str, allowed_origins: list[str] | None = None
    ) -> None:
        self.app = app
        self.token = f"Bearer {token}".encode() if token else None
        self.origins = LOOPBACK_ORIGINS + list(allowed_origins or [])
        self.hosts = LOOPBACK_HOST_HEADERS if is_loopback(bind_host) else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if scope.get("path") == "/healthz":
            await PlainTextResponse("ok")(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None and not _matches(origin, self.origins):
            await PlainTextResponse(f"Forbidden: Origin {origin} is not allowed", status_code=403)(
                scope, receive, send
            )
            return
        host = headers.get("host", "")
        if self.hosts is not None and not _matches(host, self.hosts):
            await PlainTextResponse("Misdirected request: invalid Host header", status_code=421)(
                scope, receive, send
            )
            return
        if self.token is not None:
            given = headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self.token):
                await PlainTextResponse(
                    "Unauthorized: send Authorization: Bearer <token> (RAY_MCP_AUTH_TOKEN)",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="ray-mcp"'},
                )(scope, receive, send)
                return
        await self.app(scope, receive, send)
