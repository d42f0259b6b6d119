"""Placement groups: their state, where their bundles landed, and why pending ones wait."""

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import DEFAULT_LIMIT, MAX_LIMIT
from ray_mcp.models import PlacementGroupList
from ray_mcp.shaping.common import clamp_limit, tool_result
from ray_mcp.shaping.placement_groups import render_pg_list
from ray_mcp.tools import READ_ONLY, Api, JobFilter
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py


async def pg_status(
    api: Api,
    placement_group: Annotated[
        str | None, Field(description="One placement group, by id (36 hex chars) or name.")
    ] = None,
    state: Annotated[
        Literal["PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"] | None,
        Field(description="Only groups in this state."),
    ] = None,
    job: JobFilter = None,
    limit: Annotated[
        int, Field(ge=0, description=f"Most groups to list (0: counts only; max {MAX_LIMIT}).")
    ] = DEFAULT_LIMIT,
) -> Annotated[CallToolResult, PlacementGroupList]:
    """Placement groups with their state, strategy, bundles and nodes, and why each PENDING one waits. Use it
    when actors or tasks wait for a group."""
    limit, note = clamp_limit(limit, what="placement groups")
    page = await api.placement_groups.status(
        placement_group=placement_group,
        state=state,
        job_id=await api.jobs.id_of(job),
        limit=limit,
        notes=[note] if note else [],
    )
    return tool_result(page, render_pg_list)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Placement group status"}))(pg_status)
