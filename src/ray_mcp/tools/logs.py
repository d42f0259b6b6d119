"""tail_logs: the end of any Ray log in the cluster, read on the server side within a line and byte budget."""

import inspect
from collections.abc import Callable
from contextlib import nullcontext
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.targets import LOG_SOURCES, LOG_TARGET_ARGS, LogTarget, one_of
from ray_mcp.limits import LOG_BYTES, LOG_LINES, MAX_FOLLOW_S, MAX_GREP_CONTEXT, SCAN_MB
from ray_mcp.models import LogTail
from ray_mcp.server.context import app_of
from ray_mcp.server.shares import owner_of
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.logs import render_log_tail, without_colour
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py

# tail_logs' arguments that name the log: one per row of LOG_TARGET_ARGS, in its order.
TARGET_ARGS = [
    inspect.Parameter(
        a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=a.default, annotation=a.annotation
    )
    for a in LOG_TARGET_ARGS
]


def publish(fn: Callable[..., Any], parameters: list[inspect.Parameter]) -> None:
    """Give ``fn`` the signature the SDK reads a tool's (or a resolver's) arguments from; ``fn`` takes the
    ones it does not declare as ``**named``."""
    fn.__signature__ = inspect.signature(fn).replace(parameters=parameters)  # type: ignore[attr-defined]


async def log_target(stream: str, **named: Any) -> LogTarget:
    """The log the call names, checked before the cluster is asked anything (tail_logs reads it as ``target``)."""
    return LogTarget(stream=stream, **named)


publish(
    log_target,
    [
        *(p.replace(kind=p.KEYWORD_ONLY) for p in TARGET_ARGS),
        inspect.Parameter("stream", inspect.Parameter.KEYWORD_ONLY, annotation=str),
    ],
)


async def tail_logs(
    target: Annotated[LogTarget, Resolve(log_target)],
    api: Api,
    ctx: Context,
    lines: Annotated[
        int, Field(ge=LOG_LINES.low, le=LOG_LINES.high, description="Most lines to return.")
    ] = LOG_LINES.default,
    max_bytes: Annotated[
        int, Field(ge=LOG_BYTES.low, le=LOG_BYTES.high, description="Most bytes of text to return.")
    ] = LOG_BYTES.default,
    grep: Annotated[
        str | None,
        Field(description="RE2 regex: the last matches in the WHOLE file."),
    ] = None,
    context: Annotated[
        int, Field(ge=0, le=MAX_GREP_CONTEXT, description="Lines around each grep match.")
    ] = 0,
    stream: Annotated[
        Literal["out", "err", "both"],
        Field(description="Worker logs: stdout, stderr or both."),
    ] = "both",
    follow_s: Annotated[
        float,
        Field(
            ge=0,
            le=MAX_FOLLOW_S,
            description="Then keep reading new lines for this many seconds.",
        ),
    ] = 0,
    max_scan_mb: Annotated[
        int,
        Field(ge=SCAN_MB.low, le=SCAN_MB.high, description="Most megabytes that grep reads."),
    ] = SCAN_MB.default,
    **named: Any,  # TARGET_ARGS: log_target has made them the target
) -> Annotated[CallToolResult, LogTail]:
    # a follow holds a dashboard connection for follow_s: one client's share of them, never the whole pool
    with app_of(ctx).follows.take(owner_of(ctx)) if follow_s else nullcontext():
        tail = await api.logs.tail(
            target,
            lines=lines,
            max_bytes=max_bytes,
            grep=grep,
            context=context,
            max_scan_mb=max_scan_mb,
            follow_s=follow_s,
            on_progress=ctx.report_progress,
        )
    return tool_result(without_colour(tail), render_log_tail)


tail_logs.__doc__ = f"""The end of one Ray log: {one_of([a.names for a in LOG_SOURCES])} (name exactly
one). grep searches the whole file, and diagnose_job already quotes what matters in a failed job's logs.
"""
_own = [p for p in inspect.signature(tail_logs).parameters.values() if p.kind is not p.VAR_KEYWORD]
publish(tail_logs, [*_own[:3], *TARGET_ARGS, *_own[3:]])  # after target, api and ctx: the schema's order


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Tail a Ray log"}))(tail_logs)
