"""The security boundary: which tools exist in which mode, redaction and audit of calls, and HTTP guards.

Anyone who reaches a Ray dashboard can run code on the cluster. ray-mcp must not widen that door:

* tools are classified by their annotations as read, write or destructive; ``--read-only`` lists only
  read tools, and destructive tools are listed only with ``--allow-destructive``;
* every tool result, resource and prompt passes through redaction (env_vars values, secret-looking fields
  and log lines become ``***``);
* every write or destructive call leaves one JSON line in the audit log (stderr, or ``--audit-log``);
* the HTTP transports check a bearer token in constant time, and reject foreign Origins (DNS rebinding).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.types import ToolAnnotations
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ray_mcp.redaction import redact, redact_text

ToolKind = Literal["read", "write", "destructive"]

# Arguments that name the object a call acts on, in order of preference, for the audit trail.
TARGET_ARGUMENTS = (
    "job",
    "submission_id",
    "job_id",
    "actor_id",
    "app_name",
    "app",
    "name",
    "pg_id",
    "node_id",
    "entrypoint",
)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def tool_kind(annotations: ToolAnnotations | None) -> ToolKind:
    if annotations is None or annotations.read_only_hint is not True:
        return "destructive" if annotations is not None and annotations.destructive_hint else "write"
    return "read"


def tool_allowed(kind: ToolKind, *, read_only: bool, allow_destructive: bool) -> tuple[bool, str]:
    if kind != "read" and read_only:
        return False, "the server runs with --read-only"
    if kind == "destructive" and not allow_destructive:
        return False, "destructive tools need --allow-destructive"
    return True, ""


# -- redaction and audit ---------------------------------------------------------------------------------


def _redact_result(result: HandlerResult) -> HandlerResult:
    if result is None:
        return None
    if isinstance(result, BaseModel):
        data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return type(result).model_validate(redact(data), by_alias=True, by_name=True)
    return redact(result)


class Auditor:
    """Writes one JSON line per write or destructive call: time, tool, target, outcome; never secrets."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, sort_keys=True, default=str)
        if self.path is None:
            print(line, file=sys.stderr, flush=True)
            return
        with open(self.path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def audit_target(arguments: dict[str, Any]) -> str | None:
    for key in TARGET_ARGUMENTS:
        value = arguments.get(key)
        if value not in (None, ""):
            return redact_text(f"{key}={str(value)[:200]}")
    return None


def call_outcome(result: HandlerResult) -> str:
    data = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result or {}
    if data.get("isError"):
        return "error"
    if data.get("inputRequests"):  # 2026-07-28: this round asks the user; the next one carries the answer
        return "asking_user"
    texts = [c.get("text", "") for c in data.get("content") or [] if isinstance(c, dict)]
    if any(t.startswith("Not done yet") for t in texts):
        return "dry_run"
    return "declined" if any(t.startswith("Not done (") for t in texts) else "ok"


class SafetyMiddleware(ServerMiddleware[Any]):
    """Redacts every tool result, resource read and prompt; audits write and destructive tool calls."""

    def __init__(self, kinds: Callable[[], dict[str, ToolKind]], auditor: Auditor) -> None:
        self._kinds = kinds
        self._auditor = auditor

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("tools/call", "resources/read", "prompts/get"):
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name") if ctx.method == "tools/call" else None
        kind = self._kinds().get(name) if isinstance(name, str) else None
        if kind not in ("write", "destructive"):
            return _redact_result(await call_next(ctx))
        given = params.get("arguments")
        arguments: dict[str, Any] = given if isinstance(given, dict) else {}
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": "ray-mcp.audit",
            "tool": name,
            "kind": kind,
            "target": audit_target(arguments),
        }
        started = time.monotonic()
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            record.update(outcome="error", error=type(exc).__name__)
            raise
        else:
            record["outcome"] = call_outcome(result)
            return _redact_result(result)
        finally:
            record["duration_ms"] = round((time.monotonic() - started) * 1000)
            self._auditor.write(record)


# -- HTTP transports -------------------------------------------------------------------------------------


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


__all__ = ["Auditor", "HttpGuard", "SafetyMiddleware", "is_loopback", "tool_allowed", "tool_kind"]
