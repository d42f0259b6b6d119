"""Before and around the driver's own code: a runtime_env that could not be set up (the job's, a task's, an
actor's), an entrypoint that cannot be scheduled or started, a driver that exited without a traceback, a job
still PENDING or stopped on request."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.facts import CONTEXT, INFO, ROOT, STUCK, WARNING, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, amount, amounts, num
from ray_mcp.diagnosis.recognise import RUNTIME_ENV_FAILED, env_failure, exc_quote
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.tracebacks import error_lines, first_line
from ray_mcp.limits import (
    CAUSE_CHARS,
    DRIVER_QUOTE_LINES,
    LAST_OUTPUT_CHARS,
    LOG_QUOTE_LINE_CHARS,
    RUNTIME_ENV_ERROR_LINES,
)
from ray_mcp.text import one_line, quoted

RUNTIME_ENV_DOC = "ray-docs://reference/11-runtime-environment"
JOBS_DOC = "ray-docs://reference/12-job-submission"

# The runtime_env fields that install or upload something (what a failed or slow setup was doing).
INSTALLING = ("pip", "uv", "conda", "container", "image_uri", "working_dir", "py_modules", "py_executable")

ENV_FAILED = Say("env_failed", Edge.ENDED_BY, said("{subject} could not set up its runtime_env: {error}"))
JOB_ENV_FAILED = Say(
    "job_env_failed",
    Edge.ENDED_BY,
    lambda f: f"the job's runtime_env failed to set up, so the driver never ran: {quoted(f['message'])}",
)
ENV_FIELDS = Say("env_fields", Edge.ENDED_BY, said("[runtime_env] what it installs or uploads: {fields}"))
ENTRYPOINT_FAILED = Say(
    "entrypoint_failed",
    Edge.ENDED_BY,
    lambda f: f"the entrypoint command could not start: {quoted(f['message'])}",
)
ENTRYPOINT_INFEASIBLE = Say(
    "entrypoint_infeasible",
    Edge.WAITS_ON,
    lambda f: (
        f"the job's driver cannot be scheduled: entrypoint resources {{{amounts(f.resources)}}} "
        f"fit on no node ({'; '.join(f['lacking'])})"
    ),
)
DRIVER_CANNOT_START = Say("driver_cannot_start", Edge.WAITS_ON, said("The driver cannot start"), leads=True)
DRIVER_EXITED = Say(
    "driver_exited",
    Edge.ENDED_BY,
    lambda f: (
        "the driver exited"
        + (f" with exit code {f['code']}" if f["code"] is not None else "")
        + f" without a Python traceback ({f['error_type']})"
        + (f"; its last output: {quoted(f['said'], LAST_OUTPUT_CHARS)}" if f["said"] else "")
    ),
)
NOT_STARTED = Say("not_started", Edge.WAITS_ON, said("its driver has not started yet"))
STOPPED = Say("stopped", Edge.ENDED_BY, said("stopped with stop_job or `ray job stop`, not crashed"))


def runtime_env_fields(env: Row | None) -> str:
    """'pip ["torch==9.9"], working_dir "s3://…"': the fields of a runtime_env that decide what is installed or
    uploaded, with their values quoted."""
    env = env or {}
    return ", ".join(f"{k} {quoted(env[k], CAUSE_CHARS // 2)}" for k in INSTALLING if env.get(k))


@rule(
    On.TASK_END,
    Kind.RUNTIME_ENV,
    order=30,
    refs=(RUNTIME_ENV_DOC, "prompt:runtime-env-failure"),
    reads=("tasks",),
)
def task_env_failed(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose worker could not set up its runtime_env: the installer's own error."""
    msg = str(t.get("error_message") or "")
    if str(t.get("error_type") or "") != "RUNTIME_ENV_SETUP_FAILED":
        return []
    return [ENV_FAILED(g.task_label(t), exc_quote(msg), error=env_failure(msg))]


@rule(On.ACTOR_END, Kind.RUNTIME_ENV, order=12, reads=("actors",))
def actor_env_failed(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose runtime_env could not be set up: the installer's own error."""
    ctx = (row.get("death_cause") or {}).get("runtime_env_failed_context")
    if ctx is None:
        return []
    text = str(ctx.get("error_message") or "")
    return [ENV_FAILED(g.actor_label(row), text, error=env_failure(text))]


@rule(
    On.JOB,
    Kind.RUNTIME_ENV,
    order=10,
    severity=ROOT + 5,
    next_steps=(
        "Fix the runtime_env and resubmit with submit_job (it checks the env first)",
        "prompt runtime-env-failure(job={sid})",
    ),
    reads=("job",),
)
def runtime_env_failure(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The job's runtime_env could not be set up, so its driver never ran: the installer's error, and the field
    of the runtime_env that decided what it installed or uploaded."""
    job = g.ev.job or {}
    message = str(job.get("message") or "")
    if job.get("error_type") != "RUNTIME_ENV_SETUP_FAILURE" and not RUNTIME_ENV_FAILED.search(message):
        return []
    fields = runtime_env_fields(job.get("runtime_env"))
    sid = job.get("submission_id") or job.get("job_id")
    return [
        Chain(
            ROOT + 5,
            Kind.RUNTIME_ENV,
            None,
            [
                JOB_ENV_FAILED(
                    "", " | ".join(error_lines(message, RUNTIME_ENV_ERROR_LINES)), message=first_line(message)
                )
            ],
            [step.format(sid=sid) for step in runtime_env_failure.next_steps],
            str(job.get("job_id") or "") or None,
            details=[ENV_FIELDS(fields=fields)] if fields else [],
        )
    ]


def entrypoint_need(job: Row, supervisor: Row | None = None) -> dict[str, float]:
    """What the driver asks for: entrypoint_num_cpus/gpus/memory and entrypoint_resources, else what its
    supervisor actor asks for (Ray's job details do not always carry them)."""
    need = {str(k): num(v) for k, v in (job.get("entrypoint_resources") or {}).items() if num(v)}
    for key, name in (
        ("entrypoint_num_cpus", "CPU"),
        ("entrypoint_num_gpus", "GPU"),
        ("entrypoint_memory", "memory"),
    ):
        if num(job.get(key)):
            need[name] = num(job[key])
    if not need and supervisor:
        need = {str(k): num(v) for k, v in (supervisor.get("required_resources") or {}).items() if num(v)}
    return need


@rule(
    On.JOB,
    Kind.ENTRYPOINT,
    order=20,
    severity=ROOT,
    refs=(JOBS_DOC,),
    next_steps=("Check the entrypoint command and that its files are in working_dir",),
    reads=("job",),
)
def entrypoint_start(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The entrypoint command could not start, in Ray's words."""
    job = g.ev.job or {}
    if job.get("error_type") != "JOB_ENTRYPOINT_COMMAND_START_ERROR":
        return []
    message = str(job.get("message") or "")
    link = ENTRYPOINT_FAILED("", " | ".join(error_lines(message)), message=first_line(message))
    return [
        Chain(
            ROOT,
            Kind.ENTRYPOINT,
            None,
            [link],
            list(entrypoint_start.next_steps),
            str(job.get("job_id") or "") or None,
        )
    ]


@rule(
    On.JOB,
    Kind.ENTRYPOINT_RESOURCES,
    order=21,
    severity=ROOT + 3,
    refs=(JOBS_DOC,),
    next_steps=(
        "Lower entrypoint_num_cpus / entrypoint_num_gpus / entrypoint_resources, or add a node with them",
        "cluster_status shows what each node has",
    ),
    reads=("job", "supervisor", "nodes", "alive_actors", "running_tasks"),
)
def entrypoint_resources(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A PENDING job whose driver cannot be scheduled: its entrypoint_* resources fit no node (what each lacks),
    or others hold them."""
    from ray_mcp.diagnosis.rules.placement import resource_wait

    job = g.ev.job or {}
    unschedulable = job.get("error_type") in (
        "JOB_SUPERVISOR_ACTOR_START_TIMEOUT",
        "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE",
    )
    if job.get("status") != "PENDING" and not unschedulable:
        return []
    need = entrypoint_need(job, g.ev.supervisor)
    links = resource_wait(g, "the job's entrypoint", need) if need else []
    if not links:
        return []
    last = links[-1]
    if last.say.infeasible:  # entrypoint_* resources no node has
        most = {k: max((t.get(k, 0.0) for t in g.node_totals().values()), default=0.0) for k in need}
        lacking = [
            f"{k}: {amount(k, v)} wanted, no node has more than {amount(k, most[k])}"
            for k, v in need.items()
            if most[k] < v
        ]
        links = [ENTRYPOINT_INFEASIBLE("", last.quote, need, lacking=lacking)]
        severity, what = ROOT + 3, None
    elif last.say.free:
        return []  # free for the driver: not the entrypoint's resources (the runtime_env, or the start itself)
    else:
        severity, what = STUCK, DRIVER_CANNOT_START()
    return [
        Chain(
            severity,
            Kind.ENTRYPOINT_RESOURCES,
            what,
            links,
            list(entrypoint_resources.next_steps),
            str(job.get("job_id") or "") or None,
            {"driver"},
        )
    ]


# Lines Ray writes into a driver's log (its own logging, raylet and state dumps), not the program's output.
RAY_LOG_LINE = re.compile(
    r"^\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING|DEBUG|ERROR)\s|\[state-dump\]|\[\d{4}-\d\d-\d\d |"
    r"Running entrypoint for job|\(raylet\)|\x1b\[)"
)


def last_output(lines: list[str]) -> str:
    """The last line the driver's program printed (what it said before it exited without a traceback)."""
    return next(
        (line.strip() for line in reversed(lines) if line.strip() and not RAY_LOG_LINE.match(line)), ""
    )


def _unexplained(chains: list[Chain]) -> bool:
    """No other rule explains the job: its status says what there is to say."""
    return not any(c.severity > WARNING for c in chains)


@rule(
    On.JOB, Kind.DRIVER_EXIT, order=900, severity=ROOT - 10, refs=(JOBS_DOC,), reads=("job", "driver_lines")
)
def driver_exit(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A FAILED job no other rule explains: its driver exited without a traceback, with its exit code and the
    last line its program printed."""
    job = g.ev.job or {}
    if job.get("status") != "FAILED" or not _unexplained(chains):
        return []
    lines = g.ev.driver_lines or []
    tail = " | ".join(
        one_line(line, LOG_QUOTE_LINE_CHARS) for line in lines[-DRIVER_QUOTE_LINES:] if line.strip()
    )
    exited = DRIVER_EXITED(
        "",
        tail or first_line(str(job.get("message") or "")),
        code=job.get("driver_exit_code"),
        error_type=job.get("error_type") or "FAILED",
        said=last_output(lines),
    )
    sid = job.get("submission_id") or job.get("job_id")
    return [
        Chain(ROOT - 10, Kind.DRIVER_EXIT, None, [exited], [f"tail_logs job={sid} lines=300"], job_id or None)
    ]


@rule(
    On.JOB,
    Kind.PENDING,
    order=901,
    severity=CONTEXT + 10,
    refs=(JOBS_DOC,),
    next_steps=("wait_for_job", "cluster_status"),
    reads=("job",),
)
def job_pending(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A PENDING job no other rule explains: its driver has not started yet."""
    job = g.ev.job or {}
    if job.get("status") != "PENDING" or not _unexplained(chains):
        return []
    pending = NOT_STARTED("", first_line(str(job.get("message") or "")))
    return [Chain(CONTEXT + 10, Kind.PENDING, None, [pending], list(job_pending.next_steps), job_id or None)]


@rule(On.JOB, Kind.STOPPED, order=902, severity=INFO, reads=("job",))
def job_stopped(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A job stopped on request (stop_job, `ray job stop`), not crashed, when no other rule explains more."""
    job = g.ev.job or {}
    if job.get("status") != "STOPPED" or not _unexplained(chains):
        return []
    stopped = STOPPED("", first_line(str(job.get("message") or "")))
    return [Chain(INFO, Kind.STOPPED, None, [stopped], job_id=job_id or None)]
