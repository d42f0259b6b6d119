"""The object store: what fills it, who holds it, what spilled, what leaks (like `ray memory`)."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import OBJECT_GROUPS
from ray_mcp.models import ObjectStoreSummary
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.objects import render_object_store
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.TASKS  # see ray_mcp/toolsets.py


async def summarize_objects(
    api: Api,
    limit: Annotated[
        int, Field(ge=OBJECT_GROUPS.low, le=OBJECT_GROUPS.high, description="Most holders listed.")
    ] = OBJECT_GROUPS.default,
) -> Annotated[CallToolResult, ObjectStoreSummary]:
    """The object store as `ray memory` shows it: use and spilling per node, references by call site and owner,
    and likely leaks. Use it when the store fills or memory grows."""
    summary = await api.objects.summarize(limit=limit)
    return tool_result(summary, render_object_store(summary))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Object store"}))(summarize_objects)
