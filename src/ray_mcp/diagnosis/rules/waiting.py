"""Waiting work: what a pending actor or task waits on (its placement group, its arguments, its constraints), the
wait-for graph of open tasks (a cycle is a deadlock), and what the driver is blocked on."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ray_mcp.diagnosis.facts import CONTEXT, STUCK, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, ago, amounts, ms_clock, names, num
from ray_mcp.diagnosis.registry import On, ended, rule
from ray_mcp.diagnosis.rules.placement import constrained_wait, pg_wait

CORE_DOC = "ray-docs://reference/02-ray-core-tasks"
PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"

RESTARTING = Say("restarting", Edge.WAITS_ON, said("{subject} is RESTARTING (restart {restarts})"))
WAITS_FOR_PG = Say("waits_for_pg", Edge.WAITS_ON, said("{subject} waits for its {pg}"))
PG_GONE = Say("pg_gone", Edge.ENDED_BY, said("{subject} cannot be scheduled: its {pg} was removed"))
CONSTRUCTOR_ARGS = Say(
    "constructor_args",
    Edge.WAITS_ON,
    said("{subject} waits for the arguments of its constructor (objects not computed yet)"),
)
NO_WORKER_YET = Say(
    "no_worker_yet", Edge.WAITS_ON, said("{subject} is PENDING_CREATION: waiting for a worker process")
)
SENT_TO_DEAD = Say("sent_to_dead", Edge.WAITS_ON, said("{subject} was sent to a dead actor"))
WAITS_FOR_ACTOR = Say("waits_for_actor", Edge.WAITS_ON, said("{subject} waits for {actor}"))
TASK_ARGS = Say(
    "task_args", Edge.WAITS_ON, said("{subject} waits for its arguments (objects not computed yet)")
)


def _on(f: Link) -> str:
    return f" on {f['actor']}" if f["actor"] else ""


CALLED_GET = Say(
    "called_get",
    Edge.WAITS_ON,
    lambda f: f"{f.subject}{_on(f)} is RUNNING and waits for {f['next']} (it called ray.get on it)",
)
QUEUED_BEHIND = Say(
    "queued_behind",
    Edge.WAITS_ON,
    lambda f: f"{f.subject}{_on(f)} is queued behind {f['next']}, which occupies the actor",
)
DEADLOCK = Say(
    "deadlock",
    Edge.WAITS_ON,
    said("deadlock: {calls} calls wait for each other in a cycle, {cycle} ({actors}); none can finish"),
)
DRIVER_WAITS_ON = Say(
    "driver_waits_on",
    Edge.WAITS_ON,
    lambda f: f"the driver waits on {f['task']}" + (f" ({f['open']} open)" if f["open"] > 1 else ""),
)
WHICH_WAITS_ON = Say("which_waits_on", Edge.WAITS_ON, said("which waits on {task}"))
RUNNING_FOR = Say(
    "running_for", Edge.WAITS_ON, said("{subject} has been RUNNING for {since} on {node} (pid {pid})")
)
IN_STATE = Say("in_state", Edge.WAITS_ON, said("{subject} is {state}"))
DRIVER_BLOCKED = Say("driver_blocked", Edge.WAITS_ON, said("The driver is blocked"), leads=True)


@rule(On.HELPER, Kind.WAITING, reads=("actors", "pgs", "nodes"))
def actor_wait(g: Graph, row: Row) -> list[Link]:
    """What a pending actor waits on: its placement group (and why that waits), its constructor's arguments,
    its constraints on the nodes, or a worker process."""
    label = g.actor_label(row)
    state = row.get("state")
    if state == "RESTARTING":
        return [RESTARTING(label, restarts=int(num(row.get("num_restarts"))))]
    if state not in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
        return []
    pg = g.pgs.get(str(row.get("placement_group_id") or ""))
    if pg is not None and pg.get("state") in ("PENDING", "RESCHEDULING"):
        pg_id = f"placement_group_id={pg.get('placement_group_id')}"
        return [WAITS_FOR_PG(label, pg_id, pg=g.pg_label(pg)), *pg_wait(g, pg)]
    if pg is not None and pg.get("state") == "REMOVED":
        return [PG_GONE(label, pg=g.pg_label(pg))]
    if state == "DEPENDENCIES_UNREADY":
        return [CONSTRUCTOR_ARGS(label)]
    return constrained_wait(g, label, row, f"actor:{row.get('actor_id')}") or [NO_WORKER_YET(label)]


@rule(On.HELPER, Kind.WAITING, reads=("tasks", "actors", "pgs", "nodes"))
def task_wait(g: Graph, t: Row, depth: int = 0) -> list[Link]:
    """What a pending task waits on: a dead or pending actor (an actor call), its placement group, its arguments,
    its constraints on the nodes."""
    label = g.task_label(t)
    state = str(t.get("state") or "")
    if t.get("actor_id") and t.get("type") == "ACTOR_TASK":
        actor = g.actors.get(str(t["actor_id"]))
        if actor is None or actor.get("state") == "ALIVE":
            return []
        if actor.get("state") == "DEAD":
            return [SENT_TO_DEAD(label), *ended(On.ACTOR_END, g, actor, depth + 1)]
        return [WAITS_FOR_ACTOR(label, actor=g.actor_label(actor)), *actor_wait(g, actor)]
    pg = g.pgs.get(str(t.get("placement_group_id") or ""))
    if pg is not None and pg.get("state") in ("PENDING", "RESCHEDULING"):
        return [WAITS_FOR_PG(label, pg=g.pg_label(pg)), *pg_wait(g, pg)]
    if state == "PENDING_ARGS_AVAIL":
        return [TASK_ARGS(label)]
    if state == "PENDING_NODE_ASSIGNMENT":
        return constrained_wait(g, label, t, f"task:{t.get('task_id')}")
    return []


# -- wait-for graph: deadlocks and what the driver is blocked on ---------------------------------------------


def open_tasks(g: Graph) -> dict[str, Row]:
    return {
        tid: rows[-1]
        for tid, rows in g.attempts.items()
        if rows[-1].get("state") not in ("FINISHED", "FAILED")
    }


def waits_for(open_: dict[str, Row]) -> dict[str, list[str]]:
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


@rule(
    On.JOB,
    Kind.DEADLOCK,
    order=80,
    severity=STUCK + 5,
    refs=(CORE_DOC,),
    next_steps=(
        "stack_traces of the actors in the cycle to see the ray.get calls",
        "give the actors max_concurrency > 1 or make the inner call async",
    ),
    reads=("tasks", "actors"),
)
def deadlock(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Calls of a RUNNING (or PENDING) job that wait for each other in a cycle (a call's ray.get on another, an
    actor call queued behind the one occupying its actor): none can finish."""
    if not job_id or status not in ("RUNNING", "PENDING"):
        return []
    open_ = open_tasks(g)
    cycle = find_cycle(waits_for(open_))
    if not cycle:
        return []
    links = []
    for i, tid in enumerate(cycle):
        t = open_[tid]
        nxt = g.task_label(open_[cycle[(i + 1) % len(cycle)]])
        actor = g.actors.get(str(t.get("actor_id") or ""))
        quote = f"state={t.get('state')}, parent_task_id={t.get('parent_task_id')}"
        say = CALLED_GET if t.get("state") == "RUNNING" else QUEUED_BEHIND
        links.append(say(g.task_label(t), quote, actor=g.actor_label(actor) if actor else "", next=nxt))
    in_cycle = dict.fromkeys(
        str(open_[t].get("actor_id")) for t in cycle
    )  # in cycle order: one answer per run
    actors = names(g.actor_label(g.actors[a]) for a in in_cycle if a in g.actors)
    called = [str(open_[t].get("name") or "?") for t in cycle]
    links.append(
        DEADLOCK(calls=len(cycle), cycle=" -> ".join([*called, called[0]]), actors=actors or "tasks")
    )
    return [
        Chain(
            STUCK + 5,
            Kind.DEADLOCK,
            None,
            links,
            list(deadlock.next_steps),
            subjects={f"task:{t}" for t in cycle},
        )
    ]


@rule(On.HELPER, Kind.WAITING, refs=(PG_DOC,), reads=("tasks", "actors", "pgs", "nodes"))
def driver_wait(g: Graph, job_id: str) -> Chain | None:
    """What the driver waits on, down to the last open task: why it is pending, or how long it has run."""
    open_ = open_tasks(g)
    edges = waits_for(open_)
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
    links = [DRIVER_WAITS_ON(task=g.task_label(open_[path[0]]), open=len(frontier))]
    links += [WHICH_WAITS_ON(task=g.task_label(open_[tid])) for tid in path[1:]]
    why = task_wait(g, last)
    links += why or [last_state(g, last)]
    stuck = bool(why) or last.get("state") != "RUNNING"
    step = (
        f"cluster_status; list_tasks job={job_id} state=PENDING_NODE_ASSIGNMENT"
        if stuck
        else f"stack_traces job={job_id}"
    )
    subjects = {f"task:{t}" for t in path}
    return Chain(STUCK if stuck else CONTEXT, Kind.WAITING, DRIVER_BLOCKED(), links, [step], job_id, subjects)


def last_state(g: Graph, t: Row) -> Link:
    """The last task on the driver's path: how long it has been RUNNING, and where, or its state."""
    if t.get("state") != "RUNNING":
        return IN_STATE(g.task_label(t), state=t.get("state"))
    started = next(
        (e.get("created_ms") for e in reversed(t.get("events") or []) if e.get("state") == "RUNNING"), None
    )
    return RUNNING_FOR(
        g.task_label(t),
        f"state RUNNING since {ms_clock(started)}",
        since=ago(started, g.ev.now_ms),
        node=g.node_label(t.get("node_id")),
        pid=t.get("worker_pid") or "?",
    )


SELF_DEADLOCK = Say(
    "pg_self_deadlock",
    Edge.WAITS_ON,
    lambda f: (
        f"self-deadlock in {f['pg']}: {f['waiters']} ({f['count']} task(s)) captured into the group (child tasks "
        f"inherit it) need {{{amounts(f.resources)}}} each of it, but {f['holders']} "
        f"hold{'s' if f['one_holder'] else ''} the group's {{{f['held']}}} and {f['caller']} waits on "
        f"{'it' if f['count'] == 1 else 'them'}; "
        "they can never start (not infeasible: the group is full of its own work)"
    ),
)


# A placement group's resources as Ray names them inside it ("CPU_group_<pg id>", "CPU_group_0_<pg id>") and its
# bundles' own marker ("bundle_group_…"): the resource a bundle reserved, by its plain name.
IN_GROUP = re.compile(r"_group_(?:\d+_)?[0-9a-f]+$")


def _plain(resources: Mapping[str, object]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in resources.items():
        if not k.startswith("bundle_group_") and num(v) > 0:
            out[IN_GROUP.sub("", k)] = max(out.get(IN_GROUP.sub("", k), 0.0), num(v))
    return out


def _ancestors(g: Graph, t: Row, open_: dict[str, Row]) -> list[Row]:
    """The open tasks ``t`` was called from, nearest first (its caller, that caller's caller, …)."""
    out: list[Row] = []
    parent = str(t.get("parent_task_id") or "")
    while parent in open_ and len(out) < len(open_):
        out.append(open_[parent])
        parent = str(open_[parent].get("parent_task_id") or "")
    return out


@rule(
    On.JOB,
    Kind.DEADLOCK,
    order=79,
    severity=STUCK + 5,
    refs=(CORE_DOC,),
    next_steps=(
        "schedule the children outside the group (placement_group_capture_child_tasks=False, or "
        'scheduling_strategy="DEFAULT") or reserve bundles for them',
        "pg_status",
    ),
    reads=("tasks", "actors", "pgs"),
)
def pg_self_deadlock(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Work captured into a placement group (child tasks inherit their caller's group) that waits for bundles
    the group's own actors or tasks hold while its caller waits on it: a self-deadlock, not infeasible."""
    if not job_id or status not in ("RUNNING", "PENDING"):
        return []
    open_ = open_tasks(g)
    waiting: dict[str, list[Row]] = {}
    for t in open_.values():
        pg = g.pgs.get(str(t.get("placement_group_id") or ""))
        if t.get("state") == "PENDING_NODE_ASSIGNMENT" and pg is not None and pg.get("state") == "CREATED":
            waiting.setdefault(str(pg["placement_group_id"]), []).append(t)
    out = []
    for pg_id, tasks in waiting.items():
        pg = g.pgs[pg_id]
        capacity: dict[str, float] = {}
        for b in pg.get("bundles") or []:
            for k, v in (b.get("unit_resources") or {}).items():
                capacity[k] = capacity.get(k, 0.0) + num(v)
        in_group = [
            (f"actor:{a.get('actor_id')}", g.actor_label(a), a)
            for a in g.actors.values()
            if a.get("state") == "ALIVE" and str(a.get("placement_group_id") or "") == pg_id
        ] + [
            (f"task:{t.get('task_id')}", g.task_label(t), t)
            for t in open_.values()
            if t.get("state") == "RUNNING"
            and t.get("type") == "NORMAL_TASK"
            and str(t.get("placement_group_id") or "") == pg_id
        ]
        held: dict[str, float] = {}
        for _key, _label, row in in_group:
            for k, v in _plain(row.get("required_resources") or {}).items():
                held[k] = held.get(k, 0.0) + v
        first = tasks[0]
        need = _plain(first.get("required_resources") or {})
        short = [k for k, v in need.items() if capacity.get(k, 0.0) - held.get(k, 0.0) + 1e-9 < v]
        callers = _ancestors(g, first, open_)
        caller_keys = {f"task:{c.get('task_id')}" for c in callers} | {
            f"actor:{c.get('actor_id')}" for c in callers if c.get("actor_id")
        }
        holders = [(key, label) for key, label, _row in in_group if key in caller_keys]
        if not short or not holders or not callers:
            continue
        link = SELF_DEADLOCK(
            "",
            f"placement_group_id={pg_id} bundles={len(pg.get('bundles') or [])} state=CREATED",
            need,
            pg=g.pg_label(pg),
            waiters=names(str(t.get("name")) for t in tasks),
            count=len(tasks),
            holders=names(label for _key, label in holders),
            one_holder=len(holders) == 1,
            held=amounts({k: held[k] for k in short}),
            caller=callers[0].get("name"),
        )
        steps = [s.format(job_id=job_id) for s in pg_self_deadlock.next_steps]
        subjects = {f"task:{t.get('task_id')}" for t in tasks} | {key for key, _label in holders}
        out.append(Chain(STUCK + 5, Kind.DEADLOCK, None, [link], steps, job_id, subjects))
    return out
