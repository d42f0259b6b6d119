"""Cluster events: what Ray's components reported, filtered, deduplicated, newest first."""

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.limits import EVENTS_SHOWN
from ray_mcp.models import EventList
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.events import render_event_list
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.TASKS  # see ray_mcp/toolsets.py


async def list_events(
    api: Api,
    severity: Annotated[
        Literal["WARNING", "ERROR", "FATAL"] | None,
        Field(description="The lowest severity shown (ERROR shows FATAL too)."),
    ] = None,
    source: Annotated[
        str | None,
        Field(description="Only events of this component: GCS, RAYLET, AUTOSCALER, JOBS, KUBERNETES..."),
    ] = None,
    node: Annotated[str | None, Field(description="A node id or IP.")] = None,
    job: Annotated[str | None, Field(description="A submission id or job id.")] = None,
    since_s: Annotated[float | None, Field(gt=0, description="Only the last N seconds.")] = None,
    limit: Annotated[
        int,
        Field(
            ge=EVENTS_SHOWN.low, le=EVENTS_SHOWN.high, description="Most events shown (repeats count once)."
        ),
    ] = EVENTS_SHOWN.default,
) -> Annotated[CallToolResult, EventList]:
    """Cluster events, newest first with repeats counted: node deaths, OOM kills, autoscaler decisions, job
    changes. Use it for what happened over time; cluster_health ranks what is wrong now."""
    events = await api.events.page(
        severity=severity,
        source=source.upper() if source else None,
        node=node,
        job=job,
        since_s=since_s,
        limit=limit,
    )
    return tool_result(events, render_event_list)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster events"}))(list_events)
