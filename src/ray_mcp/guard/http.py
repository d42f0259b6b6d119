"""The HTTP transports' guard: a bearer token checked in constant time; foreign Origins and (bound to loopback)
foreign Host headers rejected by the SDK's DNS-rebinding protection, set up here."""

from __future__ import annotations

import hmac

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ray_mcp.settings import is_loopback

LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
LOOPBACK_HOST_HEADERS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def _with_portless(patterns: list[str]) -> list[str]:
    """Each pattern, and for ``host:*`` the host without a port too (the SDK's ``:*`` needs one)."""
    return [form for p in patterns for form in ([p, p[:-2]] if p.endswith(":*") else [p])]


def transport_security(bind_host: str, allowed_origins: list[str] | None = None) -> TransportSecuritySettings:
    """The SDK's Host and Origin check, for the MCP endpoints of both HTTP transports.

    Bound to loopback (the only bind that may run without a token): a foreign Origin gets 403 and a Host that is
    not loopback 421 (DNS rebinding); loopback Origins and ``--allowed-origin`` values pass, any port (``:*``)
    or none. Bound to anything else, the check is off, as it is by the SDK's default: clients name the server
    by names it cannot know (a Kubernetes service, a proxy), and the bearer token, required there, is what a
    browser page can never send on its own.
    """
    if not is_loopback(bind_host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=_with_portless(LOOPBACK_HOST_HEADERS),
        allowed_origins=_with_portless(LOOPBACK_ORIGINS + list(allowed_origins or [])),
    )


class HttpGuard:
    """ASGI middleware in front of the MCP HTTP app: the bearer token, and ``/healthz``.

    * With a token configured, a request without ``Authorization: Bearer <token>`` gets 401. The check is
      constant-time. ``/healthz`` answers without a token (it reveals nothing), for container healthchecks.
    * Origin and Host are checked behind it, by the SDK (``transport_security``).
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") == "/healthz":
            await PlainTextResponse("ok")(scope, receive, send)
            return
        if self.token is not None:
            given = Headers(scope=scope).get("authorization", "").encode()
            if not hmac.compare_digest(given, self.token):
                await PlainTextResponse(
                    "Unauthorized: send Authorization: Bearer <token> (RAY_MCP_AUTH_TOKEN)",
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="ray-mcp"'},
                )(scope, receive, send)
                return
        await self.app(scope, receive, send)
