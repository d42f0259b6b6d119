"""Root-cause reasoning for diagnose_job and cluster_health: pure functions over what ray_api gathered.

Nothing here talks to Ray. ``ray_api`` collects the evidence (job details, the driver log's tail, dead actors,
failed tasks, pending placement groups, demands, Serve status); this module extracts the traceback, turns each
piece of evidence into a ``Finding`` with a severity, and ranks them into a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ray_mcp import models

# -- tracebacks ---------------------------------------------------------------------------------------------

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# "ValueError: bad lr", "ray.exceptions.ActorDiedError: ...", "foo.bar.BazError", "KeyboardInterrupt"
_EXCEPTION = re.compile(
    r"^(?:\([^)]*pid=\d+[^)]*\)\s*)?(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Died|Lost|Timeout|Cancelled|Warning)\w*)(?::\s*(?P<msg>.*))?$"
)
# A log record of Ray or the logging module starts with a timestamp: the traceback ended before it.
_LOG_RECORD = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
# Ray prefixes lines that remote workers print to the driver with "(ClassName pid=123, ip=...)".
_REMOTE_PREFIX = re.compile(r"^\((?P<who>[\w.<>-]+) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)")
_INTERNAL = re.compile(
    r"/site-packages/|/dist-packages/|/lib/python3[.\d]*/|<frozen |/ray/_private/|/ray/_raylet"
)
RAY_WRAPPERS = (
    "RayTaskError",
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "TaskCancelledError",
    "WorkerCrashedError",
    "RaySystemError",
    "GetTimeoutError",
)


@dataclass
class Frame:
    file: str
    line: int
    func: str

    @property
    def internal(self) -> bool:
        return bool(_INTERNAL.search(self.file))

    def short(self) -> str:
        name = self.file.rsplit("/", 1)[-1]
        return f"{name}:{self.line} in {self.func}"


@dataclass
class Traceback:
    """The last exception block of a log: its frames, the exceptions in it, and a bounded excerpt."""

    lines: list[str]
    frames: list[Frame]
    exceptions: list[tuple[str, str]]  # (type, message), outermost first
    remote: list[str] = field(default_factory=list)  # "(Class pid=…)" lines and RayTaskError(...) lines

    @property
    def innermost(self) -> tuple[str, str] | None:
        return self.exceptions[-1] if self.exceptions else None

    @property
    def outermost(self) -> tuple[str, str] | None:
        return self.exceptions[0] if self.exceptions else None

    @property
    def user_frame(self) -> Frame | None:
        """The deepest frame in the user's own code (not Ray's or the standard library's)."""
        for frame in reversed(self.frames):
            if not frame.internal:
                return frame
        return self.frames[-1] if self.frames else None

    def excerpt(self, max_lines: int = 24) -> list[str]:
        """The block without Ray's own frames and caret lines, cut in the middle if still too long."""
        lines = user_lines(self.lines)
        if len(lines) <= max_lines:
            return lines
        head = lines[:3]
        tail = lines[-(max_lines - 4) :]
        return [*head, f"  … {len(lines) - len(head) - len(tail)} lines of frames left out …", *tail]


def last_traceback(lines: Sequence[str]) -> Traceback | None:
    """Find the last exception in a log tail: the block from its last ``Traceback`` line to the exception."""
    starts = [i for i, line in enumerate(lines) if _TRACEBACK.search(line)]
    if not starts:
        return _bare_exception(lines)
    start = starts[-1]
    # Chained exceptions ("During handling ..." / "The above exception ...") belong to the same block.
    while start > 0:
        earlier = [i for i in starts if i < start]
        if not earlier:
            break
        gap = lines[earlier[-1] : start]
        if any(
            "During handling of the above exception" in g or "direct cause of the following" in g for g in gap
        ):
            start = earlier[-1]
        else:
            break
    block: list[str] = []
    for line in lines[start:]:
        if block and _LOG_RECORD.match(line):
            break
        block.append(line.rstrip("\n"))
    # Drop a trailing run of blank lines and Ray's shutdown chatter after the final exception line.
    last_exc = max(
        (i for i, line in enumerate(block) if _EXCEPTION.match(line.strip())), default=len(block) - 1
    )
    block = block[: last_exc + 1]
    frames = [
        Frame(m["file"], int(m["line"]), m["func"]) for line in block if (m := _FRAME.match(line)) is not None
    ]
    exceptions = []
    for line in block:
        m = _EXCEPTION.match(line.strip())
        if m and not line.startswith((" ", "\t")):
            exceptions.append((m["type"], (m["msg"] or "").strip()))
    remote = [line.strip() for line in lines if _REMOTE_PREFIX.match(line) or "RayTaskError(" in line][-6:]
    return Traceback(block, frames, exceptions, remote)


def _bare_exception(lines: Sequence[str]) -> Traceback | None:
    """No traceback printed: fall back to the last line that looks like an exception."""
    for line in reversed(lines):
        m = _EXCEPTION.match(line.strip())
        if m and m["msg"]:
            return Traceback([line.strip()], [], [(m["type"], m["msg"].strip())])
    return None


def short_type(exc_type: str) -> str:
    return exc_type.rsplit(".", 1)[-1]


def is_ray_wrapper(exc_type: str) -> bool:
    return short_type(exc_type).startswith(RAY_WRAPPERS) or short_type(exc_type) in RAY_WRAPPERS


# -- findings and the verdict -------------------------------------------------------------------------------

# Severities: higher is more likely the root cause (diagnose_job) or more urgent (cluster_health).
ROOT_CAUSE = 100
STUCK = 90
CONTRIBUTING = 60
SYMPTOM = 40
INFO = 10


def finding(
    severity: int,
    title: str,
    evidence: Iterable[str] = (),
    next_steps: Iterable[str] = (),
    refs: Iterable[str] = (),
    kind: str = "",
) -> models.Finding:
    return models.Finding(
        severity=severity,
        kind=kind,
        title=title,
        evidence=[e for e in evidence if e][:12],
        next_steps=list(next_steps)[:3],
        refs=list(refs)[:3],
    )


def rank(findings: Iterable[models.Finding]) -> list[models.Finding]:
    return sorted(findings, key=lambda f: -f.severity)


_WORKING_DIR = re.compile(
    r"/\S*?/runtime_resources/(?:working_dir_files|py_modules_files)/_ray_pkg_[0-9a-f]+/"
)
_SITE = re.compile(r"/\S*?/(site-packages|dist-packages)/")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def tidy(line: str) -> str:
    """A log line as an agent should read it: no colour codes, short paths."""
    line = _ANSI.sub("", line)
    line = _WORKING_DIR.sub("<working_dir>/", line)
    return _SITE.sub(r".../\1/", line)


def readable(lines: Iterable[str]) -> list[str]:
    """Tidy lines, without the ^^^ markers Python puts under a failing expression."""
    return [tidy(line) for line in lines if line.strip() and not _CARETS.match(line)]


def user_lines(lines: Iterable[str]) -> list[str]:
    """Traceback lines without Ray's and the standard library's frames (and their source lines)."""
    out: list[str] = []
    skip_source = False
    for line in readable(lines):
        frame = _FRAME.match(line)
        if frame:
            skip_source = bool(_INTERNAL.search(frame["file"]) or frame["file"].endswith(".pyx"))
            if not skip_source:
                out.append(line)
            continue
        if skip_source and line.startswith((" ", "\t")):
            continue
        skip_source = False
        out.append(line)
    return out


def clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split()) if "\n" not in text else text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_line(text: str | None, limit: int = 240) -> str:
    if not text:
        return ""
    for line in text.strip().splitlines():
        if line.strip():
            return clip(line.strip(), limit)
    return ""


def error_lines(text: str | None, limit: int = 6) -> list[str]:
    """The lines of a message that carry the error (pip's ERROR lines, an exception line), bounded."""
    if not text:
        return []
    picked = [
        line.strip()
        for line in text.splitlines()
        if re.search(r"(?i)\berror\b|exception|failed|not found|no such|cannot|could not", line)
    ]
    return [clip(line, 240) for line in picked[-limit:]] or [first_line(text)]


def render_findings(header: list[str], findings: Sequence[models.Finding], max_bytes: int) -> str:
    """Text for the agent: the verdict first, then each finding with its evidence, within a byte budget."""
    out = list(header)
    for i, f in enumerate(findings, 1):
        block = [f"{i}. {f.title}"]
        block += [f"   > {line}" for line in f.evidence]
        if f.next_steps:
            block.append("   Next: " + " | ".join(f.next_steps))
        if f.refs:
            block.append("   See: " + ", ".join(f.refs))
        candidate = "\n".join([*out, *block])
        if len(candidate.encode()) > max_bytes and i > 1:
            out.append(
                f"… {len(findings) - i + 1} lower-ranked finding(s) left out to stay under {max_bytes} bytes."
            )
            break
        out += block
    return "\n".join(out)


# -- diagnose_job -------------------------------------------------------------------------------------------

RUNTIME_ENV_DOC = "ray-docs://reference/11-runtime-environment"
JOBS_DOC = "ray-docs://reference/12-job-submission"
FT_DOC = "ray-docs://reference/14-fault-tolerance"
PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"
SERVE_DOC = "ray-docs://reference/06-ray-serve"
OBS_DOC = "ray-docs://reference/13-dashboard-observability"


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
        return f"{who} died {where}: {clip(error, 200)}".replace("  ", " ")
    return f"{who} died: {cause.reason}: {clip(cause.message or '', 200)}"


def _actor_evidence(actor: models.Actor, log_lines: list[str]) -> list[str]:
    cause = actor.death_cause
    lines = []
    if cause is not None and cause.exception:
        lines += user_lines(cause.exception.splitlines())[-8:]
    elif cause is not None and cause.message:
        lines.append(tidy(cause.message))
    shown = set(lines)
    lines += [f"[worker log] {line}" for line in user_lines(log_lines)[-6:] if line not in shown]
    return [clip(line, 240) for line in lines]


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


def diagnose_job(e: JobEvidence) -> list[models.Finding]:
    info = e.info
    job = info.submission_id or info.job_id or "?"
    findings: list[models.Finding] = []
    message = info.message or ""
    tb = last_traceback(e.driver_lines) if e.driver_lines else None
    driver_wrapped = bool(tb and tb.outermost and is_ray_wrapper(tb.outermost[0]))
    driver_mentions_actor = bool(
        tb
        and any(
            short_type(t).startswith(("ActorDied", "RayActorError", "ActorUnavailable"))
            for t, _ in tb.exceptions
        )
    )

    # The runtime env could not be set up: the driver never ran.
    if info.error_type == "RUNTIME_ENV_SETUP_FAILURE" or re.search(r"(?i)runtime.env.*(fail|error)", message):
        findings.append(
            finding(
                ROOT_CAUSE + 5,
                f"The job's runtime environment failed to set up, so the driver never ran: {first_line(message)}",
                error_lines(message, 8),
                ["Fix the runtime_env and resubmit with submit_job (it checks the env first)",
                 f"prompt runtime-env-failure(submission_id={job})"],
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

    # Dead actors of the job: the root cause when the driver died of their death.
    dead = sorted(e.dead_actors, key=lambda a: not crashed(a))
    for actor in dead[:4]:
        broke = crashed(actor)
        severity = ROOT_CAUSE + 2 if (driver_mentions_actor and broke) else CONTRIBUTING if broke else INFO
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
    if e.dead_actors_total > len(dead[:4]):
        findings.append(
            finding(INFO, f"{e.dead_actors_total - len(dead[:4])} more dead actors of this job",
                    next_steps=[f"list_actors job_id={info.job_id} state=DEAD"], kind="actor_died"),
        )  # fmt: skip

    # Failed tasks, grouped by error type.
    driver_mentions_task = bool(
        tb and any("RayTaskError" in t or "TaskError" in t for t, _ in tb.exceptions)
    ) or bool(tb and any("RayTaskError" in line for line in tb.lines))
    for group in e.failed_tasks[:3]:
        app_error = group.error_type == "APPLICATION_ERROR"
        severity = (
            ROOT_CAUSE + 1 if (driver_mentions_task and app_error) else CONTRIBUTING if app_error else SYMPTOM
        )
        sample = clip(group.sample_message or "", 600)
        sample_lines = [line for line in sample.splitlines() if line.strip()][-6:]
        findings.append(
            finding(
                severity,
                f"{group.count} task(s) failed with {group.error_type}"
                + (f", e.g. {group.sample_name}" if group.sample_name else ""),
                sample_lines,
                [f"list_tasks job_id={info.job_id} state=FAILED", "summarize_tasks for the whole picture"],
                [FT_DOC],
                kind="task_failed",
            )
        )

    # The driver's own traceback.
    if tb is not None and tb.exceptions and info.status in ("FAILED", "STOPPED", "RUNNING"):
        inner_type, inner_msg = tb.innermost or ("", "")
        where = tb.user_frame.short() if tb.user_frame else "unknown line"
        if driver_wrapped:
            title = (
                f"The driver failed with {short_type(tb.outermost[0]) if tb.outermost else 'an error'} "
                f"raised by remote work: {short_type(inner_type)}: {clip(inner_msg, 160)} ({where})"
            )
            severity = ROOT_CAUSE if not (driver_mentions_actor or driver_mentions_task) else SYMPTOM + 5
        else:
            title = f"The driver raised {short_type(inner_type)}: {clip(inner_msg, 200)} ({where})"
            severity = ROOT_CAUSE
        findings.append(
            finding(
                severity,
                title,
                [clip(line, 240) for line in tb.excerpt(20)] + [f"[remote] {r}" for r in tb.remote[-3:]],
                [f"tail_logs job={job} grep='Traceback|Error' context=20 for earlier errors"],
                [JOBS_DOC, "prompt:diagnose-failed-job"],
                kind="driver_exception",
            )
        )

    # Stuck: pending placement groups and actors of this job, infeasible demands.
    for pg in e.pending_pgs[:3]:
        infeasible = bool(pg.infeasible) or pg.scheduling_state == "INFEASIBLE"
        reason = pg.why_pending or "waits for resources"
        findings.append(
            finding(
                STUCK + 5 if infeasible else STUCK - 10,
                f"{'Stuck on an infeasible' if infeasible else 'Waiting on a pending'} placement group "
                f"{pg.placement_group_id}{' ' + repr(pg.name) if pg.name else ''} ({pg.strategy or '?'}): {clip(reason, 200)}",
                [f"bundle {b.index}: {b.resources}" for b in pg.bundles[:4]] + _capacity_lines(e.node_totals),
                [f"pg_status pg={pg.placement_group_id}", f"prompt debug-pending-placement-group(pg_id={pg.placement_group_id})"],
                [PG_DOC, "prompt:debug-pending-placement-group"],
                kind="pending_pg",
            )
        )  # fmt: skip
    for actor in e.pending_actors[:3]:
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
        shapes = [f"{d.kind} {d.bundles} x{d.count}" for d in e.infeasible_demands[:4]]
        findings.append(
            finding(CONTRIBUTING + 10, "The cluster has demands that fit on no node (they wait forever)",
                    [*shapes, *_capacity_lines(e.node_totals)], ["cluster_status"], [PG_DOC], kind="infeasible"),
        )  # fmt: skip

    # Nothing found: say what the status means.
    if not findings or all(f.severity < SYMPTOM for f in findings):
        findings.append(_status_finding(e, job))
    return rank(findings)


def _capacity_lines(node_totals: Sequence[dict[str, float]]) -> list[str]:
    if not node_totals:
        return []
    names = sorted({k for n in node_totals for k in n if k in ("CPU", "GPU") or not k.islower()})
    most = ", ".join(
        f"{k} {largest(node_totals, k):g}" for k in names if k not in ("memory", "object_store_memory")
    )
    return [f"cluster: {len(node_totals)} alive node(s); the largest has {most or 'no CPU/GPU'}"]


def _status_finding(e: JobEvidence, job: str) -> models.Finding:
    info = e.info
    last = next((line for line in reversed(e.driver_lines or []) if line.strip()), "")
    if info.status == "SUCCEEDED":
        return finding(
            INFO, "The job succeeded; nothing failed.", [f"last log line: {clip(last, 200)}"] if last else []
        )
    if info.status == "FAILED":
        code = f" with exit code {info.driver_exit_code}" if info.driver_exit_code is not None else ""
        evidence = [first_line(info.message), *[clip(line, 240) for line in (e.driver_lines or [])[-8:]]]
        return finding(ROOT_CAUSE - 10, f"The driver exited{code} without a Python traceback ({info.error_type or 'FAILED'})",
                       evidence, [f"tail_logs job={job} lines=300"], [JOBS_DOC], kind="driver_exit")  # fmt: skip
    if info.status == "STOPPED":
        return finding(
            INFO, "The job was stopped (stop_job or `ray job stop`), not crashed.", [first_line(info.message)]
        )
    if info.status == "PENDING":
        return finding(CONTRIBUTING, "The job is PENDING: its driver has not started yet.",
                       [first_line(info.message)], ["wait_for_job", "cluster_status"], [JOBS_DOC], kind="pending")  # fmt: skip
    return finding(INFO, "The job is RUNNING and shows no failure signal.",
                   [f"newest log line: {clip(last, 200)}"] if last else [],
                   [f"wait_for_job job={job}", f"tail_logs job={job}"], kind="running")  # fmt: skip


# -- cluster_health -----------------------------------------------------------------------------------------


def job_cause(info: models.JobInfo) -> str:
    """One line on why a job failed: its last exception, else the most telling line of its message."""
    lines = (info.message or "").splitlines()
    tb = last_traceback(lines)
    if tb is not None and tb.innermost:
        kind, msg = tb.innermost
        where = f" ({tb.user_frame.short()})" if tb.user_frame and not tb.user_frame.internal else ""
        return clip(f"{short_type(kind)}: {msg}{where}", 200)
    telling = [
        line
        for line in lines[1:]
        if line.strip() and not _LOG_RECORD.match(line) and not line.startswith("Running entrypoint")
    ]
    head = first_line(info.message, 120)
    code = (
        f"exit code {info.driver_exit_code}"
        if info.driver_exit_code is not None
        else (info.error_type or "FAILED")
    )
    return clip(f"{code}: {tidy(telling[-1])}" if telling else head, 200)


@dataclass
class HealthEvidence:
    status: models.ClusterStatus | None = None
    failed_jobs: list[models.JobInfo] = field(default_factory=list)
    dead_actors: list[models.Actor] = field(default_factory=list)
    dead_actors_total: int = 0
    restarting: list[models.Actor] = field(default_factory=list)
    task_errors: list[models.ErrorGroup] = field(default_factory=list)
    serve: models.ServeStatus | None = None
    pending_pgs: list[models.PlacementGroup] = field(default_factory=list)
    pending_pgs_total: int = 0


def cluster_health(e: HealthEvidence) -> list[models.Finding]:
    findings: list[models.Finding] = []
    s = e.status
    if s is not None:
        dead = [n for n in s.nodes if n.state == "DEAD"]
        if s.nodes_dead:
            findings.append(finding(STUCK, f"{s.nodes_dead} node(s) are DEAD",
                                    [f"{n.node_id} {n.ip}: {clip(n.death_reason or '', 200)}" for n in dead[:5]],
                                    ["list_nodes state=DEAD"], [FT_DOC], kind="dead_node"))  # fmt: skip
        infeasible = [d for d in s.pending_demands if d.infeasible]
        waiting = [d for d in s.pending_demands if not d.infeasible]
        if infeasible:
            findings.append(finding(STUCK - 5, f"{len(infeasible)} resource demand(s) fit on no node and wait forever",
                                    [f"{d.kind} {d.strategy or ''} {d.bundles} x{d.count}".replace("  ", " ") for d in infeasible[:5]],
                                    ["pg_status state=PENDING", "cluster_status"], [PG_DOC], kind="infeasible"))  # fmt: skip
        if waiting:
            findings.append(finding(SYMPTOM, f"{len(waiting)} resource demand(s) wait for resources in use",
                                    [f"{d.kind} {d.bundles} x{d.count}" for d in waiting[:4]], ["cluster_status"],
                                    kind="pending_demand"))  # fmt: skip
        for name in ("object_store_memory", "memory"):
            for node in s.nodes:
                use = node.resources.get(name)
                if node.state == "ALIVE" and use and use.total and use.used / use.total >= 0.8:
                    pct = 100 * use.used / use.total
                    findings.append(finding(CONTRIBUTING + 10 if pct >= 95 else SYMPTOM,
                                            f"{name} on node {node.node_id} is {pct:.0f}% used",
                                            [f"{use.used / 1024**3:.2f} of {use.total / 1024**3:.2f} GiB"],
                                            ["list_actors node_id=... to see who holds it"], [OBS_DOC], kind="memory"))  # fmt: skip
    if e.pending_pgs_total:
        findings.append(finding(CONTRIBUTING + 10 if any(p.infeasible for p in e.pending_pgs) else SYMPTOM,
                                f"{e.pending_pgs_total} placement group(s) are PENDING",
                                [f"{p.placement_group_id} {p.name or ''}: {clip(p.why_pending or '', 160)}" for p in e.pending_pgs[:4]],
                                ["pg_status state=PENDING"], [PG_DOC, "prompt:debug-pending-placement-group"],
                                kind="pending_pg"))  # fmt: skip
    if e.serve is not None:
        for app in e.serve.apps:
            if app.status in ("RUNNING", "NOT_STARTED"):
                continue
            bad = [d for d in app.deployments if d.status not in ("HEALTHY", "UPSCALING", "DOWNSCALING")]
            evidence = [first_line(app.message)] if app.message else []
            for d in bad[:3]:
                error = d.error or d.message or ""
                evidence.append(
                    f"deployment {d.name}: {d.status} ({d.status_trigger or '-'}) {first_line(error, 300)}"
                )
                exc = [line for line in (error or "").splitlines() if _EXCEPTION.match(line.strip())]
                evidence += [f"  {clip(line, 240)}" for line in exc[-2:]]
                evidence += [f"  [replica log] {clip(line, 200)}" for line in (d.log_tail or [])[-3:]]
            findings.append(finding(STUCK if app.status in ("DEPLOY_FAILED", "UNHEALTHY") else CONTRIBUTING,
                                    f"Serve application {app.name!r} is {app.status}"
                                    + (f": deployment {bad[0].name} is {bad[0].status}" if bad else ""),
                                    evidence, [f"serve_status app={app.name}", f"prompt serve-deployment-unhealthy(app={app.name})"],
                                    [SERVE_DOC, "prompt:serve-deployment-unhealthy"], kind="serve"))  # fmt: skip
    if e.failed_jobs:
        findings.append(finding(CONTRIBUTING, f"{len(e.failed_jobs)} job(s) failed recently",
                                [f"{j.submission_id or j.job_id}: {job_cause(j)}" for j in e.failed_jobs[:5]],
                                ["diagnose_job submission_id=<id> for the root cause"], [JOBS_DOC], kind="failed_jobs"))  # fmt: skip
    if e.restarting:
        findings.append(finding(CONTRIBUTING + 5, f"{len(e.restarting)} actor(s) restart in a loop or are RESTARTING",
                                [f"{a.class_name} ({a.actor_id}) {a.state}, restarts={a.restarts}" for a in e.restarting[:5]],
                                ["tail_logs actor_id=<id> to see why each restart dies"], [FT_DOC], kind="restarting"))  # fmt: skip
    crashes = [a for a in e.dead_actors if crashed(a)]
    if crashes:
        groups: dict[str, list[models.Actor]] = {}
        for a in crashes:
            cause = a.death_cause
            key = f"{a.class_name}: {cause.reason if cause else 'UNKNOWN'}" + (
                f" {cause.error_type}" if cause and cause.error_type else ""
            )
            groups.setdefault(key, []).append(a)
        findings.append(finding(CONTRIBUTING, f"{len(crashes)} actor(s) crashed (of {e.dead_actors_total} DEAD), by cause:",
                                [f"{len(v)}x {k}: {clip(tidy((v[0].death_cause.message if v[0].death_cause else '') or ''), 160)}"
                                 for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:6]],
                                ["list_actors state=DEAD class_name=<class>", "get_actor actor_id=<id> for one in full"],
                                [FT_DOC], kind="dead_actors"))  # fmt: skip
    if e.task_errors:
        total = sum(g.count for g in e.task_errors)
        app_errors = any(g.error_type == "APPLICATION_ERROR" for g in e.task_errors)
        findings.append(finding(CONTRIBUTING if app_errors else SYMPTOM, f"{total} task(s) failed, by error type:",
                                [f"{g.count}x {g.error_type}: {clip(first_line(g.sample_message), 160)}" for g in e.task_errors[:5]],
                                ["summarize_tasks", "list_tasks state=FAILED error_type=<type>"], [FT_DOC], kind="failed_tasks"))  # fmt: skip
    return rank(findings)
