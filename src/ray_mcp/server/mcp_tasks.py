"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) on the SDK's Extension API.

mcp 2.3 ships no Tasks extension, only the means to build one (method bindings and a ``tools/call``
interceptor); this module is all of it, so that a later SDK release that ships the extension replaces this file
and nothing else. A client that declares the extension on a call to one of ``TASK_TOOLS`` gets a task handle
(``resultType: "task"``) at once, and polls ``tasks/get`` or gives up with ``tasks/cancel``. Any other client,
or call, keeps the blocking answer with progress notifications.

Two kinds of task:

* **A job wait** (``wait_for_job``): the task id carries the cluster and the Ray submission id, sealed with
  a random nonce and an HMAC over them and the caller (``TaskSeal``), and every ``tasks/get`` reads the job
  from Ray. So it survives a reconnect, and, where replicas share ``--replica-key-file`` (the key the seal
  derives from), a server restart and a load balancer that sends the poll to another replica. Cancelling it
  stops the waiting, never the job (a long training run must not die because a client gave up): stop_job
  stops jobs.
* **A call running here** (``cpu_profile``, ``tail_logs`` with ``follow_s``): its answer exists only in the
  process that ran it, so its id is random and ``tasks/get`` on another replica says where it lives (the
  spec's ``Mcp-Name`` header carries the task id so that a load balancer can route it back).

Every task id is unguessable, and a task belongs to the caller that made it (``caller_of_request``: over HTTP
its peer address, which it cannot forge; on stdio the one local client). Reading, updating or cancelling a task of
another caller is answered exactly as a task that does not exist. Each wait gets its own id, so cancelling one
changes no other wait, now or later; what a cancel leaves is forgotten after ``LOCAL_TASK_TTL_S``.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    RequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from ray_mcp import sdk_private
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.limits import LOCAL_TASK_TTL_S, MAX_LOCAL_TASKS, TASK_ID_CHARS, TASK_POLL_MS
from ray_mcp.models import TERMINAL_JOB_STATUSES
from ray_mcp.server.context import CURRENT_CLUSTER, App
from ray_mcp.server.shares import caller_of_request

log = logging.getLogger("ray_mcp.server")

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
# The tools whose call may become a task, and when (tail_logs only when it follows the log).
TASK_TOOLS: dict[str, Callable[[Mapping[str, Any]], bool]] = {
    "wait_for_job": lambda _arguments: True,
    "cpu_profile": lambda _arguments: True,
    "memory_profile": lambda _arguments: True,
    "gpu_profile": lambda _arguments: True,
    "tail_logs": lambda arguments: bool(arguments.get("follow_s")),
}
JOB_TASK_PREFIX = "job:"  # job:<sealed cluster and submission id>.<HMAC>
LOCAL_TASK_PREFIX = "call:"
SEAL_DIGEST_CHARS = 32  # hex characters of a job task id's HMAC (128 bits)
# What builds wait_for_job's answer for an ended job: (app, submission id) -> the tool's result.
WaitResult = Callable[[App, str], Awaitable[CallToolResult]]


class TaskParams(RequestParams):
    task_id: str = Field(alias="taskId", min_length=1, max_length=TASK_ID_CHARS)


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _dump(result: HandlerResult) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dict(result or {})


class QuietSession(ServerSession):
    """The session of a call that became a task: its request was answered with the task handle, so progress
    and log notifications for it have nowhere to go (the spec sends none for tasks)."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None

    async def send_notification(self, notification: Any, related_request_id: Any = None) -> None:
        return None

    async def send_log_message(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclasses.dataclass
class LocalTask:
    """A tool call running in this process as a task, and the caller it belongs to."""

    tool: str
    job: asyncio.Task[HandlerResult]
    created: str
    owner: str
    started: float = dataclasses.field(default_factory=time.monotonic)
    cancelled: bool = False


class TaskSeal:
    """Job task ids: ``job:`` + the cluster and submission id (with a random nonce) + an HMAC over them and the
    owner. The key is this process's own, or derived from the replica key (``--replica-key-file``), so that
    every replica opens what another sealed. Without the key, or as another caller, an id opens to nothing."""

    def __init__(self, replica_key: bytes | None = None) -> None:
        self.key = (
            hashlib.sha256(b"ray-mcp task ids\0" + replica_key).digest()
            if replica_key is not None
            else secrets.token_bytes(32)
        )

    def _digest(self, owner: str, body: str) -> str:
        mac = hmac.new(self.key, f"{owner}\0{body}".encode(), hashlib.sha256).hexdigest()
        return mac[:SEAL_DIGEST_CHARS]

    def seal(self, owner: str, cluster: str, submission_id: str) -> str:
        payload = json.dumps([cluster, submission_id, secrets.token_urlsafe(12)], separators=(",", ":"))
        body = base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")
        return f"{JOB_TASK_PREFIX}{body}.{self._digest(owner, body)}"

    def unseal(self, owner: str, task_id: str) -> tuple[str, str] | None:
        """(cluster, submission id) of a job task id this owner was given, else None."""
        body, _, digest = task_id.removeprefix(JOB_TASK_PREFIX).rpartition(".")
        if not body or not hmac.compare_digest(digest, self._digest(owner, body)):
            return None
        try:
            cluster, submission_id, _nonce = json.loads(
                base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            )
        except (ValueError, TypeError):
            return None
        return str(cluster), str(submission_id)


class ToolTasks(Extension):
    """tasks/get, tasks/update and tasks/cancel, and the tools/call interceptor that makes tasks."""

    identifier = TASKS_EXTENSION

    def __init__(self, app: App, *, replica_key: bytes | None = None) -> None:
        self.app = app
        self.wait_result: WaitResult | None = None  # set by tools/jobs.py when it registers wait_for_job
        self.local: dict[str, LocalTask] = {}
        self.seal = TaskSeal(replica_key)
        # job waits cancelled through this process (each wait's own id), and when: forgotten after the TTL
        self.stopped_waits: dict[str, float] = {}
        app.on_close.append(self.aclose)

    def methods(self) -> list[MethodBinding]:
        modern = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self.get, protocol_versions=modern),
            MethodBinding("tasks/update", UpdateTaskParams, self.update, protocol_versions=modern),
            MethodBinding("tasks/cancel", TaskParams, self.cancel, protocol_versions=modern),
        ]

    # -- tools/call ------------------------------------------------------------------------------------------

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        arguments = params.arguments or {}
        wants = TASK_TOOLS.get(params.name)
        if wants is None or not wants(arguments) or not declared(ctx):
            return await call_next(ctx)
        owner = caller_of_request(ctx.request)
        if params.name == "wait_for_job":
            handle = await self._job_task(arguments, owner)
            return handle if handle is not None else await call_next(ctx)
        self._prune()
        if len(self.local) >= MAX_LOCAL_TASKS:  # full: the caller gets the blocking answer
            return await call_next(ctx)
        quiet = dataclasses.replace(ctx, session=sdk_private.session_as(ctx.session, QuietSession))
        task_id = LOCAL_TASK_PREFIX + secrets.token_urlsafe(18)

        async def run() -> HandlerResult:
            return await call_next(quiet)

        task = LocalTask(params.name, asyncio.create_task(run()), _now(), owner)
        self.local[task_id] = task
        return {"resultType": "task", **self._local_state(task_id, task)}

    async def _job_task(self, arguments: Mapping[str, Any], owner: str) -> dict[str, Any] | None:
        """The handle of a wait for a job that has not ended, or None for the blocking answer (a job that
        has ended, or one that cannot be read: the blocking call says why)."""
        job = arguments.get("job")
        if not isinstance(job, str) or not job:
            return None
        cluster = CURRENT_CLUSTER.get() or self.app.default_cluster
        try:
            info = await (await self.app.api()).jobs.get(job)
        except RayMCPError:
            return None
        if info.status in TERMINAL_JOB_STATUSES or not info.submission_id:
            return None
        task_id = self.seal.seal(owner, cluster, info.submission_id)
        return {
            "resultType": "task",
            **self._job_base(task_id, info.start_time),
            "status": "working",
            "statusMessage": f"Job {info.submission_id} is {info.status}.",
        }

    # -- tasks/* ---------------------------------------------------------------------------------------------

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        require_declared(ctx)
        task_id, owner = params.task_id, caller_of_request(ctx.request)
        if task_id.startswith(JOB_TASK_PREFIX):
            return await self._job_state(task_id, self._job_of(owner, task_id))
        return self._local_state(task_id, self._local_of(owner, task_id))

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> HandlerResult:
        """No ray-mcp task asks for input, so there is nothing to update; a known task is acknowledged."""
        await self.get(ctx, TaskParams(taskId=params.task_id))
        return {}

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskParams) -> HandlerResult:
        require_declared(ctx)
        task_id, owner = params.task_id, caller_of_request(ctx.request)
        if task_id.startswith(JOB_TASK_PREFIX):
            job = self._job_of(owner, task_id)
            await self._job_state(task_id, job)  # an unknown job is an error, as for tasks/get
            self._prune()
            self.stopped_waits[task_id] = time.monotonic()
            return {}
        task = self._local_of(owner, task_id)
        if not task.job.done():
            task.cancelled = True
            task.job.cancel()
        return {}

    def _job_of(self, owner: str, task_id: str) -> tuple[str, str]:
        """The (cluster, submission id) of a job wait this caller made; else as if there were no such task."""
        opened = self.seal.unseal(owner, task_id)
        if opened is None or opened[0] not in self.app.connections or not opened[1]:
            raise _unknown(task_id)
        return opened

    def _local_of(self, owner: str, task_id: str) -> LocalTask:
        """A call of this caller running (or run) here; else as if there were no such task."""
        self._prune()
        task = self.local.get(task_id)
        if task is None or not hmac.compare_digest(task.owner, owner):
            raise _unknown(task_id)
        return task

    async def _job_state(self, task_id: str, job: tuple[str, str]) -> dict[str, Any]:
        cluster, sid = job
        token = CURRENT_CLUSTER.set(cluster)
        try:
            try:
                info = await (await self.app.api()).jobs.get(sid)
            except NotFound as exc:  # the job's record is gone: so is the task
                raise MCPError(INVALID_PARAMS, f"Failed to retrieve task {task_id!r}: {exc}") from None
            except RayMCPError as exc:  # the cluster could not answer now: the task may well be there
                raise MCPError(INTERNAL_ERROR, f"Could not read task {task_id!r} now: {exc}") from None
            base = self._job_base(task_id, info.start_time)
            if task_id in self.stopped_waits:
                message = f"Stopped waiting; job {sid} is {info.status} (stop_job stops it)."
                return {**base, "status": "cancelled", "statusMessage": message}
            if info.status not in TERMINAL_JOB_STATUSES:
                return {**base, "status": "working", "statusMessage": f"Job {sid} is {info.status}."}
            assert self.wait_result is not None, "tools/jobs.py registers wait_for_job's answer"
            result = await self.wait_result(self.app, sid)
        finally:
            CURRENT_CLUSTER.reset(token)
        message = f"Job {sid} ended: {info.status}."
        return {**base, "status": "completed", "statusMessage": message, "result": _dump(result)}

    def _job_base(self, task_id: str, started: str | None) -> dict[str, Any]:
        return {
            "taskId": task_id,
            "createdAt": started or _now(),
            "lastUpdatedAt": _now(),
            "ttlMs": None,  # as long as Ray keeps the job's record
            "pollIntervalMs": TASK_POLL_MS,
        }

    def _local_state(self, task_id: str, task: LocalTask) -> dict[str, Any]:
        state: dict[str, Any] = {
            "taskId": task_id,
            "createdAt": task.created,
            "lastUpdatedAt": _now(),
            "ttlMs": round(LOCAL_TASK_TTL_S * 1000),
            "pollIntervalMs": TASK_POLL_MS,
        }
        running = round(time.monotonic() - task.started)
        if not task.job.done():
            return {**state, "status": "working", "statusMessage": f"{task.tool} running for {running} s."}
        if task.cancelled or task.job.cancelled():
            return {**state, "status": "cancelled", "statusMessage": f"{task.tool} was cancelled."}
        exc = task.job.exception()
        if isinstance(exc, MCPError):
            error = exc.error.model_dump(mode="json", by_alias=True, exclude_none=True)
            return {**state, "status": "failed", "statusMessage": exc.error.message, "error": error}
        if exc is not None:
            log.error("ray-mcp: task %s (%s) failed", task_id, task.tool, exc_info=exc)
            error = {"code": INTERNAL_ERROR, "message": f"{task.tool} failed: {type(exc).__name__}."}
            return {**state, "status": "failed", "statusMessage": error["message"], "error": error}
        result = _dump(task.job.result())
        return {**state, "status": "completed", "result": result}

    def _prune(self) -> None:
        """Forget tasks older than their TTL (a running one is cancelled first), and old cancelled waits."""
        now = time.monotonic()
        for task_id, task in list(self.local.items()):
            if now - task.started > LOCAL_TASK_TTL_S:
                task.job.cancel()
                del self.local[task_id]
        for task_id, at in list(self.stopped_waits.items()):
            if now - at > LOCAL_TASK_TTL_S:
                del self.stopped_waits[task_id]

    async def aclose(self) -> None:
        for task in self.local.values():
            task.job.cancel()
        self.local.clear()
        self.stopped_waits.clear()


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the Tasks extension (a 2026-07-28 request only)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS_EXTENSION in capabilities.extensions)


def require_declared(ctx: ServerRequestContext[Any, Any]) -> None:
    if not declared(ctx):
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: declare the {TASKS_EXTENSION} extension to use tasks.",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )


def _unknown(task_id: str) -> MCPError:
    where = (
        " Tasks of cpu_profile and tail_logs live in the ray-mcp process that ran them (and for "
        f"{round(LOCAL_TASK_TTL_S)} s); behind a load balancer, route by the Mcp-Name header."
        if task_id.startswith(LOCAL_TASK_PREFIX)
        else ""
    )
    return MCPError(INVALID_PARAMS, f"Failed to retrieve task: no task {task_id!r}.{where}")
