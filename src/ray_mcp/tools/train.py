"""Ray Train runs: list them, and show one by rank (worker group, errors, latest checkpoint)."""

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp import limits
from ray_mcp.models import TrainRun, TrainRunList
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.train import render_run, render_run_list
from ray_mcp.tools import READ_ONLY, Api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.TRAIN  # see ray_mcp/toolsets.py

RunStatus = Literal[
    "INITIALIZING", "SCHEDULING", "RUNNING", "RESTARTING", "RESIZING", "FINISHED", "ERRORED", "ABORTED"
]


async def list_train_runs(
    api: Api,
    status: Annotated[RunStatus | None, Field(description="Only runs in this state.")] = None,
    name: Annotated[str | None, Field(description="Only runs with this name (RunConfig.name).")] = None,
    limit: Annotated[
        int,
        Field(
            ge=limits.TRAIN_RUNS.low,
            le=limits.TRAIN_RUNS.high,
            description=f"Most runs to list (max {limits.TRAIN_RUNS.high}).",
        ),
    ] = limits.TRAIN_RUNS.default,
) -> Annotated[CallToolResult, TrainRunList]:
    """Ray Train runs, newest first, with status, job, attempts and workers. get_train_run shows one run in full."""
    page = await api.train.list_runs(status=status, name=name, limit=limit)
    return tool_result(page, render_run_list)


async def get_train_run(
    api: Api,
    run: Annotated[
        str, Field(description="The run id (32 hex chars) or name (the newest run of that name).")
    ],
) -> Annotated[CallToolResult, TrainRun]:
    """One Ray Train run: its workers by rank (actor, node, GPUs, state), the errors by rank and its latest
    checkpoint. list_train_runs finds its id."""
    result = await api.train.get_run(run)
    return tool_result(result, render_run(result))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "List Train runs"}))(list_train_runs)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Train run"}))(get_train_run)
