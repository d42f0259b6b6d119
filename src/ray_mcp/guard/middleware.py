"""The output choke point: every tool result, resource, prompt, notification and protocol error passes through
SafetyMiddleware, which redacts it (redaction/), bounds its structured content, and audits write and
destructive calls (audit.py).

Anyone who reaches a Ray dashboard can run code on the cluster: ray-mcp must not widen that door."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, CallToolResult, LoggingLevel, RequestId, ServerNotification, TextContent
from pydantic import BaseModel

from ray_mcp import sdk_private
from ray_mcp.guard import audit
from ray_mcp.guard.audit import Auditor
from ray_mcp.guard.modes import ToolKind
from ray_mcp.guard.redaction import SECRETS, bound_structured, clean_text, redact_tree

log = logging.getLogger("ray_mcp.guard")


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
    """The choke point for results: mask every string once (its own secrets too), bound structured content.

    Every string (text content, structured content, keys included) goes through ``clean_text`` exactly once.
    """
    if result is None:
        return None
    data = (
        result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(result, BaseModel)
        else result
    )
    # the env_vars values in this very result are masked everywhere in it (only the cluster's reads, in answers/ and sources/,
    # make values secrets for every later answer)
    out = redact_tree(data)
    structured = out.get("structuredContent") if isinstance(out, dict) else None
    if isinstance(structured, dict):
        texts = [c for c in out.get("content") or [] if isinstance(c, dict) and c.get("type") == "text"]
        text_bytes = sum(len(str(c.get("text", "")).encode()) for c in texts)
        out["structuredContent"], note = bound_structured(structured, text_bytes)
        if note is not None and texts:
            texts[-1]["text"] = f"{texts[-1].get('text', '')}\n({note})"
    return out


def withheld_if_unmaskable(method: str, result: HandlerResult) -> HandlerResult:
    """Fail closed: while the secret registry has refused values (its memory bound), no answer leaves, since
    any answer could carry them."""
    refused = SECRETS.refused
    if not refused:
        return result
    message = (
        f"Withheld: the cluster's secret values (env_vars of {len(refused)} job(s) or Serve app(s), newest "
        f"{clean_text(refused[-1])!r}) exceed ray-mcp's secret registry ({SECRETS.max_bytes // 2**20} MiB), so "
        "answers could show them unmasked. Ask the operator to raise RAY_MCP_SECRET_REGISTRY_MIB, or delete "
        "the jobs with huge env_vars, then restart ray-mcp."
    )
    if method == "tools/call":
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)
    raise MCPError(INTERNAL_ERROR, message)


class RedactingSession(ServerSession):
    """The request's session, with every notification it sends (progress, log messages) redacted.

    Made from the request's session by ``sdk_private.session_as``; every notification the SDK's session
    sends goes through one of these three methods.
    """

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        await super().report_progress(progress, total, clean_text(message) if message else message)

    async def send_notification(
        self, notification: ServerNotification, related_request_id: RequestId | None = None
    ) -> None:
        await super().send_notification(redacted_notification(notification), related_request_id)

    async def send_log_message(
        self,
        level: LoggingLevel,
        data: Any,
        logger: str | None = None,
        related_request_id: RequestId | None = None,
    ) -> None:
        await super().send_log_message(
            level, redact_tree(data), clean_text(logger) if logger else logger, related_request_id
        )


def redacted_notification(notification: ServerNotification) -> ServerNotification:
    data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    return type(notification).model_validate(redact_tree(data))


class SafetyMiddleware(ServerMiddleware[Any]):
    """The output choke point: redacts every result, notification and protocol error; audits write and
    destructive tool calls."""

    def __init__(self, kinds: Callable[[], dict[str, ToolKind]], auditor: Auditor) -> None:
        self._kinds = kinds
        self._auditor = auditor

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None or ctx.method == "initialize":
            return await call_next(ctx)
        ctx = dataclasses.replace(ctx, session=sdk_private.session_as(ctx.session, RedactingSession))
        try:
            return await self._call(ctx, call_next)
        except MCPError as exc:
            message, data = clean_text(exc.error.message), redact_tree(exc.error.data)
            if message == exc.error.message and data == exc.error.data:
                raise
            raise MCPError(exc.error.code, message, data) from None

    async def _call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method not in ("tools/call", "resources/read", "prompts/get", "tasks/get"):
            return await call_next(ctx)
        params = ctx.params or {}
        name = params.get("name") if ctx.method == "tools/call" else None
        kind = self._kinds().get(name) if isinstance(name, str) else None
        if kind not in ("write", "destructive"):
            return await redact_off_loop(withheld_if_unmaskable(ctx.method, await call_next(ctx)))
        given = params.get("arguments")
        arguments: dict[str, Any] = given if isinstance(given, dict) else {}
        app = ctx.lifespan_context
        cluster = str(arguments.get("cluster") or getattr(app, "default_cluster", "default"))
        url = app.known_dashboard_url(cluster) if hasattr(app, "known_dashboard_url") else None
        record = audit.start_record(ctx, str(name), kind, arguments, {"name": cluster, "url": url})
        try:  # write-ahead: no audit line, no action
            await anyio.to_thread.run_sync(self._auditor.write, record)
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
        notes = audit.AuditNotes()
        token = audit.AUDIT_NOTES.set(notes)
        outcome: dict[str, Any] = {}
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            outcome = {"error": exc}
            raise
        else:
            outcome = {"result": result}
            return await redact_off_loop(withheld_if_unmaskable(ctx.method, result))
        finally:
            audit.AUDIT_NOTES.reset(token)
            if notes.cluster_url is None and hasattr(app, "known_dashboard_url"):
                notes.cluster_url = app.known_dashboard_url(cluster)
            final = audit.finish_record(record, notes, time.monotonic() - started, **outcome)
            try:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._auditor.write, final)
            except OSError as exc:  # the action already ran: say so loudly, keep its result
                log.error("ray-mcp: %s ran but its audit line could not be written: %s", name, exc)
