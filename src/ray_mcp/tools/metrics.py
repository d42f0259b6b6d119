"""get_metrics: time series of the cluster over a window, from its Prometheus, as summaries (toolset "metrics")."""

import asyncio
import base64
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent
from pydantic import Field

from ray_mcp.answers.metrics import Request
from ray_mcp.limits import METRIC_SERIES, PROMQL_CHARS
from ray_mcp.models import MetricsAnswer
from ray_mcp.shaping import charts
from ray_mcp.shaping import metrics as shape
from ray_mcp.shaping.common import tool_result
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.METRICS  # see ray_mcp/toolsets.py

# The named questions (answers/metric_questions.py QUESTIONS, in the same order; a test keeps them equal).
Question = Literal[
    "node_cpu",
    "node_memory",
    "node_disk",
    "node_network",
    "node_gpu",
    "object_store",
    "tasks",
    "actors",
    "serve",
    "data",
    "worker_memory",
    "worker_cpu",
]


async def get_metrics(
    api: Api,
    question: Annotated[Question | None, Field(description="A named question (or give promql).")] = None,
    promql: Annotated[
        str | None, Field(max_length=PROMQL_CHARS, description="Raw PromQL (experts), sent as is.")
    ] = None,
    node: Annotated[str | None, Field(description="Only this node (id or IP).")] = None,
    job: Annotated[
        str | None, Field(description="Only this job's (tasks, actors, worker_memory, worker_cpu).")
    ] = None,
    deployment: Annotated[str | None, Field(description="Only this Serve deployment (serve).")] = None,
    operator: Annotated[
        str | None, Field(description="Only Data operators whose name has this (data).")
    ] = None,
    last: Annotated[str | None, Field(description="Window ending now: 15m (default), 2h, 1d.")] = None,
    since: Annotated[str | None, Field(description="Window start: ISO 8601 (UTC) or Unix seconds.")] = None,
    until: Annotated[str | None, Field(description="Window end (default now).")] = None,
    limit: Annotated[
        int, Field(ge=METRIC_SERIES.low, le=METRIC_SERIES.high, description="Most series shown, in all.")
    ] = METRIC_SERIES.default,
    chart: Annotated[bool, Field(description="Also return a PNG chart of the series.")] = False,
) -> Annotated[CallToolResult, MetricsAnswer]:
    """Metrics over a time window from the cluster's Prometheus, each series summed up (first, min, max, last,
    mean, slope, when it changed, a sparkline). Ask a named question (node use, object store, tasks, actors,
    Serve latency and errors, Data, worker memory and CPU) or PromQL; with no Prometheus it reads the values
    now."""
    reply = await api.metrics.ask(
        Request(question, promql, node, job, deployment, operator, last, since, until, limit)
    )
    result = tool_result(reply.answer, shape.render)
    if chart:  # of the series sent: the edge may have left some out
        sent = MetricsAnswer.model_validate(result.structured_content)
        try:
            image = await asyncio.to_thread(charts.png, sent.panels, reply.points, sent.verdict)
        except charts.ChartUnavailable as exc:
            result.content[0].text += f"\nNote: no chart: {exc}."  # type: ignore[union-attr]
        else:
            data = base64.b64encode(image).decode()
            result.content.append(ImageContent(type="image", data=data, mime_type="image/png"))
    return result


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Metrics over time"}))(get_metrics)
