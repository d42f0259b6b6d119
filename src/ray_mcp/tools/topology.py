"""Training topology: one job's placement groups, bundles, actors, Serve replicas and nodes in one view."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.models import JobTopology
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.topology_text import render_topology
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.TASKS  # see ray_mcp/toolsets.py


async def job_topology(
    api: Api,
    job: Annotated[str, Field(description="The job: submission id (raysubmit_...) or job id (hex).")],
) -> Annotated[CallToolResult, JobTopology]:
    """Where one job's parts run: its driver, placement groups and bundles, their actors (node, GPU ids, state),
    Serve replicas and nodes, gaps first. diagnose_job says why it failed."""
    topology = await api.topology.get(job)
    return tool_result(topology, render_topology(topology))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Job topology"}))(job_topology)
