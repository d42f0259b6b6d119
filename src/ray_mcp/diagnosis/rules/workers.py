"""Workers: a worker process that died under a task or an actor (its stderr: a Python exception, a fatal error,
a signal; else Ray's exit record), and an actor whose worker dies again and again (a restart loop)."""

from __future__ import annotations

from dataclasses import dataclass

from ray_mcp.amounts import duration
from ray_mcp.diagnosis.facts import LOOP, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, failure_restarts, num
from ray_mcp.diagnosis.recognise import Crash, Exit, crash, worker_exit
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import LOG_QUOTE_LINE_CHARS, MESSAGE_HEAD_CHARS, QUOTE_CHARS, QUOTE_LINES
from ray_mcp.text import one_line

FT_DOC = "ray-docs://reference/14-fault-tolerance"


@dataclass(frozen=True)
class WorkerEnd:
    """How a worker ended: what its stderr says (``crash``), else Ray's exit record (``exit``: its type, detail
    and whether its stderr was read, None when that was not asked)."""

    crash: Crash | None = None
    exit: Exit | None = None
    exit_type: str = ""
    detail: str = ""
    stderr_read: bool | None = None
    attempts: int = 0  # the attempts of a task that died so, when more than one

    @property
    def memory_kill(self) -> bool:
        """Its own words (stderr, or Ray's exit detail) say the memory was why it was killed."""
        if self.crash is not None:
            return self.crash.memory_kill
        low = one_line(self.detail, MESSAGE_HEAD_CHARS).lower() if self.exit is Exit.RECORDED else ""
        return "memory" in low and "kill" in low

    @property
    def system(self) -> bool:
        """Only Ray's generic exit record (SYSTEM_ERROR, or none): a retry's row may hold a better one."""
        return self.crash is None and (not self.exit_type or self.exit_type == "SYSTEM_ERROR")

    def __bool__(self) -> bool:
        return self.crash is not None or self.exit is not None

    def words(self) -> str:
        if self.crash is not None:
            text = self.crash.line + (f" at {self.crash.frame}" if self.crash.frame else "")
        else:
            text = exit_words(self)
        return text + (f" (each of its {self.attempts} attempts)" if self.attempts > 1 and text else "")


def exit_words(end: WorkerEnd) -> str:
    """Ray's exit record of a worker, in words; its generic "connection error" text says only how it ended."""
    head = end.exit_type or "exit"
    if end.exit is Exit.WITH_JOB:
        return f"{head}: ended with its job (the driver exited while it still ran)"
    if end.exit is Exit.ABRUPT:
        stderr = (
            ""
            if end.stderr_read is None
            else "; nothing in its stderr"
            if end.stderr_read
            else "; its stderr was not read"
        )
        return (
            f"{head}: killed by a signal (SIGKILL: kill -9 or the kernel's OOM killer) or ended "
            f"abruptly (os._exit, a native crash){stderr}; Ray records no exit code or signal"
        )
    if end.exit is Exit.RECORDED:
        return f"{head}: {one_line(end.detail, MESSAGE_HEAD_CHARS)}"
    return ""


def exit_record(exit_type: object, detail: object, stderr_read: bool | None = None) -> WorkerEnd:
    text = str(detail or "")
    return WorkerEnd(None, worker_exit(text), str(exit_type or ""), text, stderr_read)


def worker_end(g: Graph, node_id: str | None, pid: object, worker_id: str | None = None) -> WorkerEnd:
    """The end of a dead worker: its stderr (a Python exception, a fatal error, a signal), else Ray's exit
    record."""
    if not num(pid) and worker_id in g.workers:  # a task row may lack the pid its worker's record has
        pid = g.workers[str(worker_id)].get("pid")
    found = crash(g.worker_log(node_id, pid))
    if found is not None:
        return WorkerEnd(found)
    worker = g.workers.get(worker_id or "") or g.worker_by_pid.get(int(num(pid))) or {}
    read = f"{node_id}:{int(num(pid))}" in g.ev.worker_logs if pid else False
    return exit_record(worker.get("exit_type"), worker.get("exit_detail"), read)


def attempts_end(g: Graph, t: Row) -> WorkerEnd:
    """Why a task's worker died: the newest attempt whose worker left a crash reason (a retry's row may lack its
    worker's pid), with how many attempts died so."""
    from dataclasses import replace

    rows = g.attempts.get(str(t.get("task_id"))) or [t]
    died = [r for r in rows if r.get("error_type") == "WORKER_DIED"]
    end = WorkerEnd()
    for r in reversed(rows):
        end = worker_end(g, r.get("node_id"), r.get("worker_pid"), r.get("worker_id"))
        if end and not end.system:
            break
    if not end:
        end = worker_end(g, t.get("node_id"), t.get("worker_pid"), t.get("worker_id"))
    return replace(end, attempts=len(died))


def task_worker_died(t: Row) -> bool:
    return (
        str(t.get("error_type") or "") == "WORKER_DIED"
        or "worker died" in str(t.get("error_message") or "").lower()
    )


def worker_memory_kill(g: Graph, t: Row) -> bool:
    return attempts_end(g, t).memory_kill


MONITOR_KILLED_WORKER = Say(
    "monitor_killed_worker", Edge.ENDED_BY, said("{subject} was killed by the memory monitor on {node}")
)
WORKER_DIED = Say(
    "worker_died",
    Edge.ENDED_BY,
    lambda f: (
        f"{f.possessive} worker process died"
        + (f" while running {f['during']}" if f.get("during") else "")
        + (f": {f['why'].words()}" if f["why"] else "")
    ),
)
RESTART_LOOP = Say(
    "restart_loop",
    Edge.ENDED_BY,
    lambda f: (
        f"{f.subject} restarted {f['restarts']} time(s){_every(f['times'])}"
        + (f" (and {f['preempted']} more after node preemption)" if f.get("preempted") else "")
        + "; "
        + (
            "the memory monitor killed its worker each time"
            if f["why"].memory_kill
            else "each time its worker died"
            + (f": {f['why'].words()}" if f["why"] else " (no crash reason in its worker log)")
        )
    ),
)


def _every(times: list[float]) -> str:
    """ ", about every 12s": how often the worker died, from its dead workers' end times."""
    return (
        f", about every {duration((times[-1] - times[0]) / 1000 / (len(times) - 1))}"
        if len(times) >= 2
        else ""
    )


IN_RESTART_LOOP = Say("in_restart_loop", Edge.ENDED_BY, said("{subject} is in a restart loop ({state})"))


@rule(On.TASK_END, Kind.OOM, order=70, reads=("tasks", "workers", "worker_logs"))
def task_worker_killed_for_memory(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose worker's own stderr says it was killed for memory."""
    if not task_worker_died(t):
        return []
    why = attempts_end(g, t)
    if not why.memory_kill:
        return []
    return [MONITOR_KILLED_WORKER(g.task_label(t), why.words(), node=g.node_label(t.get("node_id")))]


@rule(On.TASK_END, Kind.WORKER_CRASH, order=78, refs=(FT_DOC,), reads=("tasks", "workers", "worker_logs"))
def task_worker_crash(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose worker process died: the crash in its stderr (a Python exception, a fatal error with the
    user's frame, a signal), else Ray's exit record (a worker gone without a word is killed by a signal or ended
    abruptly)."""
    if not task_worker_died(t):
        return []
    msg = str(t.get("error_message") or "")
    return [WORKER_DIED(g.task_label(t), one_line(msg, QUOTE_CHARS), why=attempts_end(g, t))]


def running_call(g: Graph, row: Row) -> str:
    """The call an actor's worker was running when it died: the first failed call that reached the worker."""
    from ray_mcp.diagnosis.rules.nodes import actor_calls

    sent = []
    for t in actor_calls(g, row):
        if t.get("state") != "FAILED" or t.get("error_type") not in ("ACTOR_DIED", "WORKER_DIED"):
            continue
        at = [
            num(e.get("created_ms"))
            for e in t.get("events") or []
            if e.get("state") in ("SUBMITTED_TO_WORKER", "RUNNING")
        ]
        if at:
            sent.append((min(at), str(t.get("name") or "")))
    return min(sent)[1] if sent else ""


@rule(On.ACTOR_END, Kind.WORKER_CRASH, order=80, reads=("actors", "workers", "worker_logs", "tasks"))
def actor_worker_died(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose worker process died: the call it was running, and the crash in its stderr or Ray's exit
    record."""
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    why = worker_end(g, row.get("node_id"), ctx.get("pid") or row.get("pid"))
    if ctx.get("reason") != "WORKER_DIED" and not why:
        return []
    msg = str(ctx.get("error_message") or "")
    return [WORKER_DIED(g.actor_label(row), msg, why=why, during=running_call(g, row))]


@rule(
    On.HELPER,
    Kind.RESTART_LOOP,
    severity=LOOP,
    refs=(FT_DOC,),
    next_steps=("tail_logs actor_id={actor_id} stream=err", "get_actor actor_id={actor_id}"),
    reads=("actors", "workers", "worker_logs"),
)
def restart_loop(g: Graph, row: Row) -> Chain:
    """An actor restarted again and again: how often, and why its worker died each time (its stderr, else Ray's
    exit record)."""
    label = g.actor_label(row)
    dead = sorted(row.get("_dead_workers") or [], key=lambda w: num(w.get("end_time_ms")))
    times = [num(w.get("end_time_ms")) for w in dead if num(w.get("end_time_ms"))]
    lines = g.ev.worker_logs.get(f"actor:{row.get('actor_id')}", [])
    found = crash(lines)
    why = WorkerEnd(found) if found is not None else WorkerEnd()
    if found is None and dead:
        why = exit_record(dead[-1].get("exit_type"), dead[-1].get("exit_detail"))
    telling = [
        line
        for line in lines
        if line.strip() and not line.startswith((":job_id:", ":actor_name:", ":task_name:"))
    ]
    quote = " | ".join(one_line(line, LOG_QUOTE_LINE_CHARS) for line in telling[-QUOTE_LINES:]) or (
        one_line(str(dead[-1].get("exit_detail")), QUOTE_CHARS) if dead else ""
    )
    aid = row.get("actor_id")
    return Chain(
        LOOP,
        Kind.RESTART_LOOP,
        IN_RESTART_LOOP(label, state=row.get("state")),
        [
            RESTART_LOOP(
                label,
                quote,
                restarts=failure_restarts(row),
                preempted=int(num(row.get("num_restarts_due_to_node_preemption"))),
                times=times,
                why=why,
            )
        ],
        [step.format(actor_id=aid) for step in restart_loop.next_steps],
        row.get("job_id"),
        {f"actor:{aid}"},
    )
