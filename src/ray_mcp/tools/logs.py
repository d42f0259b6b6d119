"""tail_logs: the end of any log in the cluster, read on the server side within a line and byte budget."""

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import LOG_BYTES, LOG_LINES, MAX_FOLLOW_S, MAX_GREP_CONTEXT, SCAN_MB
from ray_mcp.models import LogTail
from ray_mcp.ray_api.targets import LogTarget
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.logs import render_log_tail, within_sent
from ray_mcp.tools import READ_ONLY, Api


async def log_target(
    job: str | None,
    actor_id: str | None,
    task_id: str | None,
    attempt: int,
    pid: int | None,
    node: str | None,
    filename: str | None,
    stream: str,
) -> LogTarget:
    """The log the call names, checked before the cluster is asked anything (tail_logs reads it as ``target``)."""
    return LogTarget(
        job=job, actor_id=actor_id, task_id=task_id, attempt=attempt, pid=pid, node=node, filename=filename,
        stream=stream,
    )  # fmt: skip


async def tail_logs(
    target: Annotated[LogTarget, Resolve(log_target)],
    api: Api,
    ctx: Context,
    job: Annotated[str | None, Field(description="A job's submission id: its driver log.")] = None,
    actor_id: Annotated[str | None, Field(description="An actor id: its worker's stdout/stderr.")] = None,
    task_id: Annotated[str | None, Field(description="A task id: that task's stdout/stderr.")] = None,
    attempt: Annotated[int, Field(ge=0, description="The task's attempt number (retries count up).")] = 0,
    pid: Annotated[int | None, Field(ge=1, description="A worker process id; needs node.")] = None,
    node: Annotated[str | None, Field(description="A node id or IP, with pid or filename.")] = None,
    filename: Annotated[
        str | None,
        Field(description="A file in the node's Ray log dir: raylet.out, gcs_server.out, dashboard.log, …"),
    ] = None,
    lines: Annotated[
        int, Field(ge=LOG_LINES.low, le=LOG_LINES.high, description="Most lines to return.")
    ] = LOG_LINES.default,
    max_bytes: Annotated[
        int, Field(ge=LOG_BYTES.low, le=LOG_BYTES.high, description="Most bytes of log text to return.")
    ] = LOG_BYTES.default,
    grep: Annotated[
        str | None,
        Field(
            description="RE2 regex (no backreferences or lookaround): the last matches in the WHOLE file, "
            "not the tail."
        ),
    ] = None,
    context: Annotated[
        int, Field(ge=0, le=MAX_GREP_CONTEXT, description="Lines shown around each grep match.")
    ] = 0,
    stream: Annotated[
        Literal["out", "err", "both"],
        Field(description="For actor, task and pid logs: stdout, stderr or both."),
    ] = "both",
    follow_s: Annotated[
        float,
        Field(
            ge=0,
            le=MAX_FOLLOW_S,
            description=f"Then follow the log this many seconds (max {MAX_FOLLOW_S:g}).",
        ),
    ] = 0,
    max_scan_mb: Annotated[
        int,
        Field(ge=SCAN_MB.low, le=SCAN_MB.high, description="With grep: stop scanning after this many MB."),
    ] = SCAN_MB.default,
) -> Annotated[CallToolResult, LogTail]:
    """The end of any Ray log: a job's driver, an actor, a task, a worker pid, or a node's file (exactly
    one target). grep searches the whole file; follow_s streams new lines.
    """
    tail = await api.logs.tail(
        target, lines=lines, max_bytes=max_bytes, grep=grep, context=context, max_scan_mb=max_scan_mb,
        follow_s=follow_s, on_progress=ctx.report_progress,
    )  # fmt: skip
    tail = within_sent(tail, max_bytes)
    return tool_result(tail, render_log_tail(tail))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Tail a Ray log"}))(tail_logs)
