"""Why one job failed or is stuck: pure reasoning over the evidence gather.py collected."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ray_mcp import models
from ray_mcp.diagnosis.findings import (
    CONTRIBUTING,
    FT_DOC,
    INFO,
    JOBS_DOC,
    PG_DOC,
    ROOT_CAUSE,
    RUNTIME_ENV_DOC,
    STUCK,
    SYMPTOM,
    finding,
    rank,
)
from ray_mcp.diagnosis.tracebacks import (
    Traceback,
    cut_text,
    error_lines,
    first_line,
    is_ray_wrapper,
    last_traceback,
    short_type,
    tidy,
    user_lines,
)
from ray_mcp.limits import (
    ACTOR_EXCEPTION_LINES,
    ACTOR_LOG_LINES_QUOTED,
    BUNDLES_QUOTED,
    CAUSE_CHARS,
    DEAD_ACTORS_SHOWN,
    DEMANDS_QUOTED,
    DRIVER_LINES_QUOTED,
    DRIVER_TRACEBACK_LINES,
    EVIDENCE_LINE_CHARS,
    LAST_OUTPUT_CHARS,
    PENDING_ACTORS_SHOWN,
    PENDING_GROUPS_SHOWN,
    REMOTE_LINES_QUOTED,
    RUNTIME_ENV_ERROR_LINES,
    SAMPLE_ERROR_CHARS,
    SAMPLE_ERROR_LINES,
    SHORT_CAUSE_CHARS,
    TASK_ERROR_GROUPS_SHOWN,
)


@dataclass
class JobEvidence:
    """Everything ray_api gathered about one job."""

    info: models.JobInfo
    entrypoint_resources: dict[str, float] = field(default_factory=dict)
    driver_lines: list[str] | None = None
    driver_log: str | None = None
    dead_actors: list[models.Actor] = field(default_factory=list)
    dead_actors_total: int = 0
    actor_log_lines: dict[str, list[str]] = field(default_factory=dict)
    pending_actors: list[models.Actor] = field(default_factory=list)
    supervisor: models.Actor | None = None
    failed_tasks: list[models.ErrorGroup] = field(default_factory=list)
    pending_pgs: list[models.PlacementGroup] = field(default_factory=list)
    node_totals: list[dict[str, float]] = field(default_factory=list)
    infeasible_demands: list[models.Demand] = field(default_factory=list)


def largest(node_totals: Sequence[dict[str, float]], resource: str) -> float:
    return max((n.get(resource, 0.0) for n in node_totals), default=0.0)


def unmet(resources: dict[str, float], node_totals: Sequence[dict[str, float]]) -> list[str]:
    """Which resources of one request no single node has enough of, named with what the largest node has."""
    out = []
    for name, amount in resources.items():
        if amount and amount > largest(node_totals, name) + 1e-9:
            most = largest(node_totals, name)
            out.append(f"{name}: {amount:g} wanted, no node has more than {most:g}")
    return out


def _actor_title(actor: models.Actor) -> str:
    cause = actor.death_cause
    who = f"Actor {actor.class_name}" + (f" '{actor.name}'" if actor.name else "") + f" ({actor.actor_id})"
    if cause is None:
        return f"{who} is DEAD (no death cause recorded)"
    if cause.reason == "CREATION_TASK_ERROR" or (cause.error_type and cause.reason != "WORKER_DIED"):
        where = "in its constructor (__init__)" if cause.reason == "CREATION_TASK_ERROR" else ""
        error = (
            f"{cause.error_type}: {cause.message}" if cause.error_type else (cause.message or cause.reason)
        )
        return f"{who} died {where}: {cut_text(error, CAUSE_CHARS)}".replace("  ", " ")
    return f"{who} died: {cause.reason}: {cut_text(cause.message or '', CAUSE_CHARS)}"


def _actor_evidence(actor: models.Actor, log_lines: list[str]) -> list[str]:
    cause = actor.death_cause
    lines = []
    if cause is not None and cause.exception:
        lines += user_lines(cause.exception.splitlines())[-ACTOR_EXCEPTION_LINES:]
    elif cause is not None and cause.message:
        lines.append(tidy(cause.message))
    shown = set(lines)
    lines += [
        f"[worker log] {line}"
        for line in user_lines(log_lines)[-ACTOR_LOG_LINES_QUOTED:]
        if line not in shown
    ]
    return [cut_text(line, EVIDENCE_LINE_CHARS) for line in lines]


NORMAL_EXIT = re.compile(
    r"INTENDED_USER_EXIT|User requested to exit|ray\.kill|killed by|owner .* (exited|died)|job .* (finished|exited)",
    re.I,
)


def crashed(actor: models.Actor) -> bool:
    """A death worth reporting: an exception, OOM, a node or worker crash; not an actor that exited on purpose."""
    cause = actor.death_cause
    if cause is None:
        return False
    if cause.error_type or cause.reason in ("CREATION_TASK_ERROR", "OOM", "NODE_DIED", "RUNTIME_ENV_FAILED"):
        return True
    return cause.reason == "WORKER_DIED" and not NORMAL_EXIT.search(cause.message or "")


@dataclass(frozen=True)
class _Reading:
    """What the driver log says, read once for every kind of finding."""

    job: str
    tb: Traceback | None
    driver_wrapped: bool  # the driver died of an error raised by remote work
    driver_mentions_actor: bool
    driver_mentions_task: bool


def _read(e: JobEvidence) -> _Reading:
    info = e.info
    tb = last_traceback(e.driver_lines) if e.driver_lines else None
    types = [short_type(t) for t, _ in tb.exceptions] if tb else []
    return _Reading(
        job=info.submission_id or info.job_id or "?",
        tb=tb,
        driver_wrapped=bool(tb and tb.outermost and is_ray_wrapper(tb.outermost[0])),
        driver_mentions_actor=any(
            t.startswith(("ActorDied", "RayActorError", "ActorUnavailable")) for t in types
        ),
        driver_mentions_task=tb is not None
        and (any("TaskError" in t for t in types) or any("RayTaskError" in line for line in tb.lines)),
    )


def diagnose_job(e: JobEvidence) -> list[models.Finding]:
    """Every finding about one job, ranked: the most likely root cause first."""
    r = _read(e)
    findings = [
        *_setup_findings(e, r),
        *_actor_findings(e, r),
        *_task_findings(e, r),
        *_driver_findings(e, r),
        *_stuck_findings(e),
    ]
    # Nothing found: say what the status means.
    if not findings or all(f.severity < SYMPTOM for f in findings):
        findings.append(_status_finding(e, r.job))
    return rank(findings)


def _setup_findings(e: JobEvidence, r: _Reading) -> list[models.Finding]:
    """The driver never ran: the runtime env, the entrypoint's resources, or its command."""
    info = e.info
    job = r.job
    message = e.info.message or ""
    findings: list[models.Finding] = []
    # The runtime env could not be set up: the driver never ran.
    if info.error_type == "RUNTIME_ENV_SETUP_FAILURE" or re.search(r"(?i)runtime.env.*(fail|error)", message):
        findings.append(
            finding(
                ROOT_CAUSE + 5,
                f"The job's runtime environment failed to set up, so the driver never ran: {first_line(message)}",
                error_lines(message, RUNTIME_ENV_ERROR_LINES),
                ["Fix the runtime_env and resubmit with submit_job (it checks the env first)",
                 f"prompt runtime-env-failure(job={job})"],
                [RUNTIME_ENV_DOC, "prompt:runtime-env-failure"],
                kind="runtime_env",
            )
        )  # fmt: skip

    # The driver could not start: the entrypoint's resources, or the supervisor.
    # Ray's job details do not carry entrypoint_num_cpus/gpus/resources; the driver's supervisor actor asks for them.
    asked = e.entrypoint_resources or (e.supervisor.required_resources if e.supervisor else None) or {}
    requested = {str(k): float(v) for k, v in asked.items() if v}
    missing = unmet(requested, e.node_totals) if e.node_totals else []
    if info.error_type in ("JOB_SUPERVISOR_ACTOR_START_TIMEOUT", "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE") or (
        info.status == "PENDING" and (missing or (e.supervisor and e.supervisor.state == "PENDING_CREATION"))
    ):
        why = missing or (
            [f"the driver waits for {requested} that other work holds"]
            if requested
            else ["no node could start it"]
        )
        findings.append(
            finding(
                ROOT_CAUSE + 3 if missing else STUCK,
                f"The job's driver cannot be scheduled: entrypoint resources {requested or '{}'} "
                + ("fit on no node" if missing else "are not free"),
                [*why, first_line(message)],
                ["Lower entrypoint_num_cpus / entrypoint_num_gpus / entrypoint_resources, or add a node with them",
                 "cluster_status shows what each node has"],
                [JOBS_DOC],
                kind="entrypoint_resources",
            )
        )  # fmt: skip
    if info.error_type == "JOB_ENTRYPOINT_COMMAND_START_ERROR":
        findings.append(
            finding(ROOT_CAUSE, f"The entrypoint command could not start: {first_line(message)}",
                    error_lines(message), ["Check the entrypoint command and that its files are in working_dir"],
                    [JOBS_DOC], kind="entrypoint"),
        )  # fmt: skip
    return findings


def _actor_findings(e: JobEvidence, r: _Reading) -> list[models.Finding]:
    """The job's dead actors: the root cause when the driver died of their death."""
    info = e.info
    findings: list[models.Finding] = []
    # Dead actors of the job: the root cause when the driver died of their death.
    dead = sorted(e.dead_actors, key=lambda a: not crashed(a))
    for actor in dead[:DEAD_ACTORS_SHOWN]:
        broke = crashed(actor)
        severity = ROOT_CAUSE + 2 if (r.driver_mentions_actor and broke) else CONTRIBUTING if broke else INFO
        findings.append(
            finding(
                severity,
                _actor_title(actor),
                _actor_evidence(actor, e.actor_log_lines.get(actor.actor_id, [])),
                [f"tail_logs actor_id={actor.actor_id} for its whole log", "get_actor for every field"],
                [FT_DOC],
                kind="actor_died",
            )
        )
    if e.dead_actors_total > len(dead[:DEAD_ACTORS_SHOWN]):
        findings.append(
            finding(INFO, f"{e.dead_actors_total - len(dead[:DEAD_ACTORS_SHOWN])} more dead actors of this job",
                    next_steps=[f"list_actors job={info.job_id} state=DEAD"], kind="actor_died"),
        )  # fmt: skip
    return findings


def _task_findings(e: JobEvidence, r: _Reading) -> list[models.Finding]:
    """The job's failed tasks, grouped by error type."""
    info = e.info
    findings: list[models.Finding] = []
    # Failed tasks, grouped by error type.
    for group in e.failed_tasks[:TASK_ERROR_GROUPS_SHOWN]:
        app_error = group.error_type == "APPLICATION_ERROR"
        severity = (
            ROOT_CAUSE + 1
            if (r.driver_mentions_task and app_error)
            else CONTRIBUTING
            if app_error
            else SYMPTOM
        )
        sample = cut_text(group.sample_message or "", SAMPLE_ERROR_CHARS)
        sample_lines = [line for line in sample.splitlines() if line.strip()][-SAMPLE_ERROR_LINES:]
        findings.append(
            finding(
                severity,
                f"{group.count} task(s) failed with {group.error_type}"
                + (f", e.g. {group.sample_name}" if group.sample_name else ""),
                sample_lines,
                [f"list_tasks job={info.job_id} state=FAILED", "summarize_tasks for the whole picture"],
                [FT_DOC],
                kind="task_failed",
            )
        )
    return findings


def _driver_findings(e: JobEvidence, r: _Reading) -> list[models.Finding]:
    """The driver's own traceback."""
    info = e.info
    job = r.job
    tb = r.tb
    findings: list[models.Finding] = []
    # The driver's own traceback.
    if tb is not None and tb.exceptions and info.status in ("FAILED", "STOPPED", "RUNNING"):
        inner_type, inner_msg = tb.innermost or ("", "")
        where = tb.user_frame.short() if tb.user_frame else "unknown line"
        if r.driver_wrapped:
            title = (
                f"The driver failed with {short_type(tb.outermost[0]) if tb.outermost else 'an error'} "
                f"raised by remote work: {short_type(inner_type)}: {cut_text(inner_msg, SHORT_CAUSE_CHARS)} ({where})"
            )
            severity = ROOT_CAUSE if not (r.driver_mentions_actor or r.driver_mentions_task) else SYMPTOM + 5
        else:
            title = (
                f"The driver raised {short_type(inner_type)}: {cut_text(inner_msg, CAUSE_CHARS)} ({where})"
            )
            severity = ROOT_CAUSE
        findings.append(
            finding(
                severity,
                title,
                [cut_text(line, EVIDENCE_LINE_CHARS) for line in tb.excerpt(DRIVER_TRACEBACK_LINES)]
                + [f"[remote] {r}" for r in tb.remote[-REMOTE_LINES_QUOTED:]],
                [f"tail_logs job={job} grep='Traceback|Error' context=20 for earlier errors"],
                [JOBS_DOC, "prompt:diagnose-failed-job"],
                kind="driver_exception",
            )
        )
    return findings


def _stuck_findings(e: JobEvidence) -> list[models.Finding]:
    """What the job waits for: pending placement groups and actors, infeasible demands."""
    info = e.info
    findings: list[models.Finding] = []
    # Stuck: pending placement groups and actors of this job, infeasible demands.
    for pg in e.pending_pgs[:PENDING_GROUPS_SHOWN]:
        infeasible = bool(pg.infeasible) or pg.scheduling_state == "INFEASIBLE"
        reason = pg.why_pending or "waits for resources"
        findings.append(
            finding(
                STUCK + 5 if infeasible else STUCK - 10,
                f"{'Stuck on an infeasible' if infeasible else 'Waiting on a pending'} placement group "
                f"{pg.placement_group_id}{' ' + repr(pg.name) if pg.name else ''} ({pg.strategy or '?'}): {cut_text(reason, CAUSE_CHARS)}",
                [f"bundle {b.index}: {b.resources}" for b in pg.bundles[:BUNDLES_QUOTED]] + _capacity_lines(e.node_totals),
                [f"pg_status placement_group={pg.placement_group_id}", f"prompt debug-pending-placement-group(placement_group={pg.placement_group_id})"],
                [PG_DOC, "prompt:debug-pending-placement-group"],
                kind="pending_pg",
            )
        )  # fmt: skip
    for actor in e.pending_actors[:PENDING_ACTORS_SHOWN]:
        need = {k: float(v) for k, v in (actor.required_resources or {}).items()}
        lacking = unmet(need, e.node_totals) if e.node_totals else []
        findings.append(
            finding(
                STUCK if lacking else CONTRIBUTING,
                f"Actor {actor.class_name} ({actor.actor_id}) is stuck in {actor.state}"
                + (f": {'; '.join(lacking)}" if lacking else f", waiting for {need or 'its dependencies'}"),
                _capacity_lines(e.node_totals),
                ["cluster_status for pending demands", f"get_actor actor_id={actor.actor_id}"],
                [PG_DOC],
                kind="pending_actor",
            )
        )
    if info.status in ("PENDING", "RUNNING") and e.infeasible_demands and not e.pending_pgs:
        shapes = [f"{d.kind} {d.bundles} x{d.count}" for d in e.infeasible_demands[:DEMANDS_QUOTED]]
        findings.append(
            finding(CONTRIBUTING + 10, "The cluster has demands that fit on no node (they wait forever)",
                    [*shapes, *_capacity_lines(e.node_totals)], ["cluster_status"], [PG_DOC], kind="infeasible"),
        )  # fmt: skip
    return findings


def _capacity_lines(node_totals: Sequence[dict[str, float]]) -> list[str]:
    if not node_totals:
        return []
    names = sorted({k for n in node_totals for k in n if k in ("CPU", "GPU") or not k.islower()})
    most = ", ".join(
        f"{k} {largest(node_totals, k):g}" for k in names if k not in ("memory", "object_store_memory")
    )
    return [f"cluster: {len(node_totals)} alive node(s); the largest has {most or 'no CPU/GPU'}"]


# Lines Ray writes into a driver's log (its own logging, raylet and state dumps), not the program's output.
RAY_LOG_LINE = re.compile(
    r"^\s*(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING|DEBUG|ERROR)\s|\[state-dump\]|\[\d{4}-\d\d-\d\d |"
    r"Running entrypoint for job|\(raylet\)|\x1b\[)"
)


def last_output(lines: Sequence[str]) -> str:
    """The last line the driver's program printed (what it said before it exited without a traceback)."""
    return next(
        (line.strip() for line in reversed(lines) if line.strip() and not RAY_LOG_LINE.match(line)), ""
    )


def _status_finding(e: JobEvidence, job: str) -> models.Finding:
    info = e.info
    last = next((line for line in reversed(e.driver_lines or []) if line.strip()), "")
    if info.status == "SUCCEEDED":
        return finding(
            INFO,
            "The job succeeded; nothing failed.",
            [f"last log line: {cut_text(last, CAUSE_CHARS)}"] if last else [],
        )
    if info.status == "FAILED":
        code = f" with exit code {info.driver_exit_code}" if info.driver_exit_code is not None else ""
        evidence = [
            first_line(info.message),
            *[cut_text(line, EVIDENCE_LINE_CHARS) for line in (e.driver_lines or [])[-DRIVER_LINES_QUOTED:]],
        ]
        said = last_output(e.driver_lines or [])
        said = f"; its last output: {cut_text(said, LAST_OUTPUT_CHARS)!r}" if said else ""
        return finding(ROOT_CAUSE - 10, f"The driver exited{code} without a Python traceback ({info.error_type or 'FAILED'}){said}",
                       evidence, [f"tail_logs job={job} lines=300"], [JOBS_DOC], kind="driver_exit")  # fmt: skip
    if info.status == "STOPPED":
        return finding(
            INFO, "The job was stopped (stop_job or `ray job stop`), not crashed.", [first_line(info.message)]
        )
    if info.status == "PENDING":
        return finding(CONTRIBUTING, "The job is PENDING: its driver has not started yet.",
                       [first_line(info.message)], ["wait_for_job", "cluster_status"], [JOBS_DOC], kind="pending")  # fmt: skip
    return finding(INFO, "The job is RUNNING and shows no failure signal.",
                   [f"newest log line: {cut_text(last, CAUSE_CHARS)}"] if last else [],
                   [f"wait_for_job job={job}", f"tail_logs job={job}"], kind="running")  # fmt: skip
