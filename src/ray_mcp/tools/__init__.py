"""MCP tools, one module per area: tool functions at module level, and ``register(server)`` adding them.

A tool gets the adapter of the cluster its call is for as a parameter, ``api: Api``: the SDK's dependency
resolution (``Resolve``) fills it before the body runs, so a tool body is only its arguments, one adapter
call and one answer.
"""

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import ToolAnnotations
from pydantic import Field

from ray_mcp.answers import RayAPI
from ray_mcp.server.context import app_of

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
)


async def current_api(ctx: Context) -> RayAPI:
    """The adapter of the cluster this call is for (the first call may wait for the cluster to be found)."""
    return await app_of(ctx).api()


Api = Annotated[RayAPI, Resolve(current_api)]

# The arguments that name the same thing in every area.
Job = Annotated[str, Field(min_length=1, description="A submission id (raysubmit_...) or job id.")]
JobFilter = Annotated[str | None, Field(description="Only this job's (submission id or job id).")]
Confirm = Annotated[str | None, Field(description="The token from a first call without it.")]
