"""Ray Jobs: submit, inspect, list, wait for, stop and delete jobs."""

from typing import Annotated, Any, Literal

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult, ResourceLink
from mcp_types import InputRequiredResult
from pydantic import Field, WithJsonSchema

from ray_mcp.answers import RayAPI
from ray_mcp.guard import confirm as confirmation
from ray_mcp.guard.audit import note_audit
from ray_mcp.guard.confirm import Approval, Pending
from ray_mcp.limits import DEFAULT_WAIT_S, JOBS_LIMIT, LINKED_JOBS, MAX_WAIT_S
from ray_mcp.models import JobChange, JobInfo, JobList, JobSubmitted, JobWait, RuntimeEnvSpec
from ray_mcp.server.browser import show_pages
from ray_mcp.server.context import App, app_of
from ray_mcp.server.live import job_link
from ray_mcp.server.mcp_tasks import ToolTasks
from ray_mcp.shaping.common import linked, tool_result
from ray_mcp.shaping.jobs import render_job, render_job_list, render_wait
from ray_mcp.sources.dashboard import ProgressFn
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, WRITE, Api, Confirm, Job, current_api
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.JOBS  # see ray_mcp/toolsets.py

# ray-mcp checks the runtime_env itself (sources.runtime_env), so that a mistake gets a message naming the
# field and the fix. The schema names every field RuntimeEnvSpec takes; their formats are Ray's own.
RuntimeEnvArg = Annotated[
    dict[str, Any] | None,
    WithJsonSchema({"type": ["object", "null"]}),
    Field(
        description="Ray's runtime_env, checked before anything is submitted: "
        + ", ".join(RuntimeEnvSpec.model_fields)
        + ". A local working_dir or py_modules path must be under an upload root (it is uploaded); or a URI."
    ),
]


async def submit_job(
    ctx: Context,
    api: Api,
    entrypoint: Annotated[str, Field(description="Shell command, e.g. 'python train.py'.")],
    runtime_env: RuntimeEnvArg = None,
    submission_id: Annotated[
        str | None, Field(description="Your unique id; Ray makes one if omitted.")
    ] = None,
    metadata: Annotated[dict[str, str] | None, Field(description="Labels stored with the job.")] = None,
    entrypoint_num_cpus: Annotated[
        float | None, Field(ge=0, description="CPUs reserved for the driver.")
    ] = None,
    entrypoint_num_gpus: Annotated[
        float | None, Field(ge=0, description="GPUs reserved for the driver.")
    ] = None,
    entrypoint_memory: Annotated[
        int | None, Field(ge=0, description="Memory reserved for the driver, in bytes.")
    ] = None,
    entrypoint_resources: Annotated[
        dict[str, float] | None, Field(description="Custom resources reserved for the driver.")
    ] = None,
) -> Annotated[CallToolResult, JobSubmitted]:
    """Submit a job as `ray job submit` does, uploading a local working_dir, and return at once. Follow it with
    wait_for_job or tail_logs."""
    result = await api.jobs.submit(
        entrypoint=entrypoint,
        submission_id=submission_id,
        metadata=metadata,
        runtime_env=runtime_env,
        entrypoint_num_cpus=entrypoint_num_cpus,
        entrypoint_num_gpus=entrypoint_num_gpus,
        entrypoint_memory=entrypoint_memory,
        entrypoint_resources=entrypoint_resources,
        upload_roots=app_of(ctx).upload_roots,
    )
    note_audit(
        targets={"submission_id": result.submission_id}, created={"submission_id": result.submission_id}
    )
    uploaded = f" Uploaded: {', '.join(result.uploaded)}." if result.uploaded else ""
    text = f"Submitted job {result.submission_id}: {result.status}.{uploaded}\nHint: {result.hints[0]}"
    return linked(tool_result(result, text), [job_link(result.submission_id)])


async def get_job(
    ctx: Context,
    job: Job,
    datasets: Annotated[
        bool, Field(description="Also show its Ray Data datasets, operator by operator, bottleneck first.")
    ] = False,
    open_page: Annotated[
        bool, Field(description="Also open its dashboard and Grafana pages for the user to see.")
    ] = False,
) -> Annotated[CallToolResult, JobInfo] | InputRequiredResult:
    """One job's status, entrypoint, times and error, and on request its Ray Data datasets or its dashboard
    pages. Ask diagnose_job why it failed."""
    # No `api: Api`: showing pages may take an input round of its own (server/browser.py), and a tool with a
    # Resolve parameter may not.
    api = await current_api(ctx)
    info = await api.jobs.get(job)
    if datasets and info.job_id:  # opt-in: two more reads, where a job's status costs one
        info.data = await api.data.of_job(info.job_id, info.submission_id)
    answer = linked(
        tool_result(info, render_job(info)), [job_link(info.submission_id)] if info.submission_id else []
    )
    return await show_pages(ctx, await api.pages.of_job(info), answer) if open_page else answer


async def list_jobs(
    api: Api,
    status: Annotated[
        list[Literal["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]] | None,
        Field(description="Only jobs in these states."),
    ] = None,
    entrypoint_contains: Annotated[
        str | None, Field(description="Entrypoint substring, case-insensitive.")
    ] = None,
    limit: Annotated[
        int, Field(ge=JOBS_LIMIT.low, le=JOBS_LIMIT.high, description="Most jobs shown (all counted).")
    ] = JOBS_LIMIT.default,
) -> Annotated[CallToolResult, JobList]:
    """The cluster's jobs, newest first, with status, entrypoint, start, duration and error type. get_job shows
    one in full."""
    statuses = [str(s) for s in status] if status else None
    result = await api.jobs.page(statuses=statuses, entrypoint_contains=entrypoint_contains, limit=limit)
    return tool_result(result, render_job_list, links=job_links)


def job_links(page: JobList) -> list[ResourceLink]:
    """Links to the first LINKED_JOBS jobs the page shows (ray://jobs/{id}, live)."""
    return [job_link(j.submission_id) for j in page.jobs if j.submission_id][:LINKED_JOBS]


async def wait_for_job(
    api: Api,
    ctx: Context,
    job: Job,
    timeout_s: Annotated[
        float, Field(gt=0, le=MAX_WAIT_S, description=f"Most seconds to wait (at most {MAX_WAIT_S:g}).")
    ] = DEFAULT_WAIT_S,
) -> Annotated[CallToolResult, JobWait]:
    """Wait until a job ends or timeout_s passes, with progress notifications meanwhile. A timeout is not an
    error: call again to wait longer."""
    return await wait_result(api, job, timeout_s=timeout_s, on_progress=ctx.report_progress)


async def wait_result(
    api: RayAPI, job: str, *, timeout_s: float, on_progress: ProgressFn | None = None
) -> CallToolResult:
    """wait_for_job's answer: the blocking call's, and a finished job task's (server/mcp_tasks.py)."""
    result = await api.jobs.wait(job, timeout_s=timeout_s, on_progress=on_progress)
    return tool_result(result, render_wait(result))


async def ended_job_result(app: App, job: str) -> CallToolResult:
    """The answer of a job task whose job has ended (so the wait returns at once)."""
    return await wait_result(await app.api(), job, timeout_s=DEFAULT_WAIT_S)


async def stop_job(api: Api, job: Job) -> Annotated[CallToolResult, JobChange]:
    """Stop a running or pending job as `ray job stop` does; a job that ended is left as it is. Its record and
    logs stay until delete_job."""
    result = await api.jobs.stop(job)
    return tool_result(result, result.message)


async def delete_plan(ctx: Context, api: Api, job: str) -> Pending:
    """What delete_job would delete (found before anything changes); only an ended job may be deleted."""
    info, instance = await api.jobs.deletable(job)
    sid = str(info.submission_id)
    job_id = f"job {info.job_id}, " if info.job_id else ""
    started = f", started {info.start_time}" if info.start_time else ""
    # Ids, Ray's status and times only: the entrypoint is the cluster's text, not ours to put to the user.
    what = f"delete job {sid} ({job_id}{info.status}{started})"
    app = app_of(ctx)
    return Pending(
        "delete_job",
        sid,
        what,
        subject=info,
        instance=instance,
        cluster=await app.cluster_ref(),
        ttl_s=app.settings.confirm_token_ttl_s,
    )


async def delete_job(
    api: Api,
    job: Job,
    pending: Annotated[Pending, Resolve(delete_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(delete_plan)],
    confirm: Confirm = None,
) -> Annotated[CallToolResult, JobChange]:
    """Delete an ended job's record and data as `ray job delete` does, which cannot be undone. The user confirms,
    or a first call returns a token to pass back."""
    decision = confirmation.decide(pending, confirm, answer)
    if decision.proceed:
        result = await api.jobs.delete(pending.target, instance=pending.instance)
    else:
        result = JobChange(
            job=pending.target,
            action="delete",
            done=False,
            status=pending.subject.status,
            dry_run=decision.token is not None,
            confirm_token=decision.token,
            message=decision.text,
        )
    return tool_result(result, result.message)


def register(server: MCPServer) -> None:
    tasks = getattr(server, "tasks", None)
    if isinstance(tasks, ToolTasks):
        tasks.wait_result = ended_job_result
    server.tool(annotations=WRITE.model_copy(update={"title": "Submit a Ray job"}))(submit_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Get a Ray job"}))(get_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "List Ray jobs"}))(list_jobs)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Wait for a Ray job"}))(wait_for_job)
    stop = WRITE.model_copy(update={"title": "Stop a Ray job", "idempotent_hint": True})
    server.tool(annotations=stop)(stop_job)
    server.tool(annotations=DESTRUCTIVE.model_copy(update={"title": "Delete a Ray job"}))(delete_job)
