"""Cluster-wide tools."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import STATUS_NODES
from ray_mcp.models import ClusterStatus
from ray_mcp.shaping.cluster import render_cluster_status, with_decisions
from ray_mcp.shaping.common import tool_result
from ray_mcp.sources.dashboard import gather
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py


async def cluster_status(
    api: Api,
    max_nodes: Annotated[
        int,
        Field(ge=STATUS_NODES.low, le=STATUS_NODES.high, description="Most nodes to list (all are counted)."),
    ] = STATUS_NODES.default,
) -> Annotated[CallToolResult, ClusterStatus]:
    """Start here: the cluster as `ray status` shows it, with nodes, resource use, pending and infeasible demands
    and the autoscaler. Ask cluster_health instead what is wrong."""
    notes: list[str] = []
    status, decisions = await gather(
        api.nodes.cluster_status(max_nodes=max_nodes), api.events.autoscaler_decisions(notes)
    )
    with_decisions(status, decisions, notes)
    return tool_result(status, render_cluster_status(status))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster status"}))(cluster_status)
