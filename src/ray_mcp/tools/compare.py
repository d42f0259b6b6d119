"""compare_jobs: two runs of a job side by side, and the difference that explains the most."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.models import JobComparison
from ray_mcp.shaping.common import tool_result
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset


async def compare_jobs(
    api: Api,
    a: Annotated[str, Field(min_length=1, description="The run that went well (submission id or job id).")],
    b: Annotated[str, Field(min_length=1, description="The run to explain: slower or failing (same forms).")],
) -> Annotated[CallToolResult, JobComparison]:
    """Why run b is slower or failing where run a was not: entrypoint, runtime_env, resources, duration, tasks
    per function (count, failures, duration), Ray version and nodes side by side, the biggest difference first.
    """
    answer, text = await api.comparisons.compare(a, b)
    return tool_result(answer, text)


# With get_metrics (the tools about time): offered where a Prometheus is known, or with --toolsets. Without a
# Prometheus it still compares what Ray records of the two runs; only their resource use needs one.
TOOLSET = Toolset.METRICS  # see ray_mcp/toolsets.py


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Compare two job runs"}))(compare_jobs)
