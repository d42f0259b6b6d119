"""Before and around the driver's own code: a runtime_env that could not be set up, an entrypoint that cannot be
scheduled or started, a driver that exited without a traceback, a job still PENDING."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.chains.holds import resource_wait
from ray_mcp.diagnosis.chains.links import CONTEXT, INFO, ROOT, STUCK, Chain, Link
from ray_mcp.diagnosis.graph import Graph, Row, amount, amounts, num, one_line
from ray_mcp.diagnosis.tracebacks import error_lines, first_line
from ray_mcp.limits import (
    CAUSE_CHARS,
    DRIVER_QUOTE_LINES,
    LAST_OUTPUT_CHARS,
    LOG_QUOTE_LINE_CHARS,
    RUNTIME_ENV_ERROR_LINES,
)
from ray_mcp.text import quoted

RUNTIME_ENV_DOC = "ray-docs://reference/11-runtime-environment"
JOBS_DOC = "ray-docs://reference/12-job-submission"

# The runtime_env fields that install or upload something (what a failed or slow setup was doing).
INSTALLING = ("pip", "uv", "conda", "container", "image_uri", "working_dir", "py_modules", "py_executable")


def runtime_env_fields(env: Row | None) -> str:
    """'pip ["torch==9.9"], working_dir "s3://…"': the fields of a runtime_env that decide what is installed or
    uploaded, with their values quoted."""
    env = env or {}
    return ", ".join(f"{k} {quoted(env[k], CAUSE_CHARS // 2)}" for k in INSTALLING if env.get(k))


def runtime_env_failure(g: Graph) -> list[Chain]:
    """The job's runtime_env could not be set up, so its driver never ran: the installer's error, and the field
    of the runtime_env that decided what it installed."""
    job = g.ev.job or {}
    message = str(job.get("message") or "")
    if job.get("error_type") != "RUNTIME_ENV_SETUP_FAILURE" and not re.search(
        r"(?i)runtime.env.*(fail|error)", message
    ):
        return []
    fields = runtime_env_fields(job.get("runtime_env"))
    text = f"the job's runtime_env failed to set up, so the driver never ran: {quoted(first_line(message))}"
    sid = job.get("submission_id") or job.get("job_id")
    return [
        Chain(
            ROOT + 5,
            "runtime_env",
            "",
            [Link("ended_by", text, " | ".join(error_lines(message, RUNTIME_ENV_ERROR_LINES)))],
            [
                "Fix the runtime_env and resubmit with submit_job (it checks the env first)",
                f"prompt runtime-env-failure(job={sid})",
            ],
            str(job.get("job_id") or "") or None,
            details=[f"[runtime_env] what it installs or uploads: {fields}"] if fields else [],
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


def entrypoint_chains(g: Graph) -> list[Chain]:
    """A PENDING job whose driver cannot be scheduled (its entrypoint_* resources fit no node, or are held), or
    whose entrypoint command could not start."""
    job = g.ev.job or {}
    status, error = job.get("status"), job.get("error_type")
    message = str(job.get("message") or "")
    job_id = str(job.get("job_id") or "") or None
    if error == "JOB_ENTRYPOINT_COMMAND_START_ERROR":
        return [
            Chain(
                ROOT,
                "entrypoint",
                "",
                [
                    Link(
                        "ended_by",
                        f"the entrypoint command could not start: {quoted(first_line(message))}",
                        " | ".join(error_lines(message)),
                    )
                ],
                ["Check the entrypoint command and that its files are in working_dir"],
                job_id,
            )
        ]
    unschedulable = error in ("JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE")
    if status != "PENDING" and not unschedulable:
        return []
    need = entrypoint_need(job, g.ev.supervisor)
    links = resource_wait(g, "the job's entrypoint", need) if need else []
    if not links:
        return []
    text = links[-1].text
    if "infeasible" in text:  # entrypoint_* resources no node has
        most = {k: max((t.get(k, 0.0) for t in g.node_totals().values()), default=0.0) for k in need}
        lacking = [
            f"{k}: {amount(k, v)} wanted, no node has more than {amount(k, most[k])}"
            for k, v in need.items()
            if most[k] < v
        ]
        links = [
            Link(
                "waits_on",
                f"the job's driver cannot be scheduled: entrypoint resources {{{amounts(need)}}} "
                f"fit on no node ({'; '.join(lacking)})",
                links[-1].quote,
            )
        ]
        severity, kind = ROOT + 3, "entrypoint_resources"
    elif "looks free" in text or "which fits" in text:
        return []  # free for the driver: not the entrypoint's resources (the runtime_env, or the start itself)
    else:
        severity, kind = STUCK, "entrypoint_resources"
    return [
        Chain(
            severity,
            kind,
            "" if severity > STUCK else "The driver cannot start",
            links,
            [
                "Lower entrypoint_num_cpus / entrypoint_num_gpus / entrypoint_resources, or add a node with them",
                "cluster_status shows what each node has",
            ],
            job_id,
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


def status_chain(g: Graph) -> Chain | None:
    """What the job's status itself says when no other rule explains it: a driver that exited without a
    traceback (its exit code and last output), a job that is still PENDING, one stopped on request."""
    job = g.ev.job or {}
    status = job.get("status")
    sid = job.get("submission_id") or job.get("job_id")
    job_id = str(job.get("job_id") or "") or None
    lines = g.ev.driver_lines or []
    message = first_line(str(job.get("message") or ""))
    if status == "FAILED":
        code = job.get("driver_exit_code")
        said = last_output(lines)
        text = (
            f"the driver exited{f' with exit code {code}' if code is not None else ''} without a Python traceback "
            f"({job.get('error_type') or 'FAILED'})"
            + (f"; its last output: {quoted(said, LAST_OUTPUT_CHARS)}" if said else "")
        )
        tail = " | ".join(
            one_line(line, LOG_QUOTE_LINE_CHARS) for line in lines[-DRIVER_QUOTE_LINES:] if line.strip()
        )
        return Chain(
            ROOT - 10,
            "driver_exit",
            "",
            [Link("ended_by", text, tail or message)],
            [f"tail_logs job={sid} lines=300"],
            job_id,
        )
    if status == "PENDING":
        return Chain(
            CONTEXT + 10,
            "pending",
            "",
            [Link("waits_on", "its driver has not started yet", message)],
            ["wait_for_job", "cluster_status"],
            job_id,
        )
    if status == "STOPPED":
        return Chain(
            INFO,
            "stopped",
            "",
            [Link("ended_by", "stopped with stop_job or `ray job stop`, not crashed", message)],
            job_id=job_id,
        )
    return None
