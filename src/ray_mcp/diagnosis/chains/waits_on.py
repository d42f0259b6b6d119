"""What pending work waits on (an actor, a placement group, arguments, resources), and the wait-for graph
of open tasks: deadlock cycles and what the driver is blocked on."""

from __future__ import annotations

from ray_mcp.diagnosis.chains.constraints import constrained_wait
from ray_mcp.diagnosis.chains.ended_by import actor_end
from ray_mcp.diagnosis.chains.holds import pg_wait
from ray_mcp.diagnosis.chains.links import CONTEXT, STUCK, Chain, Link
from ray_mcp.diagnosis.graph import Graph, Row, ago, ms_clock, names, num


def actor_wait(g: Graph, row: Row) -> list[Link]:
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
    return constrained_wait(g, label, row, f"actor:{row.get('actor_id')}") or [
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
                *actor_wait(g, actor),
            ]
        return []
    pg = g.pgs.get(str(t.get("placement_group_id") or ""))
    if pg is not None and pg.get("state") in ("PENDING", "RESCHEDULING"):
        return [Link("waits_on", f"{label} waits for its {g.pg_label(pg)}"), *pg_wait(g, pg)]
    if state == "PENDING_ARGS_AVAIL":
        return [Link("waits_on", f"{label} waits for its arguments (objects not computed yet)")]
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


def deadlock(g: Graph) -> Chain | None:
    open_ = open_tasks(g)
    cycle = find_cycle(waits_for(open_))
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
    in_cycle = dict.fromkeys(
        str(open_[t].get("actor_id")) for t in cycle
    )  # in cycle order: one answer per run
    actors = names(g.actor_label(g.actors[a]) for a in in_cycle if a in g.actors)
    links.append(
        Link(
            "waits_on",
            f"deadlock: {len(cycle)} calls wait for each other in a cycle, {cycle_names(open_, cycle)} "
            f"({actors or 'tasks'}); none can finish",
        )
    )
    return Chain(
        STUCK + 5,
        "deadlock",
        "",
        links,
        [
            "stack_traces of the actors in the cycle to see the ray.get calls",
            "give the actors max_concurrency > 1 or make the inner call async",
        ],
        subjects={f"task:{t}" for t in cycle},
    )


def cycle_names(open_: dict[str, Row], cycle: list[str]) -> str:
    """ "Planner.plan -> Planner.step -> Planner.plan": the calls of a cycle by name, back to the first."""
    called = [str(open_[t].get("name") or "?") for t in cycle]
    return " -> ".join([*called, called[0]])


def driver_wait(g: Graph, job_id: str) -> Chain | None:
    """Follow what the driver waits on, down to the last open task: pending (why) or running (stacks)."""
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
        links.append(
            Link(
                "waits_on",
                f"{g.task_label(last)} has been RUNNING for {ago(started, g.ev.now_ms)} on "
                f"{g.node_label(last.get('node_id'))} (pid {last.get('worker_pid') or '?'})",
                f"state RUNNING since {ms_clock(started)}",
            )
        )
    else:
        links.append(Link("waits_on", f"{g.task_label(last)} is {last.get('state')}"))
    stuck = bool(why) or last.get("state") != "RUNNING"
    return Chain(
        STUCK if stuck else CONTEXT,
        "waiting",
        "The driver is blocked",
        links,
        [
            f"stack_traces job={job_id}"
            if not stuck
            else f"cluster_status; list_tasks job={job_id} state=PENDING_NODE_ASSIGNMENT"
        ],
        job_id,
        {f"task:{t}" for t in path},
    )
