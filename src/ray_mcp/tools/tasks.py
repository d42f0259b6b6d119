"""Tasks: list them, or count them by function and state with failures grouped by error type."""

from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers import RayAPI
from ray_mcp.limits import DEFAULT_TASK_LIMIT, MAX_LIMIT
from ray_mcp.models import TaskList, TaskSummary
from ray_mcp.shaping.common import clamp_limit, tool_result
from ray_mcp.shaping.tasks import render_task_list, render_task_summary
from ray_mcp.sources.query import Filter, where
from ray_mcp.tools import READ_ONLY, Api, JobFilter
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.TASKS  # see ray_mcp/toolsets.py

TaskStateName = Literal[
    "NIL",
    "PENDING_ARGS_AVAIL",
    "PENDING_NODE_ASSIGNMENT",
    "PENDING_OBJ_STORE_MEM_AVAIL",
    "PENDING_ARGS_FETCH",
    "SUBMITTED_TO_WORKER",
    "PENDING_ACTOR_TASK_ARGS_FETCH",
    "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY",
    "RUNNING",
    "RUNNING_IN_RAY_GET",
    "RUNNING_IN_RAY_WAIT",
    "FINISHED",
    "FAILED",
]
State = Annotated[TaskStateName | None, Field(description="Only tasks in this state.")]
Name = Annotated[str | None, Field(description="Only tasks with this name (function or Class.method).")]
ActorId = Annotated[str | None, Field(description="Only tasks of this actor (32 hex chars).")]
ErrorType = Annotated[
    str | None,
    Field(description="Only failed tasks with this Ray error type, e.g. TASK_EXECUTION_EXCEPTION."),
]


async def task_filters(
    api: RayAPI,
    state: str | None,
    name: str | None,
    job: str | None,
    actor_id: str | None,
    error_type: str | None,
) -> list[Filter]:
    job_id = await api.jobs.id_of(job)
    return where(state=state, name=name, job_id=job_id, actor_id=actor_id, error_type=error_type)


async def list_tasks(
    api: Api,
    state: State = None,
    name: Name = None,
    job: JobFilter = None,
    actor_id: ActorId = None,
    error_type: ErrorType = None,
    limit: Annotated[
        int, Field(ge=0, description=f"Most tasks to list (0: counts only; max {MAX_LIMIT}).")
    ] = DEFAULT_TASK_LIMIT,
    detail: Annotated[bool, Field(description="Also fetch each failed task's error message.")] = True,
) -> Annotated[CallToolResult, TaskList]:
    """Individual tasks and actor calls with state, job, actor, node and error. For counts by function and state,
    use summarize_tasks."""
    limit, note = clamp_limit(limit, what="tasks")
    filters = await task_filters(api, state, name, job, actor_id, error_type)
    page = await api.tasks.page(filters=filters, limit=limit, detail=detail, notes=[note] if note else [])
    return tool_result(page, render_task_list)


async def summarize_tasks(
    api: Api,
    state: State = None,
    name: Name = None,
    job: JobFilter = None,
    actor_id: ActorId = None,
    error_type: ErrorType = None,
) -> Annotated[CallToolResult, TaskSummary]:
    """Tasks counted by function and state, with failures grouped by error type and a sample of each. Use it
    before list_tasks on a large job."""
    summary = await api.tasks.summarize(
        filters=await task_filters(api, state, name, job, actor_id, error_type)
    )
    return tool_result(summary, render_task_summary(summary))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "List tasks"}))(list_tasks)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Summarize tasks"}))(summarize_tasks)
