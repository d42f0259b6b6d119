"""memory_profile: what one worker allocates, and what it keeps (memray through the dashboard, or on this host)."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.targets import Target, target_kind
from ray_mcp.limits import MEMORY_ALLOCATORS, MEMORY_PROFILE_S
from ray_mcp.models import MemoryProfile
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.memory import render_memory_profile
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.tools.stacks import ActorArg, NodeArg, PidArg, TaskArg
from ray_mcp.toolsets import Toolset

Seconds = Annotated[
    int,
    Field(
        ge=MEMORY_PROFILE_S.low,
        le=MEMORY_PROFILE_S.high,
        description=f"Seconds memray stays attached (max {MEMORY_PROFILE_S.high}).",
    ),
]
Lines = Annotated[
    int, Field(ge=MEMORY_ALLOCATORS.low, le=MEMORY_ALLOCATORS.high, description="Allocating lines to list.")
]


TOOLSET = Toolset.PROFILING  # see ray_mcp/toolsets.py


async def memory_profile(
    api: Api,
    actor_id: ActorArg = None,
    task_id: TaskArg = None,
    pid: PidArg = None,
    node: NodeArg = None,
    duration_s: Seconds = MEMORY_PROFILE_S.default,
    leaks_only: Annotated[
        bool,
        Field(description="Report only memory still held when the window ends: the leak candidates."),
    ] = False,
    native: Annotated[
        bool, Field(description="Include C/C++ frames (numpy, Arrow, Torch allocations).")
    ] = False,
    top: Lines = MEMORY_ALLOCATORS.default,
) -> Annotated[CallToolResult, MemoryProfile]:
    """Where does a worker's memory go? Attaches memray to one worker for a few seconds and lists its largest
    allocating lines (own and total bytes) and, with leaks_only, the project lines whose memory stays held."""
    kind = target_kind(
        job=None, actor_id=actor_id, task_id=task_id, pid=pid, node=node, tool="memory_profile"
    )
    target = Target(kind=kind, actor_id=actor_id, task_id=task_id, pid=pid, node=node)
    profile = await api.profiles.memory_profile(
        target, duration_s=duration_s, leaks_only=leaks_only, native=native, top=top
    )
    return tool_result(profile, render_memory_profile(profile))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Memory profile of one Ray worker"}))(
        memory_profile
    )
