"""gpu_profile: a Torch GPU trace of one training worker (the dashboard's /worker/gpu_profile)."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.targets import Target, target_kind
from ray_mcp.limits import GPU_PROFILE_STEPS
from ray_mcp.models import GpuProfile
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.memory import render_gpu_profile
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.tools.stacks import ActorArg, NodeArg, PidArg
from ray_mcp.toolsets import Toolset

Steps = Annotated[
    int,
    Field(
        ge=GPU_PROFILE_STEPS.low,
        le=GPU_PROFILE_STEPS.high,
        description="Training steps (optimizer.step() calls) the trace covers.",
    ),
]


TOOLSET = Toolset.PROFILING  # see ray_mcp/toolsets.py


async def gpu_profile(
    api: Api,
    actor_id: ActorArg = None,
    pid: PidArg = None,
    node: NodeArg = None,
    steps: Steps = GPU_PROFILE_STEPS.default,
) -> Annotated[CallToolResult, GpuProfile]:
    """Why is a GPU training worker slow? Traces its next Torch training steps on the GPU and says where the
    trace file is; it says so when the worker's node has no GPU."""
    kind = target_kind(job=None, actor_id=actor_id, task_id=None, pid=pid, node=node, tool="gpu_profile")
    target = Target(kind=kind, actor_id=actor_id, pid=pid, node=node)
    profile = await api.profiles.gpu_profile(target, steps=steps)
    return tool_result(profile, render_gpu_profile(profile))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "GPU trace of one Ray training worker"}))(
        gpu_profile
    )
