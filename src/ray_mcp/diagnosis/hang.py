"""Is a RUNNING job stuck, and on what? The reading of its task attempts and stacks (pure).

"No progress" is read from evidence one call can get: the job's tasks from the State API. A job counts as
stalled when it has run for at least ``NO_PROGRESS_S`` and no task of it finished, started or was submitted in
the last ``NO_PROGRESS_S``. (Ray's log listing has no file times, so logs cannot tell progress cheaply.)

For a stalled job, the "waits on" links are followed from the driver: a task the driver submitted that has not
finished; a running task's own unfinished children; an actor task queued behind the method running on the same
actor; a task pending on resources, arguments or object store memory. A cycle is a deadlock. The stacks of the
job's processes (stack_traces, read by evidence.py only for a stalled job) say where each waits in the code.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray_mcp import models
from ray_mcp.diagnosis.facts import CONTEXT, STUCK, Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import GraphInputs, amount, amounts, bookkeeping
from ray_mcp.diagnosis.tracebacks import cut_text
from ray_mcp.limits import (
    DRIVER_WAITS_QUOTED,
    EVIDENCE_ITEMS,
    STALL_LINE_CHARS,
    STALL_STACK_GROUPS,
    TASKS_READ,
)
from ray_mcp.shaping import stacks

NO_PROGRESS_S = 30.0  # a RUNNING job with no task finishing, starting or submitted for this long is stalled
RUNNING_STATES = ("RUNNING", "RUNNING_IN_RAY_GET", "RUNNING_IN_RAY_WAIT")
QUEUED_STATES = ("PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", "SUBMITTED_TO_WORKER")
WHY_PENDING = {
    "PENDING_ARGS_AVAIL": "waits for its arguments (objects that other tasks have not produced yet)",
    "PENDING_ARGS_FETCH": "fetches its arguments from other nodes",
    "PENDING_OBJ_STORE_MEM_AVAIL": "waits for object store memory",
    "PENDING_ACTOR_TASK_ARGS_FETCH": "fetches its arguments",
    "NIL": "has not been scheduled yet",
}


@dataclass
class Task:
    task_id: str
    name: str
    state: str
    actor_id: str | None
    parent_task_id: str | None
    worker_pid: int | None
    node_id: str | None
    required: dict[str, float]
    since_ms: int | None  # start (running) or creation (pending)


@dataclass
class WaitLink:
    """One "waits on" edge: ``waiter`` cannot go on until ``target`` does (an object, a task, a queue, a resource)."""

    waiter: str  # "driver" or a task id
    target: str  # a task id, or a description of a resource / argument / code position
    kind: str  # task | queue | resource | arguments | code
    detail: str


@dataclass
class HangEvidence:
    status: str  # stalled | progressing | unknown
    running_s: float
    idle_s: float  # since the last task finished, started or was submitted (or the job started)
    tasks_checked: int
    tasks_total: int
    unfinished: dict[str, Task] = field(default_factory=dict)
    links: list[WaitLink] = field(default_factory=list)
    stacks: models.StackTraces | None = None
    notes: list[str] = field(default_factory=list)


def _ms(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "", 0, "0") else None
    except (TypeError, ValueError):
        return None


def _task(row: Mapping[str, Any]) -> Task:
    state = str(row.get("state") or "NIL")
    since = _ms(row.get("start_time_ms")) if state in RUNNING_STATES else _ms(row.get("creation_time_ms"))
    return Task(
        task_id=str(row.get("task_id")),
        name=str(row.get("name") or row.get("func_or_class_name") or "?"),
        state=state,
        actor_id=row.get("actor_id") or None,
        parent_task_id=row.get("parent_task_id") or None,
        worker_pid=int(row["worker_pid"]) if row.get("worker_pid") else None,
        node_id=row.get("node_id") or None,
        required={str(k): float(v) for k, v in (row.get("required_resources") or {}).items() if v},
        since_ms=since,
    )


def reading(ev: GraphInputs) -> HangEvidence | None:
    """The progress of a RUNNING job from its task attempts (None for any other status, or one too young to
    call stalled), with the stacks when they were read."""
    details = ev.job or {}
    if details.get("status") != "RUNNING" or not details.get("job_id") or ev.tasks is None:
        return None
    now_ms = ev.now_ms or time.time() * 1000
    started = _ms(details.get("start_time")) or now_ms
    if now_ms - started < NO_PROGRESS_S * 1000:
        return None
    rows = [r for r in ev.tasks if not bookkeeping(r)]
    marks = [started]
    for row in rows:
        marks += [
            m for m in (_ms(row.get(k)) for k in ("end_time_ms", "start_time_ms", "creation_time_ms")) if m
        ]
    idle_s = max(0.0, (now_ms - max(marks)) / 1000)
    running_s = max(0.0, (now_ms - started) / 1000)
    latest: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for row in rows:
        attempt = int(row.get("attempt_number") or 0)
        if row.get("task_id") and attempt >= latest.get(str(row["task_id"]), (-1, {}))[0]:
            latest[str(row["task_id"])] = (attempt, row)
    unfinished = {
        tid: _task(r) for tid, (_a, r) in latest.items() if r.get("state") not in ("FAILED", "FINISHED")
    }
    complete = (
        len(ev.tasks) < TASKS_READ
    )  # the gather reads at most this many (a full read may have left some)
    status = "progressing" if idle_s < NO_PROGRESS_S else "stalled" if complete else "unknown"
    evidence = HangEvidence(status, running_s, idle_s, len(rows), len(rows), unfinished)
    if ev.stacks:
        evidence.stacks = models.StackTraces.model_validate(ev.stacks)
    return evidence


# -- reading ------------------------------------------------------------------------------------------------


def wait_links(tasks: Mapping[str, Task], node_totals: Sequence[Mapping[str, float]]) -> list[WaitLink]:
    """Every "waits on" edge between the driver, the unfinished tasks, actor queues and resources."""
    links: list[WaitLink] = []
    running_on: dict[str, list[Task]] = {}
    for t in tasks.values():
        if t.actor_id and t.state in RUNNING_STATES:
            running_on.setdefault(t.actor_id, []).append(t)
    for t in tasks.values():
        parent = t.parent_task_id if t.parent_task_id and t.parent_task_id in tasks else "driver"
        if parent == "driver" or tasks[parent].state in RUNNING_STATES:
            links.append(WaitLink(parent, t.task_id, "task", f"{t.name} is {t.state}"))
        if t.state in QUEUED_STATES and t.actor_id:
            for r in running_on.get(t.actor_id, []):
                if r.task_id != t.task_id:
                    links.append(
                        WaitLink(t.task_id, r.task_id, "queue", f"queued behind {r.name} on its actor")
                    )
        elif t.state == "PENDING_NODE_ASSIGNMENT":
            short = [
                f"{k} {amount(k, v)}"
                for k, v in t.required.items()
                if v > max((n.get(k, 0) for n in node_totals), default=0)
            ]
            why = (
                f"needs {', '.join(short)}: no node has that much (infeasible)"
                if short and node_totals
                else f"needs {{{amounts(t.required)}}} and is not scheduled yet"
                if t.required
                else "is not scheduled yet"
            )  # who holds it, or that it looks free, is the chains' to say (holds.py): never guessed here
            links.append(WaitLink(t.task_id, why, "resource", why))
        elif t.state in WHY_PENDING:
            links.append(WaitLink(t.task_id, WHY_PENDING[t.state], "arguments", WHY_PENDING[t.state]))
    return links


def chain(links: Sequence[WaitLink], start: str = "driver", depth: int = 8) -> tuple[list[WaitLink], bool]:
    """The path of "waits on" links from ``start``: a cycle (a deadlock) if there is one, else the deepest.

    A depth-first walk that visits each task once, so a job with thousands of tasks costs linear time.
    """
    out: dict[str, list[WaitLink]] = {}
    for link in links:
        out.setdefault(link.waiter, []).append(link)
    best: list[WaitLink] = []
    done: set[str] = set()

    def walk(node: str, path: list[WaitLink], on_path: set[str]) -> list[WaitLink] | None:
        nonlocal best
        if len(path) > len(best):
            best = list(path)
        if len(path) >= depth or node in done:
            return None
        for link in out.get(node, []):
            if link.target in on_path:
                return [*path, link]  # back to a task already on the path: a cycle
            found = walk(link.target, [*path, link], on_path | {link.target})
            if found:
                return found
        done.add(node)
        return None

    cycle = walk(start, [], {start})
    return (cycle, True) if cycle else (best, False)


def _who(node: str, tasks: Mapping[str, Task]) -> str:
    if node == "driver":
        return "the driver"
    t = tasks.get(node)
    if t is None:
        return node
    where = f", pid {t.worker_pid}" if t.worker_pid and t.state in RUNNING_STATES else ""
    return f"{t.name} ({t.state}{where})"


def _stack_of(t: Task | None, groups: Sequence[models.StackGroup]) -> models.StackGroup | None:
    if t is None or not t.worker_pid:
        return None
    return next((g for g in groups if any(p.split("@")[0] == str(t.worker_pid) for p in g.pids)), None)


def _driver_waits(
    links: Sequence[WaitLink], tasks: Mapping[str, Task], groups: Sequence[models.StackGroup]
) -> list[Link]:
    """What the driver waits on directly, grouped: '1 of 4 Trainer.epoch (RUNNING) [1 of 4 Trainer: waiting at ...]'."""
    direct = [tasks[link.target] for link in links if link.waiter == "driver" and link.target in tasks]
    counts: dict[tuple[str, str, int], int] = {}
    for t in direct:
        stack = _stack_of(t, groups)
        key = (t.name, t.state, groups.index(stack) if stack is not None else -1)
        counts[key] = counts.get(key, 0) + 1
    if len(counts) < 2:
        return []  # one kind of wait: the chain below says it
    per_name: dict[str, int] = {}
    for (name, _s, _g), n in counts.items():
        per_name[name] = per_name.get(name, 0) + n
    ranked = sorted(counts.items(), key=lambda kv: kv[1])  # the odd ones out first
    return [
        DRIVER_WAITS(n=n, of=per_name[name], name=name, state=state, stack=groups[i] if i >= 0 else None)
        for (name, state, i), n in ranked[:DRIVER_WAITS_QUOTED]
    ]


def _stack_words(group: models.StackGroup | None) -> str:
    return f" [{stacks.group_line(group)}]" if group is not None else ""


def _wait_words(f: Link) -> str:
    link, tasks = f["link"], f["tasks"]
    target = _who(link.target, tasks) if link.kind in ("task", "queue") else link.detail
    verb = {"task": "waits on", "queue": "is queued behind"}.get(link.kind, "")
    line = f"{_who(link.waiter, tasks)} {verb} {target}".replace("  ", " ") + _stack_words(f["stack"])
    return f"waits on: {cut_text(line, STALL_LINE_CHARS)}"


def _moved(e: HangEvidence) -> str:
    """ "no task activity for 44 s": how long nothing moved (in the tasks checked, when not all were read)."""
    moved = f"no task activity for {e.idle_s:.0f} s"
    return moved + (f" in the {e.tasks_checked:,} tasks checked" if e.status == "unknown" else "")


def _stall_words(f: Link) -> str:
    e, path, groups, tasks = f["evidence"], f["path"], f["groups"], f["evidence"].unfinished
    moved = f"RUNNING {e.running_s:.0f} s, {_moved(e)}"
    if f["cycle"]:
        names = " -> ".join(_who(link.target, tasks).split(" (")[0] for link in path)
        title = f"Deadlock ({moved}): the driver -> {names}"
    elif groups and not (path and groups[0].role == "driver"):
        title = f"No progress ({moved}): {stacks.group_line(groups[0])}"
        if len(groups) > 1 and groups[1].role == "driver" and path:  # its ray.get: on what, by name
            title += f"; the driver waits on {path_words(path, tasks, [])}"
        elif len(groups) > 1 and not stacks.is_idle_group(groups[1]):
            title += f"; {stacks.group_line(groups[1])}"
    elif path:  # the driver's own stack says only "blocked in ray.get": the path says on what
        title = f"No progress ({moved}): the driver waits on {path_words(path, tasks, groups)}"
    else:
        title = f"No progress ({moved}); the job's stacks could not be read"
    return cut_text(title, STALL_LINE_CHARS)


STALLED = Say("stalled", Edge.WAITS_ON, _stall_words)
DRIVER_WAITS = Say(
    "driver_waits",
    Edge.WAITS_ON,
    lambda f: (
        f"waits on: the driver waits on {f['n']} of {f['of']} {f['name']} ({f['state']}){_stack_words(f['stack'])}"
    ),
)
WAITS = Say("waits", Edge.WAITS_ON, _wait_words)
STACK = Say("stack", Edge.WAITS_ON, lambda f: f"stack: {stacks.group_line(f['group'])}")
PARTLY_READ = Say(
    "partly_read",
    Edge.WAITS_ON,
    lambda f: f"Progress read from the first {f['tasks']:,} tasks (Ray returns them in id order).",
)


def idle_words(stall: Link) -> str:
    """How long a stalled job did not move, for the verdict of the chain that says why."""
    return _moved(stall["evidence"])


def idle_words_of(e: HangEvidence) -> str:
    """How long nothing moved, from the reading itself (for a rule that says why before the stall is made)."""
    return _moved(e)


def stall_chain(e: HangEvidence, node_totals: Sequence[Mapping[str, float]], job: str) -> Chain | None:
    """The stall: how long nothing moved, where the processes wait, and the path from the driver."""
    if e.status == "progressing":
        return None
    links = wait_links(e.unfinished, node_totals)
    path, cycle = chain(links)
    groups = e.stacks.groups if e.stacks else []
    evidence = _driver_waits(links, e.unfinished, groups) if not cycle else []
    for link in path:
        stack = _stack_of(e.unfinished.get(link.target), groups) if link.kind in ("task", "queue") else None
        evidence.append(WAITS(link=link, tasks=e.unfinished, stack=stack))
    evidence += [STACK(group=g) for g in groups[:STALL_STACK_GROUPS]]
    if e.tasks_checked and e.status == "unknown":
        evidence.append(PARTLY_READ(tasks=e.tasks_checked))
    busy = any(g.state == "active" and not g.blocked_in for g in groups if not stacks.is_idle_group(g))
    severity = STUCK + 8 if (cycle or (path and not busy)) else STUCK if not busy else CONTEXT + 25
    if e.status == "unknown":  # not every task was read: the idle time is of the ones read, so it never leads
        severity = min(severity - 20, CONTEXT + 5)  # a finding that rests on every task (a trend) ranks above
    steps = [f"stack_traces job={job} for every process's stack"]
    if busy:
        steps.append("cpu_profile actor_id=<id> (or pid + node) of the busy process")
    steps.append(f"tail_logs job={job} for the driver's last lines")
    title = STALLED(evidence=e, path=path, cycle=cycle, groups=groups)
    return Chain(
        severity, Kind.HANG, None, [title], steps, None, {"stall"}, details=evidence[:EVIDENCE_ITEMS]
    )


def path_words(
    path: Sequence[WaitLink], tasks: Mapping[str, Task], groups: Sequence[models.StackGroup]
) -> str:
    """ "Monitor.latest, queued behind Monitor.poll [1 of 1 Monitor: waiting at main.py:14 in Monitor.poll]":
    each call on the driver's path by name, how it waits, and the stack of the last one."""
    words: list[str] = []
    for link in path:
        t = tasks.get(link.target)
        if link.kind == "task" and t is not None:
            words.append(("which waits on " if words else "") + t.name)
        elif link.kind == "queue" and t is not None:
            words.append(f"queued behind {t.name}")
        else:
            words.append(f"which {link.detail}")
    end = tasks.get(path[-1].target) if path[-1].kind in ("task", "queue") else None
    stack = _stack_of(end, groups)
    state = f" ({end.state})" if end is not None else ""
    return ", ".join(words) + state + (f" [{stacks.group_line(stack)}]" if stack else "")
