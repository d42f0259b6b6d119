"""Nodes: who is in the cluster, with what resources, and why dead ones died."""

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import DEFAULT_LIMIT, MAX_LIMIT
from ray_mcp.models import Node, NodeList
from ray_mcp.shaping.common import clamp_limit, tool_result
from ray_mcp.shaping.nodes import render_node, render_node_list
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py


async def list_nodes(
    api: Api,
    state: Annotated[
        Literal["ALIVE", "DEAD"] | None, Field(description="Only alive or only dead nodes.")
    ] = None,
    limit: Annotated[
        int, Field(ge=0, description=f"Most nodes to list (0: counts only; max {MAX_LIMIT}).")
    ] = DEFAULT_LIMIT,
) -> Annotated[CallToolResult, NodeList]:
    """The cluster's nodes: alive or dead (and why), head or worker, resources total and free, host use and
    labels. cluster_status sums them up."""
    limit, note = clamp_limit(limit, what="nodes")
    page = await api.nodes.page(state=state, limit=limit, notes=[note] if note else [])
    return tool_result(page, render_node_list)


async def get_node(
    api: Api,
    node: Annotated[str, Field(description="The node's id (56 hex characters), IP address or name.")],
) -> Annotated[CallToolResult, Node]:
    """One node in full: alive or dead and why, resources total and free, labels and host use, with what to call
    next about it. list_nodes shows them all."""
    found, notes = await api.nodes.one(node)
    return tool_result(found, render_node(found, notes))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "List nodes"}))(list_nodes)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Get a node"}))(get_node)
