"""Why something ended: a dead node, a crashed worker, an actor's death cause, a failed task attempt, and the
owner whose death took an object or actor with it (ended_by, owns and raised_in links; mutually recursive)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp.diagnosis.chains.holds import resource_wait
from ray_mcp.diagnosis.chains.links import Link
from ray_mcp.diagnosis.graph import (
    DRIVER_WORKER,
    Graph,
    Row,
    exception_line,
    first_raise,
    memory_summary,
    ms_clock,
    num,
    one_line,
    parse_owner,
)
from ray_mcp.limits import (
    EVENT_CHARS,
    FATAL_LINE_CHARS,
    MESSAGE_HEAD_CHARS,
    NODE_DEATH_CHARS,
    QUOTE_CHARS,
    QUOTE_LINE_CHARS,
    QUOTE_LINES,
    SHORT_CAUSE_CHARS,
)
from ray_mcp.text import quoted


def node_death(g: Graph, node_id: str | None) -> list[Link]:
    if not node_id:
        return []  # never placed (or not recorded): no node to blame
    row = g.nodes.get(node_id)
    if row is None:
        return [Link("ended_by", f"{g.node_label(node_id)} is gone (not in the node list)")]
    if row.get("state") != "DEAD":
        return []
    message = str(row.get("state_message") or "no death reason recorded")
    when = ms_clock(row.get("end_time_ms"))
    events = [e for e in g.ev.events or [] if node_id and node_id in str(e.get("message") or "")]
    quote = message + (f" | event: {one_line(events[-1].get('message'), EVENT_CHARS)}" if events else "")
    drained = (
        " after it was drained (scaled down or preempted while work still ran on it)"
        if DRAINED.search(message)
        else ""
    )
    return [
        Link(
            "ended_by",
            f"{g.node_label(node_id)} died at {when}{drained} ({quoted(message, NODE_DEATH_CHARS)})",
            quote,
        )
    ]


NODE_ID = re.compile(r"\b[0-9a-f]{56}\b")
# How Ray records a node that was drained: the autoscaler's idle termination, a preemption, `ray drain-node`.
DRAINED = re.compile(r"drain|preempt|idle.?terminat|DRAIN_NODE_REASON", re.I)


def worker_crash(g: Graph, node_id: str | None, pid: object, worker_id: str | None = None) -> str:
    """The crash reason of a dead worker: its stderr (a Python exception, a fatal error, a signal), else Ray's
    exit detail."""
    if not num(pid) and worker_id in g.workers:  # a task row may lack the pid its worker's record has
        pid = g.workers[str(worker_id)].get("pid")
    lines = g.worker_log(node_id, pid)
    reason = crash_reason(lines)
    if reason:
        return reason
    worker = g.workers.get(worker_id or "") or g.worker_by_pid.get(int(num(pid))) or {}
    read = f"{node_id}:{int(num(pid))}" in g.ev.worker_logs if pid else False
    return exit_words(worker.get("exit_type"), worker.get("exit_detail"), read)


def exit_words(exit_type: object, detail: object, stderr_read: bool | None = None) -> str:
    """Ray's exit record of a worker, in words; its generic "connection error" text says only how it ended."""
    text = str(detail or "")
    if not text:
        return ""
    if "job has finished" in text or "as driver exits" in text:
        return f"{exit_type or 'exit'}: ended with its job (the driver exited while it still ran)"
    if ABRUPT.search(text):
        stderr = (
            ""
            if stderr_read is None
            else "; nothing in its stderr"
            if stderr_read
            else "; its stderr was not read"
        )
        return (
            f"{exit_type or 'exit'}: killed by a signal (SIGKILL: kill -9 or the kernel's OOM killer) or ended "
            f"abruptly (os._exit, a native crash){stderr}; Ray records no exit code or signal"
        )
    return f"{exit_type or 'exit'}: {one_line(text, MESSAGE_HEAD_CHARS)}"


# Ray's exit record of a worker that vanished without saying why: the raylet saw its socket close (an actor's
# worker: "connection error code 2. End of file"), or its owner's RPC to it failed (a task's leased worker:
# "unrecoverable failure ... RPC error: Socket closed").
ABRUPT = re.compile(r"connection error code 2|End of file|Socket closed|unrecoverable failure")


FATAL = re.compile(
    r"Fatal Python error: .*|Segmentation fault|SIG[A-Z]+|signal \d+|[Ee]xit(?:ed)? (?:with )?code:? -?\d+"
)


# A frame of faulthandler's dump ("Fatal Python error" then "Stack (most recent call first):").
FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|/ray/_private/|<frozen")


def crash_reason(lines: Sequence[str]) -> str:
    for i in range(len(lines) - 1, -1, -1):
        m = FATAL.search(lines[i])
        if m:
            return one_line(lines[i].strip(), FATAL_LINE_CHARS) + crash_frame(lines[i + 1 :])
    exc = exception_line("\n".join(lines))
    return exc


def crash_frame(lines: Sequence[str]) -> str:
    """Where a fatal error hit, from faulthandler's stack after it: the innermost frame of the user's code."""
    for line in lines:
        m = FAULT_FRAME.match(line)
        if m and not LIBRARY.search(m["file"]):
            return f" at {m['file'].rsplit('/', 1)[-1]}:{m['line']} in {m['func']}"
    return ""


def owner_chain(g: Graph, message: str | None, depth: int = 0) -> list[Link]:
    """The owner of a lost object (or of an actor): who it was, and why it died."""
    owner = parse_owner(message)
    if not owner:
        return []
    worker_id = owner["worker"]
    driver = DRIVER_WORKER.match(worker_id)
    if driver:
        job_id = driver["job"]
        row = g.jobs.get(job_id) or {}
        status = row.get("status") or "?"
        when = f" at {ms_clock(row.get('end_time'))}" if row.get("end_time") else ""
        return [
            Link(
                "owns",
                f"the owner was the driver of {g.job_label(job_id)}, which is {status}{when}",
                f"owner worker ID {worker_id}",
            )
        ]
    task = g.task_by_worker(worker_id)
    worker = g.workers.get(worker_id) or {}
    actor = None
    if task is not None and task.get("actor_id"):
        actor = g.actors.get(str(task["actor_id"]))
    if actor is None and worker.get("pid"):
        actor = g.actor_by_pid(int(num(worker["pid"])), owner.get("node"))
    quote = f"owner worker ID {worker_id}" + (f", pid {worker.get('pid')}" if worker.get("pid") else "")
    if actor is not None:
        links = [
            Link("owns", f"the owner was {g.actor_label(actor)} of {g.job_label(actor.get('job_id'))}", quote)
        ]
        return links + (actor_end(g, actor, depth + 1) if depth < 3 else [])
    if task is not None:
        links = [Link("owns", f"the owner was {g.task_label(task)}", quote)]
        return links + (task_end(g, task, depth + 1) if depth < 3 else [])
    if worker:
        return [
            Link(
                "owns",
                f"the owner was worker {worker_id} (pid {worker.get('pid')}), which exited: "
                f"{worker.get('exit_type')}",
                one_line(str(worker.get("exit_detail") or ""), QUOTE_CHARS),
            )
        ]
    links = [Link("owns", f"the owner was worker {worker_id} on {g.node_label(owner.get('node'))}", quote)]
    return links + node_death(g, owner.get("node"))


def recorded_end(g: Graph, row: Row, label: str, cause: Row) -> list[Link]:
    """The death causes Ray records with their own context: the memory monitor, the constructor's exception, the
    runtime_env, scheduling."""
    node_id = row.get("node_id")
    if "oom_context" in cause:
        msg = str(cause["oom_context"].get("error_message") or "")
        return [
            Link(
                "ended_by",
                f"{label} was killed by the memory monitor on {g.node_label(node_id)}: "
                f"{memory_summary(msg)}{restarts_note(row)}",
                oom_quote(msg),
            )
        ]
    if "creation_task_failure_context" in cause:
        ctx = cause["creation_task_failure_context"]
        text = str(ctx.get("formatted_exception_string") or ctx.get("error_message") or "")
        return [
            Link(
                "raised_in",
                f"{label} raised in its constructor: {exception_line(text) or one_line(text, SHORT_CAUSE_CHARS)}",
                exc_quote(text),
            )
        ]
    if "runtime_env_failed_context" in cause:
        text = str(cause["runtime_env_failed_context"].get("error_message") or "")
        return [Link("ended_by", f"{label} could not set up its runtime_env: {env_failure(text)}", text)]
    if "actor_unschedulable_context" in cause:
        text = str(cause["actor_unschedulable_context"].get("error_message") or "")
        if "NodeAffinity" in text:
            return [bound_node(g, label, text, num(row.get("end_time")))]
        return [
            Link("ended_by", f"{label} could not be scheduled: {one_line(text, SHORT_CAUSE_CHARS)}", text)
        ]
    return []


def actor_end(g: Graph, row: Row, depth: int = 0) -> list[Link]:
    """Why an actor is DEAD (or why it restarted): one or more links, the last one the deepest cause."""
    label = g.actor_label(row)
    cause = row.get("death_cause") or {}
    node_id = row.get("node_id")
    recorded = recorded_end(g, row, label, cause)
    if recorded:
        return recorded
    ctx = cause.get("actor_died_error_context") or {}
    reason = str(ctx.get("reason") or "")
    msg = str(ctx.get("error_message") or "")
    if ctx.get("never_started") and reason != "RAY_KILL":
        need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
        unplaced = resource_wait(g, label, need, f"actor:{row.get('actor_id')}")
        if (unplaced and unplaced[-1].kind == "holds") or any("infeasible" in u.text for u in unplaced):
            return [
                Link(
                    "ended_by", f"{label} never started ({reason or 'DEAD'}) because it was never placed", msg
                ),
                *unplaced,
            ]
    if re.search(r"placement group.*(removed|destroyed)", msg, re.I):
        pg = g.pgs.get(str(row.get("placement_group_id") or ""))
        end_ms = (pg.get("stats") or {}).get("end_time_ms") if pg and pg.get("state") == "REMOVED" else None
        removed = f" at {ms_clock(end_ms)}" if end_ms else ""
        return [
            Link(
                "ended_by",
                f"{label} ended because its {g.pg_label(pg or {'placement_group_id': row.get('placement_group_id')})} was removed{removed}",
                msg,
            )
        ]
    if reason == "RAY_KILL":
        return [Link("ended_by", f"{label} was killed by ray.kill (on request)", msg)]
    if died_with_node(g, row, reason, ctx):
        note = f" (Ray recorded {reason}: its owner exited after losing it)" if reason == "OWNER_DIED" else ""
        return [Link("ended_by", f"{label} died with its node", msg + note), *node_death(g, node_id)]
    if reason == "OWNER_DIED":
        owner_id = str(ctx.get("owner_id") or "")
        unreachable = lost_contact(g, row)
        if unreachable:
            return unreachable
        links = [Link("ended_by", f"{label} died because its owner died", msg)]
        driver = DRIVER_WORKER.match(owner_id)
        if driver:
            job = g.jobs.get(driver["job"]) or {}
            links.append(
                Link(
                    "owns",
                    f"its owner, the driver of {g.job_label(driver['job'])}, ended ({job.get('status') or '?'})",
                    f"owner_id {owner_id}",
                )
            )
        elif depth < 3:
            links += owner_chain(g, f"Owner worker ID: {owner_id}", depth + 1) if len(owner_id) == 56 else []
        return links
    if reason in ("OUT_OF_SCOPE", "REF_DELETED"):
        return [Link("ended_by", f"{label} ended because every handle to it was dropped (out of scope)", msg)]
    if reason == "INTENDED_USER_EXIT" or "exit_actor" in msg:
        return [Link("ended_by", f"{label} exited on purpose (exit_actor or sys.exit)", msg)]
    if MONITOR_KILL.search(msg):
        return [
            Link(
                "ended_by",
                f"{label} was killed by the memory monitor on {g.node_label(node_id)}: {memory_summary(msg)}",
                oom_quote(msg),
            )
        ]
    why = worker_crash(g, node_id, ctx.get("pid") or row.get("pid"))
    if reason == "WORKER_DIED" or why:
        during = running_call(g, row)
        return [
            Link(
                "ended_by",
                f"{label}'s worker process died"
                + (f" while running {during}" if during else "")
                + (f": {why}" if why else ""),
                msg,
            )
        ]
    if msg:
        return [Link("ended_by", f"{label} died: {one_line(msg, SHORT_CAUSE_CHARS)}", msg)]
    return [Link("ended_by", f"{label} is DEAD; Ray recorded no death cause")]


# The memory monitor's own words (its kill message), not the generic "(1) the process was killed by the OOM
# killer due to high memory usage" list of possible causes Ray appends to every unexpected worker exit.
MONITOR_KILL = re.compile(
    r"memory monitor|running low on memory|Memory on the node|OOM kill reason|killed due to memory pressure",
    re.I,
)
# The GCS marks a node DEAD only after its health checks fail (period x threshold, plus their timeout, slower
# under load): what died on it up to this long before it was marked, died with it.
HEALTH_CHECK_LAG_MS = 180_000


def died_ms(g: Graph, row: Row, ctx: Row) -> float:
    """When an actor died, as early as the records show it: its end time, its owner's end when Ray says the
    owner died, the first call to it that failed."""
    times = [num(row.get("end_time"))]
    owner = str(ctx.get("owner_id") or "")
    driver = DRIVER_WORKER.match(owner)
    if ctx.get("reason") == "OWNER_DIED":
        times.append(
            num((g.jobs.get(driver["job"]) or {}).get("end_time"))
            if driver
            else num((g.workers.get(owner) or {}).get("end_time_ms"))
        )
    times += [num(t.get("end_time_ms")) for t in actor_calls(g, row) if t.get("state") == "FAILED"]
    return min((t for t in times if t > 0), default=0.0)


def died_with_node(g: Graph, row: Row, reason: str, ctx: Row) -> bool:
    """Did the actor die with its node? Ray says so (NODE_DIED), or its node is DEAD and was marked so no later
    than the health checks take after the actor died (Ray then often records OWNER_DIED: the driver exited
    on the actor's error before the GCS marked the node)."""
    node = g.nodes.get(str(row.get("node_id"))) or {}
    if reason == "NODE_DIED":
        return True
    if node.get("state") != "DEAD" or reason == "RAY_KILL":
        return False
    ended, node_end = died_ms(g, row, ctx), num(node.get("end_time_ms"))
    if not ended or not node_end:
        return reason != "OWNER_DIED"
    return node_end <= ended + HEALTH_CHECK_LAG_MS


def actor_calls(g: Graph, row: Row) -> list[Row]:
    aid = row.get("actor_id")
    return [
        rows[-1]
        for rows in g.attempts.values()
        if rows[-1].get("actor_id") == aid and rows[-1].get("type") == "ACTOR_TASK"
    ]


def lost_contact(g: Graph, row: Row) -> list[Link]:
    """An actor whose calls failed as unreachable before its owner died: the owner died of losing it (the
    node is not marked DEAD yet, or the worker process alone died)."""
    failed = [t for t in actor_calls(g, row) if t.get("error_type") == "ACTOR_UNAVAILABLE"]
    if not failed:
        return []
    quote = one_line(str(failed[0].get("error_message") or ""), QUOTE_CHARS)
    return [
        Link(
            "ended_by",
            f"{g.actor_label(row)} on {g.node_label(row.get('node_id'))} stopped answering "
            f"(calls failed with ACTOR_UNAVAILABLE) and its owner exited on that error: its worker process or its "
            "node died (the GCS marks a node DEAD only after its health checks fail)",
            quote,
        )
    ]


def running_call(g: Graph, row: Row) -> str:
    """The call an actor's worker was running when it died: the first failed call that reached the worker."""
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


def restarts_note(row: Row) -> str:
    n = int(num(row.get("num_restarts")))
    return f"; restarted {n} time(s) before" if n else "; not restarted"


def oom_quote(msg: str) -> str:
    lines = [
        line
        for line in msg.splitlines()
        if re.search(r"Memory on the node|OOM kill reason|Selected to kill|task name", line)
    ]
    return " | ".join(one_line(line, QUOTE_LINE_CHARS) for line in lines[:QUOTE_LINES]) or one_line(
        msg, QUOTE_CHARS
    )


def exc_quote(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith("File ") or re.match(r"^[\w.]+(Error|Exception)", line)]
    return " | ".join(keep[-QUOTE_LINES:]) or one_line(text, QUOTE_CHARS)


def task_end(g: Graph, t: Row, depth: int = 0) -> list[Link]:
    """Why one task attempt failed."""
    label = g.task_label(t)
    kind = str(t.get("error_type") or "")
    msg = str(t.get("error_message") or "")
    node_id = t.get("node_id")
    if kind == "OUT_OF_MEMORY" or "running low on memory" in msg:
        tries = len(g.attempts.get(str(t.get("task_id")), [])) or 1
        retried = "; not retried" if tries == 1 else f"; killed on each of {tries} attempts"
        return [
            Link(
                "ended_by",
                f"{label} was killed by the memory monitor on {g.node_label(node_id)}: "
                f"{memory_summary(msg)}{retried}",
                oom_quote(msg),
            )
        ]
    if kind in ("NODE_DIED", "LOCAL_RAYLET_DIED"):
        return [
            Link("ended_by", f"{label} died with its node", one_line(msg, QUOTE_CHARS)),
            *node_death(g, node_id),
        ]
    if kind == "RUNTIME_ENV_SETUP_FAILED":
        return [
            Link("ended_by", f"{label} could not set up its runtime_env: {env_failure(msg)}", exc_quote(msg))
        ]
    if kind == "TASK_CANCELLED":
        return [Link("ended_by", f"{label} was cancelled (ray.cancel)", one_line(msg, QUOTE_LINE_CHARS))]
    if kind in ("ACTOR_DIED", "ACTOR_UNAVAILABLE") and t.get("actor_id"):
        actor = g.actors.get(str(t["actor_id"]))
        if actor is not None and depth < 3 and actor.get("state") == "DEAD":
            return [
                Link("ended_by", f"{label} failed because its actor died", one_line(msg, QUOTE_CHARS)),
                *actor_end(g, actor, depth + 1),
            ]
        if actor is not None and node_death(g, actor.get("node_id")):
            return [
                Link("ended_by", f"{label} failed: its actor's node died", one_line(msg, QUOTE_CHARS)),
                *node_death(g, actor.get("node_id")),
            ]
    owner = parse_owner(msg)
    if (
        owner
        and depth < 3
        and re.search(
            r"OwnerDiedError|ObjectLostError|owner has exited|ObjectFetchTimedOut|ReferenceCountingAssertion",
            msg,
        )
    ):
        what = "an argument of" if "input arguments" in msg else "an object of"
        return [
            Link(
                "waits_on",
                f"{label} needed {what} its whose owner died ({exception_line(msg) or 'OwnerDiedError'})".replace(
                    "its whose", "whose"
                ),
                exc_quote(msg),
            ),
            *owner_chain(g, msg, depth + 1),
        ]
    if re.search(r"ObjectLostError|ObjectReconstructionFailed|object .* (is )?lost", msg) and not owner:
        dead = sorted(
            (n for n in g.nodes.values() if n.get("state") == "DEAD"),
            key=lambda n: -num(n.get("end_time_ms")),
        )
        if dead:
            return [
                Link(
                    "waits_on",
                    f"{label} needed an object that was lost ({exception_line(msg) or 'ObjectLostError'})",
                    exc_quote(msg),
                ),
                *node_death(g, str(dead[0].get("node_id"))),
            ]
    if re.search(r"Job finishes \(\w+\) as driver exits|job has finished", msg):
        return [
            Link(
                "ended_by",
                f"{label} was still running when its job ended (the driver exited); Ray ended it with the job",
                one_line(msg, QUOTE_CHARS),
            )
        ]
    if kind == "WORKER_DIED" or "worker died" in msg.lower():
        why = attempts_crash(g, t)
        if "memory" in (why or "").lower() and "kill" in (why or "").lower():
            return [
                Link("ended_by", f"{label} was killed by the memory monitor on {g.node_label(node_id)}", why)
            ]
        nd = node_death(g, node_id)
        if nd:
            return [Link("ended_by", f"{label}'s worker died with its node", one_line(msg, QUOTE_CHARS)), *nd]
        return [
            Link(
                "ended_by",
                f"{label}'s worker process died" + (f": {why}" if why else ""),
                one_line(msg, QUOTE_CHARS),
            )
        ]
    if "NodeAffinity" in msg or (kind.endswith("UNSCHEDULABLE_ERROR") and NODE_ID.search(msg)):
        return [bound_node(g, label, msg, num(t.get("end_time_ms")))]
    where = first_raise(msg)
    exc = exception_line(msg)
    if where:
        from ray_mcp.diagnosis.tracebacks import last_traceback

        tb = last_traceback(msg.splitlines())
        frame = tb.user_frame if tb is not None else None
        at = f" at {frame.short()}" if frame is not None and not frame.internal else ""
        place = f"{where['name']}{at} (pid {where['pid']}, {where['ip']})"
        return [Link("raised_in", f"{exc or kind} was raised in {place}", exc_quote(msg))]
    return [
        Link(
            "ended_by",
            f"{label} failed with {kind}: {exc or one_line(msg, MESSAGE_HEAD_CHARS)}",
            exc_quote(msg),
        )
    ]


def bound_node(g: Graph, label: str, msg: str, when_ms: float = 0.0) -> Link:
    """Work that hard node affinity (soft=False) binds to a node that is gone or cannot fit it: that node's own
    state. Ray 2.60's error does not name the node; then the node that died last (before the work failed) is
    the one to look at, with its death."""
    head = f"{label} could not be scheduled: hard node affinity (soft=False) to "
    named = NODE_ID.search(msg)
    if named:
        nid = named.group(0)
        row, died = g.nodes.get(nid), node_death(g, nid)
        state = (
            "is not in the cluster's node list (never joined, or long gone)"
            if row is None
            else "is DEAD: died " + died[0].text.split(" died ", 1)[-1]
            if died
            else f"is {row.get('state')}"
        )
        return Link("ended_by", f"{head}{g.node_label(nid)}, and that node {state}", exc_quote(msg))
    dead = sorted(
        (
            n
            for n in g.nodes.values()
            if n.get("state") == "DEAD" and (not when_ms or num(n.get("end_time_ms")) <= when_ms)
        ),
        key=lambda n: -num(n.get("end_time_ms")),
    )
    if not dead:
        return Link(
            "ended_by",
            f"{head}a node that is gone or cannot fit it (Ray's error does not name it); no node "
            "of this cluster has died, so the node id given was never part of it, or that node lacks what it "
            "needs",
            exc_quote(msg),
        )
    last = node_death(g, str(dead[0].get("node_id")))[0].text
    more = f"; {len(dead) - 1} other node(s) died before it" if len(dead) > 1 else ""
    return Link(
        "ended_by",
        f"{head}a gone node; the last node to die: {last}{more}",
        "Ray's error does not name the node: " + exc_quote(msg),
    )


def attempts_crash(g: Graph, t: Row) -> str:
    """Why a task's worker died: the newest attempt whose worker left a crash reason (a retry's row may lack its
    worker's pid), with how many attempts died so."""
    rows = g.attempts.get(str(t.get("task_id"))) or [t]
    died = [r for r in rows if r.get("error_type") == "WORKER_DIED"]
    why = ""
    for r in reversed(rows):
        why = worker_crash(g, r.get("node_id"), r.get("worker_pid"), r.get("worker_id"))
        if why and not why.startswith(("SYSTEM_ERROR", "exit")):
            break
    if not why:
        why = worker_crash(g, t.get("node_id"), t.get("worker_pid"), t.get("worker_id"))
    return why + (f" (each of its {len(died)} attempts)" if len(died) > 1 and why else "")


def env_failure(text: str) -> str:
    """The telling line of a runtime_env setup failure: the installer's own error (pip's "ERROR: No matching
    distribution found for x==1"), else the innermost exception."""
    errors = [line.strip() for line in text.splitlines() if re.match(r"\s*(ERROR|error|E):? ", line)]
    found = [
        e for e in errors if re.search(r"No matching|not found|Could not|No such|denied|timed out", e, re.I)
    ]
    return one_line((found or errors or [exception_line(text) or text])[-1], SHORT_CAUSE_CHARS)
