"""stack_traces and cpu_profile: where the processes of a job, actor or task are, and what keeps one busy."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.targets import Target, target_kind
from ray_mcp.limits import (
    PROFILE_FUNCTIONS,
    PROFILE_S,
    RESULT_ENVELOPE_BYTES,
    STACK_BYTES,
    STACK_FRAMES,
    STACK_PROCESSES,
    STACK_WHOLE_SHARE,
)
from ray_mcp.models import CpuProfile, StackTraces
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.profiles import render_profile
from ray_mcp.shaping.stacks import render_stacks
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.PROFILING  # see ray_mcp/toolsets.py

JobArg = Annotated[
    str | None, Field(description="A job's submission id or job id: its driver, actors and task workers.")
]
ActorArg = Annotated[str | None, Field(description="An actor id (32 hex characters): its worker process.")]
TaskArg = Annotated[str | None, Field(description="A RUNNING task's id: the worker that runs it.")]
PidArg = Annotated[int | None, Field(ge=1, description="A process id on a node; needs node.")]
NodeArg = Annotated[str | None, Field(description="A node id or IP, with pid.")]
Processes = Annotated[
    int, Field(ge=STACK_PROCESSES.low, le=STACK_PROCESSES.high, description="Most processes to sample.")
]
Frames = Annotated[
    int, Field(ge=STACK_FRAMES.low, le=STACK_FRAMES.high, description="Most project frames shown per stack.")
]
StackBytes = Annotated[
    int, Field(ge=STACK_BYTES.low, le=STACK_BYTES.high, description="Most bytes of the answer.")
]
Seconds = Annotated[
    int, Field(ge=PROFILE_S.low, le=PROFILE_S.high, description=f"Seconds to sample (max {PROFILE_S.high}).")
]
Functions = Annotated[
    int, Field(ge=PROFILE_FUNCTIONS.low, le=PROFILE_FUNCTIONS.high, description="Functions to list.")
]


async def stack_traces(
    api: Api,
    job: JobArg = None,
    actor_id: ActorArg = None,
    task_id: TaskArg = None,
    pid: PidArg = None,
    node: NodeArg = None,
    limit: Processes = STACK_PROCESSES.default,
    max_frames: Frames = STACK_FRAMES.default,
    max_bytes: StackBytes = STACK_BYTES.default,
) -> Annotated[CallToolResult, StackTraces]:
    """Where something is stuck: live Python stacks of a job's driver and workers, an actor, a task or a pid,
    identical ones collapsed with counts. Use cpu_profile when it is busy, not stuck."""
    kind = target_kind(job=job, actor_id=actor_id, task_id=task_id, pid=pid, node=node, tool="stack_traces")
    target = Target(kind=kind, job=job, actor_id=actor_id, task_id=task_id, pid=pid, node=node)
    result = await api.stacks.traces(target, limit=limit, max_frames=max_frames)
    return tool_result(result.within(STACK_WHOLE_SHARE * max_bytes + RESULT_ENVELOPE_BYTES), render_stacks)


async def cpu_profile(
    api: Api,
    actor_id: ActorArg = None,
    task_id: TaskArg = None,
    pid: PidArg = None,
    node: NodeArg = None,
    duration_s: Seconds = PROFILE_S.default,
    top: Functions = PROFILE_FUNCTIONS.default,
    job: Annotated[
        str | None,
        Field(description="Not profiled as a whole: stack_traces(job=...) lists its processes."),
    ] = None,
) -> Annotated[CallToolResult, CpuProfile]:
    """Why a worker is slow: samples its CPU for a few seconds and lists the hottest functions. Use stack_traces
    when it is stuck rather than busy."""
    kind = target_kind(job=job, actor_id=actor_id, task_id=task_id, pid=pid, node=node, tool="cpu_profile")
    target = Target(kind=kind, actor_id=actor_id, task_id=task_id, pid=pid, node=node)
    profile = await api.stacks.cpu_profile(
        target, duration_s=duration_s, top=top, max_frames=STACK_FRAMES.default
    )
    return tool_result(profile, render_profile(profile))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Python stacks of Ray processes"}))(
        stack_traces
    )
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "CPU profile of one Ray worker"}))(
        cpu_profile
    )
