"""The security boundary: which tools exist in which mode, redaction and audit of calls, and HTTP guards.

Anyone who reaches a Ray dashboard can run code on the cluster. ray-mcp must not widen that door:

* tools are classified by their annotations as read, write or destructive; ``--read-only`` lists only
  read tools, and destructive tools are listed only with ``--allow-destructive``;
* every tool result, resource, prompt, progress or log notification, protocol error and audit line passes
  through one choke point (redaction.py): known secret values and secret shapes become ``***``, control
  characters become visible escapes, and structured content is bounded;
* every write or destructive call leaves JSON lines in the audit log (stderr, or ``--audit-log``): one
  written before it runs (if that fails, the call is refused unrun) and one with its outcome;
* the HTTP transports check a bearer token in constant time, and reject foreign Origins (DNS rebinding).
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import json
import logging
import secrets
import sys
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ServerNotification, TextContent, ToolAnnotations
from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ray_mcp.redaction import REDACTED, SECRETS, bound_structured, clean_text, redact_tree

log = logging.getLogger("ray_mcp.security")

ToolKind = Literal["read", "write", "destructive"]

# Arguments that name the object a call acts on, in order of preference, for the audit trail.
TARGET_ARGUMENTS = (
    "job",
    "submission_id",
    "actor_id",
    "app",
    "placement_group",
    "name",
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


async def redact_off_loop(result: HandlerResult) -> HandlerResult:
    """``redact_result`` in a worker thread: a large answer (a log tail, a diagnosis, 40 docs pages at once)
    takes tens of milliseconds of regex work, which on the event loop would hold up every other session."""
    return await anyio.to_thread.run_sync(redact_result, result, limiter=_redaction_limiter())


_REDACTION_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("ray_mcp_redaction_limiter")


def _redaction_limiter() -> anyio.CapacityLimiter:
    try:
        return _REDACTION_LIMITER.get()
    except LookupError:
        _REDACTION_LIMITER.set(limiter := anyio.CapacityLimiter(4))
        return limiter


def redact_result(result: HandlerResult) -> HandlerResult:
    """The choke point for results: learn the secrets they carry, mask every string once, bound structured content.

    Every string (text content, structured content, keys included) goes through ``clean_text`` exactly once.
    """
    if result is None:
        return None
    data = (
        result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(result, BaseModel)
        else result
    )
    # the env_vars values in this very result are masked everywhere in it, and in every later answer
    out = redact_tree(data)
    structured = out.get("structuredContent") if isinstance(out, dict) else None
    if isinstance(structured, dict):
        texts = [c for c in out.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
        text_bytes = sum(len(str(c.get("text", "")).encode()) for c in texts)
        out["structuredContent"], note = bound_structured(structured, text_bytes)
        if note is not None and texts:
            texts[-1]["text"] = f"{texts[-1].get('text', '')}\n({note})"
    return out


class RedactingSession(ServerSession):
    """The request's session, with every notification it sends (progress, log messages) redacted."""

    def __init__(self, inner: ServerSession) -> None:  # a copy of the per-request session, not a new one
        self.__dict__.update(inner.__dict__)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await super().report_progress(progress, total, clean_text(message) if message else message)

    async def _notify(self, notification: ServerNotification, *, request_scoped: bool) -> None:
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        clean = type(notification).model_validate(redact_tree(data))
        await super()._notify(clean, request_scoped=request_scoped)


class AuditLogUnwritable(ValueError):
    """The audit log cannot be written: ray-mcp refuses to start, or refuses the call (fail closed)."""


class Auditor:
    """Writes JSON lines for each write or destructive call: time, tool, target, outcome; never secrets.

    Fail closed: ``check`` at startup (the server refuses to start on an unwritable ``--audit-log``), and a
    ``started`` line is written before each call runs; if that write fails, the call is refused unrun.
    Lines are written whole under a lock, from worker threads (a slow disk never blocks the event loop).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise AuditLogUnwritable unless the audit log can be appended to (created if missing)."""
        if self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise AuditLogUnwritable(
                f"cannot write the audit log {self.path} ({exc.strerror or exc}); fix its directory or "
                "permissions, or pass another --audit-log (RAY_MCP_AUDIT_LOG)"
            ) from exc

    def write(self, record: dict[str, Any]) -> None:
        """Append one line; raises OSError if it could not be written in full."""
        line = json.dumps(redact_tree(record), sort_keys=True, default=str)
        with self._lock:
            if self.path is None:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
                return
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
                out.flush()


def audit_target(arguments: dict[str, Any]) -> str | None:
    for key in TARGET_ARGUMENTS:
        value = arguments.get(key)
        if value not in (None, ""):
            return f"{key}={str(value)[:200]}"  # redacted with the whole line by Auditor.write
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


class AuditNotes:
    """What a tool learns while it runs that the audit line must name (the apps a replace deletes)."""

    def __init__(self) -> None:
        self.target: str | None = None


AUDIT_NOTES: ContextVar[AuditNotes | None] = ContextVar("ray_mcp_audit_notes", default=None)


def note_audit_target(target: str) -> None:
    """Name the call's real target in its audit line (called from inside a write or destructive tool)."""
    notes = AUDIT_NOTES.get()
    if notes is not None:
        notes.target = target


class SafetyMiddleware(ServerMiddleware[Any]):
    """The output choke point: redacts every result, notification and protocol error; audits write and
    destructive tool calls."""

    def __init__(self, kinds: Callable[[], dict[str, ToolKind]], auditor: Auditor) -> None:
        self._kinds = kinds
        self._auditor = auditor

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method == "initialize":
            return await call_next(ctx)
        ctx = dataclasses.replace(ctx, session=RedactingSession(ctx.session))
        try:
            return await self._call(ctx, call_next)
        except MCPError as exc:
            message, data = clean_text(exc.error.message), redact_tree(exc.error.data)
            if message == exc.error.message and data == exc.error.data:
                raise
            raise MCPError(exc.error.code, message, data) from None

    async def _call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("tools/call", "resources/read", "prompts/get"):
            return await call_next(ctx)
        params = ctx.params or {}
        SECRETS.learn(params.get("arguments"))  # submit_job's or serve_deploy's env_vars: secrets from now on
        name = params.get("name") if ctx.method == "tools/call" else None
        kind = self._kinds().get(name) if isinstance(name, str) else None
        if kind not in ("write", "destructive"):
            return await redact_off_loop(await call_next(ctx))
        given = params.get("arguments")
        arguments: dict[str, Any] = given if isinstance(given, dict) else {}
        record: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "event": "ray-mcp.audit",
            "call": secrets.token_hex(8),  # pairs the "started" line with the outcome line
            "tool": name,
            "kind": kind,
            "target": audit_target(arguments),
        }
        try:  # write-ahead: no audit line, no action
            await anyio.to_thread.run_sync(self._auditor.write, {**record, "outcome": "started"})
        except OSError as exc:
            log.error("ray-mcp: refused %s: the audit log cannot be written: %s", name, exc)
            where = self._auditor.path or "stderr"
            refusal = CallToolResult(
                content=[
                    TextContent(
                        type="text",
                        text=f"Refused, nothing was done: {name} could not be recorded in the audit log "
                        f"({where}: {exc.strerror or exc}). Every write or destructive call is audited before "
                        "it runs. Ask the operator to fix the audit log (--audit-log); do not retry until then.",
                    )
                ],
                is_error=True,
            )
            return redact_result(refusal)
        started = time.monotonic()
        notes = AuditNotes()
        token = AUDIT_NOTES.set(notes)
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            record.update(outcome="error", error=type(exc).__name__)
            raise
        else:
            record["outcome"] = call_outcome(result)
            return await redact_off_loop(result)
        finally:
            AUDIT_NOTES.reset(token)
            if notes.target is not None:
                record["target"] = notes.target[:2000]  # redacted with the whole line by Auditor.write
            record["time"] = datetime.now(UTC).isoformat(timespec="milliseconds")
            record["duration_ms"] = round((time.monotonic() - started) * 1000)
            try:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._auditor.write, record)
            except OSError as exc:  # the action already ran: say so loudly, keep its result
                log.error("ray-mcp: %s ran but its audit line could not be written: %s", name, exc)


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


__all__ = [
    "REDACTED",
    "Auditor",
    "HttpGuard",
    "RedactingSession",
    "SafetyMiddleware",
    "is_loopback",
    "redact_result",
    "tool_allowed",
    "tool_kind",
]
