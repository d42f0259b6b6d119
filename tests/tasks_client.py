"""The requester side of the MCP Tasks extension, as a host would build it on the SDK's ClientExtension API:
the claim of a ``resultType: "task"`` answer, and the tasks/get and tasks/cancel requests."""

from __future__ import annotations

from typing import Any, Literal

import anyio
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.types import CallToolResult
from mcp_types import EmptyResult, Request, RequestParams, Result
from pydantic import ConfigDict

from ray_mcp.server.mcp_tasks import TASKS_EXTENSION

TERMINAL_TASK = {"completed", "failed", "cancelled"}


class TaskState(Result):
    """A CreateTaskResult (``resultType: "task"``) or a tasks/get answer."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class PolledState(TaskState):
    result_type: Literal["complete"] = "complete"  # type: ignore[assignment]


class TaskId(RequestParams):
    task_id: str


class GetTask(Request[TaskId, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class CancelTask(Request[TaskId, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


async def get_task(session: ClientSession, task_id: str) -> PolledState:
    return await session.send_request(GetTask(params=TaskId(task_id=task_id)), PolledState)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskId(task_id=task_id)), EmptyResult)


async def poll_to_end(session: ClientSession, task_id: str, deadline_s: float = 180) -> PolledState:
    with anyio.fail_after(deadline_s):
        while True:
            state = await get_task(session, task_id)
            if state.status in TERMINAL_TASK:
                return state
            await anyio.sleep((state.poll_interval_ms or 1000) / 1000)


async def _resolve(handle: TaskState, ctx: ClaimContext) -> CallToolResult:
    state = await poll_to_end(ctx.session, handle.task_id)
    assert state.status == "completed", state
    return CallToolResult.model_validate(state.result)


class TasksClient(ClientExtension):
    """Declares the Tasks extension; a plain ``client.call_tool`` then polls a task to its answer."""

    identifier = TASKS_EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskState, resolve=_resolve)]


async def call_as_task(session: ClientSession, name: str, arguments: dict[str, Any]) -> TaskState:
    """The raw answer of a tools/call from a client that declared the extension: a task handle, asserted."""
    answer = await session.call_tool(name, arguments, allow_claimed=True)
    assert isinstance(answer, TaskState), answer
    return answer
