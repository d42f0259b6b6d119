"""Causal chains over the evidence graph (graph.py): from a symptom to the entity that holds, owns, ended or raised it.

Pure functions (no I/O). ``explain_job`` and ``explain_cluster`` turn an ``Evidence`` into ``Chain``s, ranked:
each chain starts at a symptom (a failed task, a dead or looping actor, a pending group, a driver blocked on
something) and follows the graph's edges (ended_by, raised_in, owns, waits_on, holds) to its last link, whose
sentence becomes the verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ray_mcp.diagnosis.graph import (
    DRIVER_WORKER,
    Evidence,
    Graph,
    Row,
    ago,
    bundle_index,
    clip,
    count_by,
    exception_line,
    first_raise,
    memory_summary,
    ms_clock,
    names,
    num,
    parse_owner,
    span,
)

# Severity: higher ranks first (the same scale as diagnosis.py).
ROOT = 100
STUCK = 90
LOOP = 85
CONTEXT = 50
WARNING = 30
INFO = 10

FT_DOC = "ray-docs://reference/14-fault-tolerance"
PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"


@dataclass
class Link:
    kind: str  # waits_on | holds | owns | created_by | ended_by | raised_in
    text: str
    quote: str = ""


@dataclass
class Chain:
    severity: int
    kind: str
    symptom: str
    links: list[Link]
    next_steps: list[str] = field(default_factory=list)
    job_id: str | None = None
    subjects: set[str] = field(default_factory=set)  # entity keys this chain explains

    @property
    def cause(self) -> str:
        """The last link; after an ownership link, both (the owner, and why it ended)."""
        if not self.links:
            return ""
        last = self.links[-1].text
        if len(self.links) >= 2 and self.links[-2].kind == "owns":
            owner = self.links[-2].text
            subject = re.match(r"(actor|task) \S+(?: '[^']*')? \([0-9a-f]+\)", last)
            if subject and subject.group(0) in owner:
                last = "it" + last[len(subject.group(0)) :]
            return f"{owner}; {last}"
        return last

    @property
    def verdict(self) -> str:
        """The symptom and the last link; a one-link chain is its own symptom."""
        if (
            len(self.links) == 1
            and self.symptom
            and not self.symptom.startswith(("Stuck", "The driver", "No progress"))
        ):
            return self.cause
        if self.symptom and self.cause.startswith(" ".join(self.symptom.split()[:2]) + " "):
            return self.cause  # the cause already names the symptom's subject
        return f"{self.symptom}: {self.cause}" if self.cause and self.symptom else self.symptom or self.cause

    def evidence(self) -> list[str]:
        out = []
        for link in self.links:
            if len(self.links) > 1:
                out.append(f"[{link.kind}] {link.text}")
            if link.quote:
                out.append(
                    f'{"  " if len(self.links) > 1 else "[" + link.kind + "] "}"{clip(link.quote, 300)}"'
                )
        return out


# -- ended by ---------------------------------------------------------------------------------------------


def node_death(g: Graph, node_id: str | None) -> list[Link]:
    row = g.nodes.get(node_id or "")
    if row is None:
        return [Link("ended_by", f"{g.node_label(node_id)} is gone (not in the node list)")]
    if row.get("state") != "DEAD":
        return []
    message = str(row.get("state_message") or "no death reason recorded")
    when = ms_clock(row.get("end_time_ms"))
    events = [e for e in g.ev.events or [] if node_id and node_id in str(e.get("message") or "")]
    quote = message + (f" | event: {clip(events[-1].get('message'), 200)}" if events else "")
    return [Link("ended_by", f"{g.node_label(node_id)} died at {when} ({clip(message, 90)})", quote)]


def worker_crash(g: Graph, node_id: str | None, pid: object, worker_id: str | None = None) -> str:
    """The crash reason of a dead worker: its stderr (a Python exception, a fatal error, a signal), else Ray's
    exit detail."""
    lines = g.worker_log(node_id, pid)
    reason = crash_reason(lines)
    if reason:
        return reason
    worker = g.workers.get(worker_id or "") or g.worker_by_pid.get(int(num(pid))) or {}
    return exit_words(worker.get("exit_type"), worker.get("exit_detail"))


def exit_words(exit_type: object, detail: object) -> str:
    """Ray's exit record of a worker, in words; its generic "connection error" text says only how it ended."""
    text = str(detail or "")
    if not text:
        return ""
    if "connection error code 2" in text or "End of file" in text:
        return (f"{exit_type or 'exit'}: the process ended without a Python exception (os._exit, a signal, or a "
                "native crash; nothing in its stderr)")  # fmt: skip
    return f"{exit_type or 'exit'}: {clip(text, 140)}"


FATAL = re.compile(
    r"Fatal Python error: .*|Segmentation fault|SIG[A-Z]+|signal \d+|[Ee]xit(?:ed)? (?:with )?code:? -?\d+"
)


def crash_reason(lines: Sequence[str]) -> str:
    for line in reversed(lines):
        m = FATAL.search(line)
        if m:
            return clip(line.strip(), 160)
    exc = exception_line("\n".join(lines))
    return exc


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
        return [Link("owns", f"the owner was the driver of {g.job_label(job_id)}, which is {status}{when}",
                     f"owner worker ID {worker_id}")]  # fmt: skip
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
        return [Link("owns", f"the owner was worker {worker_id} (pid {worker.get('pid')}), which exited: "
                     f"{worker.get('exit_type')}", clip(str(worker.get("exit_detail") or ""), 300))]  # fmt: skip
    links = [Link("owns", f"the owner was worker {worker_id} on {g.node_label(owner.get('node'))}", quote)]
    return links + node_death(g, owner.get("node"))


def actor_end(g: Graph, row: Row, depth: int = 0) -> list[Link]:
    """Why an actor is DEAD (or why it restarted): one or more links, the last one the deepest cause."""
    label = g.actor_label(row)
    cause = row.get("death_cause") or {}
    node_id = row.get("node_id")
    if "oom_context" in cause:
        msg = str(cause["oom_context"].get("error_message") or "")
        return [Link("ended_by", f"{label} was killed by the memory monitor on {g.node_label(node_id)}: "
                     f"{memory_summary(msg)}{restarts_note(row)}", oom_quote(msg))]  # fmt: skip
    if "creation_task_failure_context" in cause:
        ctx = cause["creation_task_failure_context"]
        text = str(ctx.get("formatted_exception_string") or ctx.get("error_message") or "")
        return [
            Link(
                "raised_in",
                f"{label} raised in its constructor: {exception_line(text) or clip(text, 160)}",
                exc_quote(text),
            )
        ]
    if "runtime_env_failed_context" in cause:
        text = str(cause["runtime_env_failed_context"].get("error_message") or "")
        return [Link("ended_by", f"{label} could not set up its runtime_env: {clip(text, 160)}", text)]
    if "actor_unschedulable_context" in cause:
        text = str(cause["actor_unschedulable_context"].get("error_message") or "")
        return [Link("ended_by", f"{label} could not be scheduled: {clip(text, 160)}", text)]
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
    node_dead = (g.nodes.get(str(node_id)) or {}).get("state") == "DEAD"
    if reason == "NODE_DIED" or (node_dead and reason not in ("OWNER_DIED", "RAY_KILL")):
        nd = node_death(g, node_id)
        return [Link("ended_by", f"{label} died with its node", msg), *nd]
    if reason == "OWNER_DIED":
        owner_id = str(ctx.get("owner_id") or "")
        links = [Link("ended_by", f"{label} died because its owner died", msg)]
        driver = DRIVER_WORKER.match(owner_id)
        if driver:
            job = g.jobs.get(driver["job"]) or {}
            links.append(Link("owns", f"its owner, the driver of {g.job_label(driver['job'])}, ended ({job.get('status') or '?'})",
                              f"owner_id {owner_id}"))  # fmt: skip
        elif depth < 3:
            links += owner_chain(g, f"Owner worker ID: {owner_id}", depth + 1) if len(owner_id) == 56 else []
        return links
    if reason in ("OUT_OF_SCOPE", "REF_DELETED"):
        return [Link("ended_by", f"{label} ended because every handle to it was dropped (out of scope)", msg)]
    if reason == "INTENDED_USER_EXIT" or "exit_actor" in msg:
        return [Link("ended_by", f"{label} exited on purpose (exit_actor or sys.exit)", msg)]
    if "memory" in msg.lower() and "killed" in msg.lower():
        return [
            Link(
                "ended_by",
                f"{label} was killed by the memory monitor on {g.node_label(node_id)}: {memory_summary(msg)}",
                oom_quote(msg),
            )
        ]
    why = worker_crash(g, node_id, ctx.get("pid") or row.get("pid"))
    if reason == "WORKER_DIED" or why:
        return [Link("ended_by", f"{label}'s worker process died" + (f": {why}" if why else ""), msg)]
    if msg:
        return [Link("ended_by", f"{label} died: {clip(msg, 160)}", msg)]
    return [Link("ended_by", f"{label} is DEAD; Ray recorded no death cause")]


def restarts_note(row: Row) -> str:
    n = int(num(row.get("num_restarts")))
    return f"; restarted {n} time(s) before" if n else "; not restarted"


def oom_quote(msg: str) -> str:
    lines = [
        line
        for line in msg.splitlines()
        if re.search(r"Memory on the node|OOM kill reason|Selected to kill|task name", line)
    ]
    return " | ".join(clip(line, 200) for line in lines[:3]) or clip(msg, 300)


def exc_quote(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith("File ") or re.match(r"^[\w.]+(Error|Exception)", line)]
    return " | ".join(keep[-3:]) or clip(text, 300)


def task_end(g: Graph, t: Row, depth: int = 0) -> list[Link]:
    """Why one task attempt failed."""
    label = g.task_label(t)
    kind = str(t.get("error_type") or "")
    msg = str(t.get("error_message") or "")
    node_id = t.get("node_id")
    if kind == "OUT_OF_MEMORY" or "running low on memory" in msg:
        tries = len(g.attempts.get(str(t.get("task_id")), [])) or 1
        retried = "; not retried" if tries == 1 else f"; killed on each of {tries} attempts"
        return [Link("ended_by", f"{label} was killed by the memory monitor on {g.node_label(node_id)}: "
                     f"{memory_summary(msg)}{retried}", oom_quote(msg))]  # fmt: skip
    if kind in ("NODE_DIED", "LOCAL_RAYLET_DIED"):
        return [Link("ended_by", f"{label} died with its node", clip(msg, 300)), *node_death(g, node_id)]
    if kind == "TASK_CANCELLED":
        return [Link("ended_by", f"{label} was cancelled (ray.cancel)", clip(msg, 200))]
    if kind == "ACTOR_DIED" and t.get("actor_id"):
        actor = g.actors.get(str(t["actor_id"]))
        if actor is not None and depth < 3:
            return [
                Link("ended_by", f"{label} failed because its actor died", clip(msg, 300)),
                *actor_end(g, actor, depth + 1),
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
        return [Link("waits_on", f"{label} needed {what} its whose owner died ({exception_line(msg) or 'OwnerDiedError'})".replace("its whose", "whose"),
                     exc_quote(msg)), *owner_chain(g, msg, depth + 1)]  # fmt: skip
    if re.search(r"ObjectLostError|ObjectReconstructionFailed|object .* (is )?lost", msg) and not owner:
        dead = sorted(
            (n for n in g.nodes.values() if n.get("state") == "DEAD"),
            key=lambda n: -num(n.get("end_time_ms")),
        )
        if dead:
            return [Link("waits_on", f"{label} needed an object that was lost ({exception_line(msg) or 'ObjectLostError'})",
                         exc_quote(msg)), *node_death(g, str(dead[0].get("node_id")))]  # fmt: skip
    if kind == "WORKER_DIED" or "worker died" in msg.lower():
        why = worker_crash(g, node_id, t.get("worker_pid"), t.get("worker_id"))
        if "memory" in (why or "").lower() and "kill" in (why or "").lower():
            return [
                Link("ended_by", f"{label} was killed by the memory monitor on {g.node_label(node_id)}", why)
            ]
        nd = node_death(g, node_id)
        if nd:
            return [Link("ended_by", f"{label}'s worker died with its node", clip(msg, 300)), *nd]
        return [
            Link("ended_by", f"{label}'s worker process died" + (f": {why}" if why else ""), clip(msg, 300))
        ]
    where = first_raise(msg)
    exc = exception_line(msg)
    if where:
        from ray_mcp.diagnosis.tracebacks import last_traceback

        tb = last_traceback(msg.splitlines())
        frame = tb.user_frame if tb is not None else None
        at = f" at {frame.short()}" if frame is not None and not frame.internal else ""
        place = f"{where['name']}{at} (pid {where['pid']}, {where['ip']})"
        return [Link("raised_in", f"{exc or kind} was raised in {place}", exc_quote(msg))]
    return [Link("ended_by", f"{label} failed with {kind}: {exc or clip(msg, 140)}", exc_quote(msg))]


# -- waits on ----------------------------------------------------------------------------------------------


def resource_wait(g: Graph, who: str, need: dict[str, float], self_key: str = "") -> list[Link]:
    """Infeasible (no alive node can ever fit it) or contention (it fits, but the resource is held now)."""
    need = {k: num(v) for k, v in need.items() if num(v) > 0}
    totals = g.node_totals()
    if not need or not totals:
        return []
    fits = [nid for nid, tot in totals.items() if all(tot.get(k, 0.0) + 1e-9 >= v for k, v in need.items())]
    shape = ", ".join(f"{k} {v:g}" for k, v in need.items())
    if not fits:
        lacking = [k for k, v in need.items() if max((t.get(k, 0.0) for t in totals.values()), default=0) < v]
        most = ", ".join(f"{k} {max((t.get(k, 0.0) for t in totals.values()), default=0):g}" for k in lacking)
        return [Link("waits_on", f"{who} needs {{{shape}}}, which no alive node can ever fit (infeasible: the largest has {most})",
                     f"{len(totals)} alive node(s)")]  # fmt: skip
    # Contention: on every node that could fit it, something holds what it needs.
    short_of = set()
    for nid in fits:
        held = g.held_on(nid)
        for k, v in need.items():
            if totals[nid].get(k, 0.0) - held.get(k, 0.0) + 1e-9 < v:
                short_of.add(k)
    if not short_of:
        return [Link("waits_on", f"{who} needs {{{shape}}}, which fits on {len(fits)} node(s) and looks free now "
                     "(scheduling in progress, or held by work not listed)")]  # fmt: skip
    links = []
    for resource in sorted(short_of, key=lambda r: (r != "GPU", r)):
        holders = [h for h in g.holders_of(resource) if h[2] in fits and h[0].key != self_key]
        if not holders:
            continue
        total = sum(totals[n].get(resource, 0.0) for n in fits)
        groups = count_by([f"{holder_name(g, ent)} of {g.job_label(ent.job_id)}" for ent, _, _ in holders])
        who_holds = "; ".join(f"{c} {n}" if c > 1 else n for n, c in groups[:3])
        held_total = sum(a for _, a, _ in holders)
        quote = "; ".join(
            f"{ent.label} holds {a:g} {resource} on node {nid[:8]}" for ent, a, nid in holders[:4]
        )
        # Nested tasks: the holders are the waiter's own callers, blocked in ray.get on it (starvation).
        waiter = g.entities.get(self_key)
        parent = str((waiter.row if waiter else {}).get("parent_task_id") or "")
        callers = [
            ent
            for ent, _, _ in holders
            if ent.kind == "task" and ent.row.get("name") == (g.attempts.get(parent) or [{}])[-1].get("name")
        ]
        starve = (f"; these are its own callers (tasks {callers[0].row.get('name')}), blocked in ray.get on it: nested "
                  "tasks starve" if callers else "")  # fmt: skip
        links.append(Link("holds", f"{who} waits for {resource} ({shape}): {held_total:g} of {total:g} {resource} on the nodes "
                          f"that fit it are held by {who_holds}{starve}", quote))  # fmt: skip
    return links or [
        Link("waits_on", f"{who} needs {{{shape}}}; it fits, but {', '.join(sorted(short_of))} is in use now")
    ]


def holder_name(g: Graph, ent: object) -> str:
    row = getattr(ent, "row", {})
    kind = getattr(ent, "kind", "")
    if kind == "actor":
        return f"{row.get('class_name')} actor(s)"
    if kind == "pg":
        return g.pg_label(row)
    return f"task(s) {row.get('name') or row.get('func_or_class_name')}"


def pg_wait(g: Graph, pg: Row) -> list[Link]:
    label = g.pg_label(pg)
    bundles = pg.get("bundles") or []
    strategy = pg.get("strategy") or "PACK"
    totals = g.node_totals()
    need: dict[str, float] = {}
    for b in bundles:
        for k, v in (b.get("unit_resources") or {}).items():
            need[k] = need.get(k, 0.0) + num(v)
    # A STRICT_PACK group must fit on one node: its whole shape is one request.
    if strategy == "STRICT_PACK" or len(bundles) == 1:
        return resource_wait(
            g, f"{label} ({strategy}, {len(bundles)} bundle(s))", need, f"pg:{pg.get('placement_group_id')}"
        )
    for b in bundles:
        shape = {k: num(v) for k, v in (b.get("unit_resources") or {}).items()}
        links = resource_wait(
            g, f"bundle {bundle_index(b)} of {label}", shape, f"pg:{pg.get('placement_group_id')}"
        )
        if links and "infeasible" in links[-1].text:
            return links
    if strategy == "STRICT_SPREAD" and len(bundles) > len(totals):
        return [
            Link(
                "waits_on",
                f"{label} is STRICT_SPREAD over {len(bundles)} bundles but only {len(totals)} node(s) are alive (infeasible)",
            )
        ]
    pooled = {k: sum(t.get(k, 0.0) for t in totals.values()) for k in need}
    if any(pooled[k] + 1e-9 < v for k, v in need.items()):
        wanted = ", ".join(f"{k} {v:g}" for k, v in need.items())
        return [
            Link("waits_on", f"{label} needs {{{wanted}}} in all, more than the cluster has (infeasible)")
        ]
    return resource_wait(g, label, need, f"pg:{pg.get('placement_group_id')}")


PENDING_TASK = {"PENDING_NODE_ASSIGNMENT", "PENDING_ARGS_AVAIL", "SUBMITTED_TO_WORKER", "PENDING_OBJ_STORE_MEM_AVAIL",
                "PENDING_ACTOR_TASK_ARGS_FETCH", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", "NIL"}  # fmt: skip


def actor_wait(g: Graph, row: Row, depth: int = 0) -> list[Link]:
    label = g.actor_label(row)
    state = row.get("state")
    if state == "RESTARTING":
        return [Link("waits_on", f"{label} is RESTARTING (restart {int(num(row.get('num_restarts')))})")]
    if state not in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
        return []
    pg = g.pgs.get(str(row.get("placement_group_id") or ""))
    if pg is not None and pg.get("state") in ("PENDING", "RESCHEDULING"):
        return [
            Link(
                "waits_on",
                f"{label} waits for its {g.pg_label(pg)}",
                f"placement_group_id={pg.get('placement_group_id')}",
            ),
            *pg_wait(g, pg),
        ]
    if pg is not None and pg.get("state") == "REMOVED":
        return [Link("ended_by", f"{label} cannot be scheduled: its {g.pg_label(pg)} was removed")]
    if state == "DEPENDENCIES_UNREADY":
        return [
            Link("waits_on", f"{label} waits for the arguments of its constructor (objects not computed yet)")
        ]
    need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
    return resource_wait(g, label, need, f"actor:{row.get('actor_id')}") or [
        Link("waits_on", f"{label} is PENDING_CREATION: waiting for a worker process")
    ]


def task_wait(g: Graph, t: Row, depth: int = 0) -> list[Link]:
    label = g.task_label(t)
    state = str(t.get("state") or "")
    if t.get("actor_id") and t.get("type") == "ACTOR_TASK":
        actor = g.actors.get(str(t["actor_id"]))
        if actor is not None and actor.get("state") != "ALIVE":
            if actor.get("state") == "DEAD":
                return [
                    Link("waits_on", f"{label} was sent to a dead actor"),
                    *actor_end(g, actor, depth + 1),
                ]
            return [
                Link("waits_on", f"{label} waits for {g.actor_label(actor)}"),
                *actor_wait(g, actor, depth + 1),
            ]
        return []
    pg = g.pgs.get(str(t.get("placement_group_id") or ""))
    if pg is not None and pg.get("state") in ("PENDING", "RESCHEDULING"):
        return [Link("waits_on", f"{label} waits for its {g.pg_label(pg)}"), *pg_wait(g, pg)]
    if state == "PENDING_ARGS_AVAIL":
        return [Link("waits_on", f"{label} waits for its arguments (objects not computed yet)")]
    if state == "PENDING_NODE_ASSIGNMENT":
        need = {k: num(v) for k, v in (t.get("required_resources") or {}).items()}
        return resource_wait(g, label, need, f"task:{t.get('task_id')}")
    return []


# -- wait-for graph: deadlocks and what the driver is blocked on ---------------------------------------------


def open_tasks(g: Graph) -> dict[str, Row]:
    return {
        tid: rows[-1]
        for tid, rows in g.attempts.items()
        if rows[-1].get("state") not in ("FINISHED", "FAILED")
    }


def waits_for(g: Graph, open_: dict[str, Row]) -> dict[str, list[str]]:
    """task id -> the task ids it waits for: a running task waits for its open children (it called ray.get);
    a queued actor call waits for the call running on the same actor."""
    children: dict[str, list[str]] = {}
    for tid, t in open_.items():
        parent = str(t.get("parent_task_id") or "")
        if parent:
            children.setdefault(parent, []).append(tid)
    running_on: dict[str, list[str]] = {}
    for tid, t in open_.items():
        if t.get("state") == "RUNNING" and t.get("actor_id"):
            running_on.setdefault(str(t["actor_id"]), []).append(tid)
    edges: dict[str, list[str]] = {}
    for tid, t in open_.items():
        if t.get("state") == "RUNNING" or t.get("type") == "DRIVER_TASK":
            edges[tid] = list(children.get(tid, []))
        elif t.get("actor_id") and t.get("type") == "ACTOR_TASK":
            edges[tid] = [r for r in running_on.get(str(t["actor_id"]), []) if r != tid]
    return edges


def find_cycle(edges: dict[str, list[str]]) -> list[str]:
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        color[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if color.get(nxt) == 1:
                return stack[stack.index(nxt) :]
            if color.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = 2
        return []

    for node in list(edges):
        if color.get(node) is None:
            found = visit(node)
            if found:
                return found
    return []


def deadlock(g: Graph) -> Chain | None:
    open_ = open_tasks(g)
    cycle = find_cycle(waits_for(g, open_))
    if not cycle:
        return None
    links = []
    for i, tid in enumerate(cycle):
        t = open_[tid]
        nxt = open_[cycle[(i + 1) % len(cycle)]]
        actor = g.actors.get(str(t.get("actor_id") or ""))
        where = f" on {g.actor_label(actor)}" if actor else ""
        if t.get("state") == "RUNNING":
            text = f"{g.task_label(t)}{where} is RUNNING and waits for {g.task_label(nxt)} (it called ray.get on it)"
        else:
            text = f"{g.task_label(t)}{where} is queued behind {g.task_label(nxt)}, which occupies the actor"
        links.append(
            Link("waits_on", text, f"state={t.get('state')}, parent_task_id={t.get('parent_task_id')}")
        )
    actors = names(
        g.actor_label(g.actors[a]) for a in {str(open_[t].get("actor_id")) for t in cycle} if a in g.actors
    )
    links.append(
        Link(
            "waits_on",
            f"deadlock: {len(cycle)} calls wait for each other in a cycle ({actors or 'tasks'}); none can finish",
        )
    )
    return Chain(STUCK + 5, "deadlock", "", links, [
        "stack_traces of the actors in the cycle to see the ray.get calls",
        "give the actors max_concurrency > 1 or make the inner call async"], subjects={f"task:{t}" for t in cycle})  # fmt: skip


def driver_wait(g: Graph, job_id: str) -> Chain | None:
    """Follow what the driver waits on, down to the last open task: pending (why) or running (stacks)."""
    open_ = open_tasks(g)
    edges = waits_for(g, open_)
    roots = [tid for tid, t in open_.items() if t.get("type") == "DRIVER_TASK"]
    parents = {str(t.get("parent_task_id") or "") for t in open_.values()}
    start = (
        roots[0] if roots else next((p for p in parents if p.endswith(job_id) and p.startswith("ffff")), "")
    )
    frontier = edges.get(start) or [tid for tid, t in open_.items() if str(t.get("parent_task_id")) == start]
    if not frontier:
        return None
    path: list[str] = []
    current = frontier
    seen: set[str] = set()
    while current:
        pick = sorted(current, key=lambda tid: (open_[tid].get("state") == "RUNNING", tid))[0]
        if pick in seen:
            break
        seen.add(pick)
        path.append(pick)
        current = [c for c in edges.get(pick, []) if c in open_]
    last = open_[path[-1]]
    links = [
        Link(
            "waits_on",
            f"the driver waits on {g.task_label(open_[path[0]])}"
            + (f" ({len(frontier)} open)" if len(frontier) > 1 else ""),
        )
    ]
    for tid in path[1:]:
        links.append(Link("waits_on", f"which waits on {g.task_label(open_[tid])}"))
    why = task_wait(g, last)
    if why:
        links += why
    elif last.get("state") == "RUNNING":
        started = next(
            (e.get("created_ms") for e in reversed(last.get("events") or []) if e.get("state") == "RUNNING"),
            None,
        )
        links.append(Link("waits_on", f"{g.task_label(last)} has been RUNNING for {ago(started, g.ev.now_ms)} on "
                          f"{g.node_label(last.get('node_id'))} (pid {last.get('worker_pid') or '?'})",
                          f"state RUNNING since {ms_clock(started)}"))  # fmt: skip
    else:
        links.append(Link("waits_on", f"{g.task_label(last)} is {last.get('state')}"))
    stuck = bool(why) or last.get("state") != "RUNNING"
    return Chain(STUCK if stuck else CONTEXT, "waiting", "The driver is blocked", links,
                 [f"stack_traces job={job_id}" if not stuck else f"cluster_status; list_tasks job_id={job_id} state=PENDING_NODE_ASSIGNMENT"],
                 job_id, {f"task:{t}" for t in path})  # fmt: skip


# -- a job: status first, then its own chains --------------------------------------------------------------


def job_status(ev: Evidence) -> str:
    """The job's own status and how it got there, in a few words."""
    job = ev.job or {}
    status = str(job.get("status") or "UNKNOWN")
    start, end = num(job.get("start_time")), num(job.get("end_time"))
    took = span((end - start) / 1000) if start and end else ""
    if status == "SUCCEEDED":
        return "SUCCEEDED: the job succeeded" + (f" after {took}" if took else "")
    if status == "STOPPED":
        return f"STOPPED: stopped on request at {ms_clock(end)}" + (f" after {took}" if took else "")
    if status == "FAILED":
        code = job.get("driver_exit_code")
        return (
            "FAILED"
            + (f" after {took}" if took else "")
            + (f" (driver exit code {code})" if code is not None else "")
        )
    if status in ("RUNNING", "PENDING"):
        return f"{status} for {ago(start, ev.now_ms)}" if start else status
    return status


def progress(g: Graph) -> str:
    """For a RUNNING job: does it progress? (tasks finished recently, tasks open)."""
    finals = [rows[-1] for rows in g.attempts.values()]
    done = [t for t in finals if t.get("state") == "FINISHED" and t.get("type") != "ACTOR_CREATION_TASK"]
    open_ = [
        t for t in finals if t.get("state") not in ("FINISHED", "FAILED") and t.get("type") != "DRIVER_TASK"
    ]
    newest = max((num(t.get("end_time_ms")) for t in done), default=0.0)
    parts = [f"{len(done)} task(s) finished"]
    if newest:
        parts.append(f"the last {ago(newest, g.ev.now_ms)} ago")
    parts.append(f"{len(open_)} open")
    return ", ".join(parts)


def final_attempts(g: Graph, job_id: str | None) -> list[Row]:
    return [rows[-1] for rows in g.attempts.values() if not job_id or rows[-1].get("job_id") == job_id]


def retried_warnings(g: Graph, job_id: str | None) -> list[Chain]:
    """Tasks whose earlier attempts failed but whose last attempt finished: a warning, not a failure."""
    groups: dict[tuple[str, str], list[Row]] = {}
    for rows in g.attempts.values():
        if rows[-1].get("state") != "FINISHED" or (job_id and rows[-1].get("job_id") != job_id):
            continue
        for t in rows[:-1]:
            if t.get("state") == "FAILED":
                exc = exception_line(t.get("error_message")).split(":")[0] or str(t.get("error_type"))
                groups.setdefault((str(t.get("name")), exc), []).append(t)
    out = []
    for (name, exc), rows in groups.items():
        tasks = {str(t.get("task_id")) for t in rows}
        out.append(Chain(WARNING, "retried", "Warning", [Link("ended_by",
            f"{len(rows)} attempt(s) of {name} failed with {exc}; all retried successfully ({len(tasks)} task(s))",
            exc_quote(str(rows[-1].get("error_message") or "")))], job_id=job_id, subjects={f"task:{t}" for t in tasks}))  # fmt: skip
    return out


def failed_task_chains(g: Graph, job_id: str | None) -> list[Chain]:
    """Each distinct cause of the job's failed tasks, with the count of tasks it took down."""
    groups: dict[str, tuple[list[Link], list[Row]]] = {}
    cancelled: list[Row] = []
    for t in final_attempts(g, job_id):
        if t.get("state") != "FAILED":
            continue
        if t.get("error_type") == "TASK_CANCELLED":
            cancelled.append(t)
            continue
        links = task_end(g, t)
        key = re.sub(r"\(([0-9a-f]{16,})\)", "", links[-1].text) + str(t.get("name"))
        key = re.sub(r"pid \d+", "", key)
        groups.setdefault(key, (links, []))[1].append(t)
    chains = []
    for links, rows in groups.values():
        first = rows[0]
        n = len(rows)
        name = str(first.get("name"))
        symptom = f"task {name} failed" if n == 1 else f"{n} tasks {name} failed"
        attempts = len(g.attempts.get(str(first.get("task_id")), []))
        if attempts > 1:
            symptom += f" after {attempts} attempts"
        kind = chain_kind(links)
        chains.append(Chain(CONTEXT + 10, kind, symptom, links,
                            [f"list_tasks job_id={first.get('job_id')} state=FAILED", f"tail_logs task_id={first.get('task_id')}"],
                            first.get("job_id"), {f"task:{t.get('task_id')}" for t in rows}))  # fmt: skip
    if cancelled:
        chains.append(Chain(INFO, "cancelled", f"{len(cancelled)} task(s) cancelled with ray.cancel (not a failure)",
                            [], job_id=job_id, subjects={f"task:{t.get('task_id')}" for t in cancelled}))  # fmt: skip
    return chains


def chain_kind(links: Sequence[Link]) -> str:
    text = " ".join(link.text for link in links)
    for kind, pattern in (("oom", "memory monitor"), ("node_died", r"node .* died"), ("owner_died", "owner"),
                          ("pg_removed", "placement group .* removed"), ("killed", "ray.kill"),
                          ("worker_crash", "worker process died"), ("raised", "raised")):  # fmt: skip
        if re.search(pattern, text):
            return kind
    return "failed"


BENIGN_ACTOR_END = ("ray.kill", "out of scope", "exited on purpose")


def actor_chains(g: Graph, job_id: str | None, job_status_: str) -> list[Chain]:
    chains = []
    killed = []
    for row in g.actors.values():
        if job_id and row.get("job_id") != job_id:
            continue
        restarts = int(num(row.get("num_restarts")))
        state = row.get("state")
        if state == "DEAD":
            links = actor_end(g, row)
            if any(b in links[-1].text for b in BENIGN_ACTOR_END):
                killed.append(row)
                continue
            if (
                "died because its owner died" in links[0].text
                and "driver of" in links[-1].text
                and job_status_ != "RUNNING"
            ):
                continue  # the job ended, and its actors with it
            chains.append(Chain(CONTEXT + 15, chain_kind(links), f"{g.actor_label(row)} died", links,
                                [f"tail_logs actor_id={row.get('actor_id')}", f"get_actor actor_id={row.get('actor_id')}"],
                                row.get("job_id"), {f"actor:{row.get('actor_id')}"}))  # fmt: skip
        elif restarts >= 2 or (state == "RESTARTING" and restarts >= 1):
            chains.append(restart_loop(g, row))
        elif state in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            links = actor_wait(g, row)
            if links:
                chains.append(Chain(STUCK - 5 if "infeasible" in links[-1].text else STUCK - 10, wait_kind(links),
                                    f"{g.actor_label(row)} is {state}", links, ["cluster_status", f"get_actor actor_id={row.get('actor_id')}"],
                                    row.get("job_id"), {f"actor:{row.get('actor_id')}"}))  # fmt: skip
    if killed:
        labels = names(g.actor_label(a) for a in killed)
        chains.append(Chain(INFO, "killed", f"{len(killed)} actor(s) ended on request or out of scope (not a failure): {labels}",
                            [], job_id=job_id, subjects={f"actor:{a.get('actor_id')}" for a in killed}))  # fmt: skip
    return chains


def wait_kind(links: Sequence[Link]) -> str:
    text = links[-1].text if links else ""
    if "infeasible" in text:
        return "infeasible"
    if links and links[-1].kind == "holds":
        return "contention"
    return "waiting"


def restart_loop(g: Graph, row: Row) -> Chain:
    label = g.actor_label(row)
    n = int(num(row.get("num_restarts")))
    dead = sorted(row.get("_dead_workers") or [], key=lambda w: num(w.get("end_time_ms")))
    times = [num(w.get("end_time_ms")) for w in dead if num(w.get("end_time_ms"))]
    interval = (
        f", about every {span((times[-1] - times[0]) / 1000 / (len(times) - 1))}" if len(times) >= 2 else ""
    )
    lines = g.ev.worker_logs.get(f"actor:{row.get('actor_id')}", [])
    reason = crash_reason(lines)
    if not reason and dead:
        reason = exit_words(dead[-1].get("exit_type"), dead[-1].get("exit_detail"))
    telling = [
        line
        for line in lines
        if line.strip() and not line.startswith((":job_id:", ":actor_name:", ":task_name:"))
    ]
    quote = " | ".join(clip(line, 160) for line in telling[-3:]) or (
        clip(str(dead[-1].get("exit_detail")), 300) if dead else ""
    )
    text = f"{label} restarted {n} time(s){interval}; each time its worker died" + (
        f": {reason}" if reason else " (no crash reason in its worker log)"
    )
    if "memory" in (reason or "").lower() and "kill" in (reason or "").lower():
        text = f"{label} restarted {n} time(s){interval}; the memory monitor killed its worker each time"
    state = row.get("state")
    return Chain(LOOP, "restart_loop", f"{label} is in a restart loop ({state})",
                 [Link("ended_by", text, quote)],
                 [f"tail_logs actor_id={row.get('actor_id')} stream=err", f"get_actor actor_id={row.get('actor_id')}"],
                 row.get("job_id"), {f"actor:{row.get('actor_id')}"})  # fmt: skip


def pending_chains(g: Graph, job_id: str | None) -> list[Chain]:
    chains = []
    for pg in g.pgs.values():
        if (job_id and pg.get("creator_job_id") != job_id) or pg.get("state") not in (
            "PENDING",
            "RESCHEDULING",
        ):
            continue
        links = pg_wait(g, pg)
        if links:
            chains.append(Chain(STUCK if "infeasible" in links[-1].text else STUCK - 10, wait_kind(links),
                                f"{g.pg_label(pg)} is {pg.get('state')}", links,
                                [f"pg_status pg={pg.get('placement_group_id')}", "cluster_status"], pg.get("creator_job_id"),
                                {f"pg:{pg.get('placement_group_id')}"}))  # fmt: skip
    waiting: dict[str, tuple[list[Link], list[Row]]] = {}
    for t in final_attempts(g, job_id):
        if (
            t.get("state") == "PENDING_NODE_ASSIGNMENT"
            and t.get("type") == "NORMAL_TASK"
            and not t.get("placement_group_id")
        ):
            links = task_wait(g, t)
            if links:
                key = re.sub(r"\([0-9a-f]{16,}\)", "", links[-1].text)
                waiting.setdefault(key, (links, []))[1].append(t)
    for links, rows in waiting.values():
        n = len(rows)
        chains.append(Chain(STUCK - 5 if "infeasible" in links[-1].text else STUCK - 12, wait_kind(links),
                            f"{n} task(s) {rows[0].get('name')} wait to be scheduled", links, ["cluster_status"],
                            rows[0].get("job_id"), {f"task:{t.get('task_id')}" for t in rows}))  # fmt: skip
    return chains


def driver_chain(g: Graph, lines: Sequence[str] | None, chains: Sequence[Chain], job_id: str) -> Chain | None:
    """Where the driver's exception was raised, joined to the chain of the remote work that raised it."""
    from ray_mcp.diagnosis import tracebacks as diagnosis

    if not lines:
        return None
    tb = diagnosis.last_traceback(lines)
    if tb is None or not tb.exceptions:
        return None
    text = "\n".join(tb.lines + tb.remote)
    inner_type, inner_msg = tb.innermost or ("", "")
    outer_type = tb.outermost[0] if tb.outermost else inner_type
    where = tb.user_frame.short() if tb.user_frame else "?"
    excerpt = " | ".join(diagnosis.clip(line, 160) for line in tb.excerpt(8)[-4:])
    raised = Link("raised_in", f"the driver raised {diagnosis.short_type(outer_type)}"
                  + (f" ({diagnosis.short_type(inner_type)}: {clip(inner_msg, 120)})" if inner_type != outer_type else f": {clip(inner_msg, 140)}")
                  + f" at {where}", excerpt)  # fmt: skip
    # 1. Where it was first raised: "ray::f() (pid=…)" of a task or actor method, the innermost one.
    remote = first_raise(text)
    if remote:
        for c in chains:
            if any(g.entities.get(s) and g.entities[s].row.get("name") == remote["name"] for s in c.subjects):
                return merge(raised, c)
    # 2. An object whose owner died; 3. a named actor that is not where it was looked up.
    if parse_owner(text):
        return Chain(ROOT, "owner_died", "", [raised, *owner_chain(g, text)], job_id=job_id)
    m = re.search(r"Failed to look up actor(?: with name)? '(?P<name>[^']+)'", text)
    if m:
        return Chain(ROOT, "named_actor", "", [raised, *named_actor(g, m["name"])], job_id=job_id)
    # 4. A dead actor it names (ActorDiedError and kin).
    if re.search(r"ActorDied|RayActorError|ActorUnavailable|ActorUnschedulable", text):
        for ids in re.findall(
            r"actor_id=([0-9a-f]{32})|Actor(?:ID)?\(([0-9a-f]{32})\)|actor ([0-9a-f]{32})", text
        ):
            aid = next(i for i in ids if i)
            explained = next((c for c in chains if f"actor:{aid}" in c.subjects), None)
            if explained is not None:
                return merge(raised, explained)
            if aid in g.actors:
                return Chain(ROOT, "raised", "", [raised, *actor_end(g, g.actors[aid])], job_id=job_id,
                             subjects={f"actor:{aid}"})  # fmt: skip
    # 5. It timed out waiting: on what (open work, or work that was never placed).
    if "GetTimeoutError" in text:
        waiting = driver_wait(g, job_id)
        if waiting is not None:
            return Chain(
                ROOT, waiting.kind, "", [raised, *waiting.links], waiting.next_steps, job_id, waiting.subjects
            )
        unplaced = never_placed(g, job_id)
        if unplaced:
            return Chain(ROOT, wait_kind(unplaced), "", [raised, *unplaced], ["cluster_status"], job_id)
    # 6. The driver's own frames name the remote call it waited on: "ray.get(tokenize_shard.remote(1))".
    failed = [c for c in chains if c.kind not in ("retried", "cancelled", "killed")]
    for c in failed:
        for key in sorted(c.subjects):
            ent = g.entities.get(key)
            called = ent and (ent.row.get("name") or ent.row.get("class_name") or "").split(".")[-1]
            if called and re.search(rf"\b{re.escape(called)}\b", text):
                return merge(raised, c)
    if (
        diagnosis.is_ray_wrapper(outer_type)
        or "RayTaskError" in outer_type
        or outer_type.startswith("ray.exceptions.")
    ) and failed:
        return merge(raised, failed[0])
    return Chain(
        ROOT, "raised", "", [raised], [f"tail_logs job={job_id} grep='Traceback|Error' context=20"], job_id
    )


def never_placed(g: Graph, job_id: str) -> list[Link]:
    """The job's actors that died without ever starting, and why they could not be placed."""
    for row in g.actors.values():
        ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
        if row.get("job_id") != job_id or not ctx.get("never_started"):
            continue
        need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
        links = resource_wait(g, g.actor_label(row), need, f"actor:{row.get('actor_id')}")
        if links:
            return [Link("waits_on", f"{g.actor_label(row)} never started (it was never placed)"), *links]
    for pg in g.pgs.values():
        stats = pg.get("stats") or {}
        never = str(stats.get("end_to_end_creation_latency_us") or "0") == "0"
        if pg.get("creator_job_id") != job_id or pg.get("state") == "CREATED" or not never:
            continue
        links = pg_wait(g, pg)
        if links:
            return [
                Link(
                    "waits_on",
                    f"{g.pg_label(pg)} was never created ({stats.get('scheduling_state') or pg.get('state')})",
                ),
                *links,
            ]
    return []


def merge(raised: Link, chain: Chain) -> Chain:
    return Chain(ROOT, chain.kind, "", [raised, *chain.links], chain.next_steps, chain.job_id, chain.subjects)


def named_actor(g: Graph, name: str) -> list[Link]:
    job_ns = (g.ev.job or {}).get("runtime_env") or {}
    del job_ns
    found = [a for a in g.ev.related_actors if a.get("name") == name]
    alive = [a for a in found if a.get("state") != "DEAD"]
    if alive:
        a = alive[0]
        return [Link("created_by", f"an actor named '{name}' exists, but in namespace '{a.get('ray_namespace')}' "
                     f"(created by {g.job_label(a.get('job_id'))}); look it up with namespace='{a.get('ray_namespace')}'",
                     f"{g.actor_label(a)} state={a.get('state')} namespace={a.get('ray_namespace')}")]  # fmt: skip
    if found:
        a = found[0]
        return [Link("created_by", f"the actor named '{name}' (created by {g.job_label(a.get('job_id'))}) is DEAD"),
                *actor_end(g, a)]  # fmt: skip
    return [
        Link("created_by", f"no actor named '{name}' exists in any namespace (never created, or not yet)")
    ]


def stack_chain(ev: Evidence, job_id: str) -> Chain | None:
    """Evidence of the stacks source (issue 14 item 7): what the hung driver and workers are doing."""
    stacks = ev.stacks or {}
    summary = stacks.get("summary") or stacks.get("verdict")
    if not summary:
        return None
    lines = [str(x) for x in (stacks.get("lines") or stacks.get("groups") or [])][:6]
    return Chain(STUCK - 20, "hung", "No progress", [Link("waits_on", clip(str(summary), 200), " | ".join(lines))],
                 [f"stack_traces job={job_id}"], job_id)  # fmt: skip


def explain_job(ev: Evidence) -> tuple[str, list[Chain], list[str]]:
    """(status phrase, ranked chains, notes on other jobs) for one job."""
    g = Graph(ev)
    job = ev.job or {}
    job_id = str(job.get("job_id") or "")
    status = str(job.get("status") or "")
    phrase = job_status(ev)
    chains: list[Chain] = []
    if job_id:
        chains += failed_task_chains(g, job_id)
        chains += actor_chains(g, job_id, status)
        chains += retried_warnings(g, job_id)
        if status in ("RUNNING", "PENDING"):
            chains += pending_chains(g, job_id)
            dl = deadlock(g)
            if dl is not None:
                chains.append(dl)
    drv = (
        driver_chain(g, ev.driver_lines, chains, job_id)
        if status in ("FAILED", "STOPPED", "RUNNING")
        else None
    )
    if drv is not None:
        chains = [
            c for c in chains if not (c.subjects and c.subjects <= drv.subjects) and c.cause != drv.cause
        ]
        chains.append(drv)
    if status == "RUNNING" and job_id and not any(c.severity >= STUCK - 12 for c in chains):
        waiting = driver_wait(g, job_id)
        if waiting is not None and not any(c.subjects & waiting.subjects for c in chains if c.subjects):
            chains.append(waiting)
        hung = stack_chain(ev, job_id)
        if hung is not None:
            chains.append(hung)
    if status == "PENDING":
        need = entrypoint_need(job)
        if need:
            links = resource_wait(g, "the job's entrypoint", need)
            if links:
                chains.append(
                    Chain(
                        STUCK, wait_kind(links), "The driver cannot start", links, ["cluster_status"], job_id
                    )
                )
    message = str(job.get("message") or "")
    if status == "FAILED" and "running low on memory" in message:
        killed = [c for c in chains if c.kind == "oom"]
        if killed:  # the monitor's sweep took the job's own tasks too: they are the memory users to name
            killed[0].severity = ROOT + 2
            note = "the job failed: the memory monitor's sweep killed its driver's supervisor too"
            killed[0].links.insert(0, Link("ended_by", note, oom_quote(message)))
        else:  # the driver (or its job supervisor) itself was the monitor's pick
            node_id = (re.search(r"ID: ([0-9a-f]{56})", message) or [None, None])[1]
            top = top_memory_user(message)
            chains.append(Chain(ROOT + 1, "oom", "", [Link("ended_by",
                f"the job's driver process was killed by the memory monitor on {g.node_label(node_id)}: "
                f"{memory_summary(message)}" + (f"; the top memory user was {top}" if top else ""),
                oom_quote(message))], ["cluster_status (memory per node)", "list_tasks state=RUNNING (what else uses memory)"], job_id or None))  # fmt: skip
    if status in ("SUCCEEDED", "STOPPED"):
        for c in chains:  # context: ranked after the status itself
            c.severity = min(c.severity, CONTEXT)
    chains.sort(key=lambda c: -c.severity)
    return phrase, distinct(chains), other_jobs(g, job_id)


def distinct(chains: Sequence[Chain]) -> list[Chain]:
    """One chain per last link: the same cause reached from several symptoms is told once, where it ranks
    highest."""
    seen: set[str] = set()
    out = []
    for c in chains:
        key = re.sub(r"\([0-9a-f]{16,}\)", "", c.cause)
        if key and key in seen and c.severity > INFO:
            continue
        seen.add(key)
        out.append(c)
    return out


def top_memory_user(message: str) -> str:
    """The first row of the memory monitor's "Top 10 memory users" table: "ray::f (pid 123, 2.33 GB)"."""
    m = re.search(r"Top \d+ memory users:[^\n]*\n\s*(\d+)\s+([\d.]+)\s+(\S+)", message)
    return f"{m[3]} (pid {m[1]}, {m[2]} GB)" if m else ""


def entrypoint_need(job: Row) -> dict[str, float]:
    need = {}
    if num(job.get("entrypoint_num_cpus")):
        need["CPU"] = num(job["entrypoint_num_cpus"])
    if num(job.get("entrypoint_num_gpus")):
        need["GPU"] = num(job["entrypoint_num_gpus"])
    for k, v in (job.get("entrypoint_resources") or {}).items():
        need[k] = num(v)
    return need


def other_jobs(g: Graph, job_id: str) -> list[str]:
    failed = [j for jid, j in g.jobs.items() if jid != job_id and j.get("status") == "FAILED"]
    if not failed:
        return []
    return [f"Other jobs (not this one's problem): {len(failed)} FAILED ({names((str(j.get('job_id')) for j in failed), 4)}); "
            "cluster_health or diagnose_job for them."]  # fmt: skip


def verdict_line(phrase: str, chains: Sequence[Chain], limit: int = 300) -> str:
    """Status first, then the main chain's symptom and last link, within ``limit`` bytes."""
    main = chains[0] if chains else None
    if main is None or (
        phrase.startswith(("SUCCEEDED", "STOPPED"))
        and main.severity <= CONTEXT
        and main.kind not in ("retried",)
    ):
        line = phrase + ("; nothing failed" if main is None and phrase.startswith("SUCCEEDED") else "")
        if main is not None and main.severity > INFO:
            line += f"; context: {main.verdict}"
    elif phrase.startswith(("SUCCEEDED", "STOPPED")):
        line = f"{phrase}; warning: {main.cause}"
    else:
        sep = " but not healthy" if phrase.startswith("RUNNING") and main.severity > CONTEXT + 10 else ""
        line = f"{phrase}{sep}: {main.verdict}"
    return fit(line, limit)


def fit(line: str, limit: int) -> str:
    raw = line.encode()
    if len(raw) <= limit:
        return line
    return raw[: limit - 3].decode(errors="ignore") + "…"


# -- the cluster: every problem named by its cause the same way ---------------------------------------------


def node_chains(g: Graph) -> list[Chain]:
    """Each dead node, with what it took down (actors and tasks that died with it), newest death first."""
    chains = []
    dead = sorted(
        (n for n in g.nodes.values() if n.get("state") == "DEAD"), key=lambda n: -num(n.get("end_time_ms"))
    )
    for node in dead[:5]:
        nid = str(node.get("node_id"))
        actors = [a for a in g.actors.values() if a.get("node_id") == nid and a.get("state") in ("DEAD", "RESTARTING")
                  and not any(b in actor_end(g, a)[-1].text for b in BENIGN_ACTOR_END)]  # fmt: skip
        tasks = [t for t in final_attempts(g, None) if t.get("node_id") == nid and t.get("state") == "FAILED"]
        took = []
        if actors:
            took.append(f"{len(actors)} actor(s) ({names((str(a.get('class_name')) for a in actors), 3)})")
        if tasks:
            took.append(f"{len(tasks)} task(s)")
        jobs = sorted({str(x.get("job_id")) for x in [*actors, *tasks] if x.get("job_id")})
        links = node_death(g, nid)
        if took:
            links.append(Link("ended_by", f"it took down {' and '.join(took)} of job(s) {', '.join(jobs)}",
                              "; ".join(g.actor_label(a) for a in actors[:3])))  # fmt: skip
        recent = num(node.get("end_time_ms")) > g.ev.now_ms - 3600_000 if g.ev.now_ms else True
        chains.append(Chain(STUCK if recent else CONTEXT, "node_died", f"{g.node_label(nid)} is DEAD", links,
                            ["list_nodes state=DEAD"], None, {f"node:{nid}"}))  # fmt: skip
    return chains


def serve_chains(g: Graph) -> list[Chain]:
    chains = []
    for row in g.actors.values():
        cls = str(row.get("class_name") or "")
        if not cls.startswith("ServeReplica:") or row.get("state") not in (
            "PENDING_CREATION",
            "DEPENDENCIES_UNREADY",
        ):
            continue
        parts = cls.split(":")
        app, dep = (parts[1], parts[2]) if len(parts) >= 3 else ("?", cls)
        links = actor_wait(g, row)
        if links:
            chains.append(Chain(STUCK, wait_kind(links), f"a replica of Serve app '{app}' (deployment {dep}) cannot start",
                                links, [f"serve_status app={app}", "cluster_status"], row.get("job_id"),
                                {f"actor:{row.get('actor_id')}"}))  # fmt: skip
    # One chain per app and cause: replicas of the same deployment waiting for the same thing.
    merged: dict[str, Chain] = {}
    for c in chains:
        key = c.symptom + re.sub(r"\([0-9a-f]{16,}\)", "", c.cause)
        if key in merged:
            merged[key].subjects |= c.subjects
        else:
            merged[key] = c
    for c in merged.values():
        if len(c.subjects) > 1:
            c.symptom = c.symptom.replace("a replica of", f"{len(c.subjects)} replicas of").replace(
                "cannot", "can not"
            )
    return list(merged.values())


EVENT_KINDS = (
    ("oom", re.compile(r"running low on memory|killed due to memory pressure", re.I)),
    (
        "node",
        re.compile(r"node .*(dead|removed|added|died|failed)|health check|Adding node|Removing node", re.I),
    ),
    ("autoscaler", re.compile(r"autoscal|Resized|launch|terminat|upscal|downscal", re.I)),
    ("worker", re.compile(r"worker died|Worker exit", re.I)),
)


def event_lines(ev: Evidence, limit: int = 8, since_ms: float = 0.0) -> list[str]:
    """Cluster events worth an agent's attention, the most recent first, one line each."""
    out = []
    for e in reversed(ev.events or []):
        msg = str(e.get("message") or "")
        kind = next((k for k, p in EVENT_KINDS if p.search(msg)), None)
        if kind is None and e.get("severity") not in ("ERROR", "FATAL", "WARNING"):
            continue
        first = msg.strip().splitlines()[0] if msg.strip() else ""
        if kind == "oom":
            first = f"OOM kill: {memory_summary(msg)}; " + clip(
                " ".join(re.findall(r"Selected to kill: \(([^)]*)\)?", msg))[:1], 100
            )
        out.append(
            f"{e.get('time') or '?'} {e.get('severity') or ''} {e.get('source_type') or ''}: {clip(first, 200)}"
        )
        if len(out) >= limit:
            break
    return out


def explain_cluster(ev: Evidence) -> list[Chain]:
    g = Graph(ev)
    chains = node_chains(g)
    chains += serve_chains(g)
    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    for c in [*failed_task_chains(g, None), *actor_chains(g, None, "RUNNING"), *pending_chains(g, None)]:
        if c.subjects and c.subjects <= covered:
            continue
        if c.kind in ("cancelled", "killed"):
            continue
        c.symptom = f"{c.symptom} [{g.job_label(c.job_id)}]" if c.job_id else c.symptom
        if c.kind in ("failed", "raised", "owner_died", "worker_crash", "oom", "node_died", "pg_removed"):
            c.severity = min(c.severity, CONTEXT + 10)
        chains.append(c)
    chains.sort(key=lambda c: -c.severity)
    return chains
