"""Nodes: a node that died (or is gone) and what it took down, a node being drained while work runs on it, work
bound by hard node affinity to a node that is gone."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import CONTEXT, STUCK, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, ms_clock, names, num
from ray_mcp.diagnosis.recognise import DRAINED, NODE_ID, exc_quote, node_affinity
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import DEAD_NODES_SHOWN, EVENT_CHARS, NAMES_SHOWN, NODE_DEATH_CHARS, QUOTE_CHARS
from ray_mcp.text import one_line, quoted

FT_DOC = "ray-docs://reference/14-fault-tolerance"

# The GCS marks a node DEAD only after its health checks fail (period x threshold, plus their timeout, slower
# under load): what died on it up to this long before it was marked, died with it.
HEALTH_CHECK_LAG_MS = 180_000
# The task errors a node's death gives the work on it (not the work's own exceptions).
SYSTEM_ENDS = ("NODE_DIED", "LOCAL_RAYLET_DIED", "WORKER_DIED", "ACTOR_DIED", "ACTOR_UNAVAILABLE")

NODE_GONE = Say("node_gone", Edge.ENDED_BY, said("{subject} is gone (not in the node list)"))


def _died(f: Link) -> str:
    """ "at 12:01:02 after it was drained (…) (its state message)": a node's death, after its name."""
    drained = (
        " after it was drained (scaled down or preempted while work still ran on it)" if f["drained"] else ""
    )
    return f"at {f['when']}{drained} ({f['message']})"


NODE_DIED_AT = Say("node_died_at", Edge.ENDED_BY, lambda f: f"{f.subject} died {_died(f)}", node_death=True)
DIED_WITH_NODE = Say("died_with_node", Edge.ENDED_BY, said("{subject} died with its node"), with_node=True)
WORKER_DIED_WITH_NODE = Say(
    "worker_died_with_node", Edge.ENDED_BY, said("{possessive} worker died with its node"), with_node=True
)
ACTOR_NODE_DIED = Say("actor_node_died", Edge.ENDED_BY, said("{subject} failed: its actor's node died"))
TOOK_DOWN = Say(
    "took_down",
    Edge.ENDED_BY,
    lambda f: (
        "it took down "
        + " and ".join(
            x
            for x in (
                f"{f['actors']} actor(s) ({f['classes']})" if f["actors"] else "",
                f"{f['tasks']} task(s)" if f["tasks"] else "",
            )
            if x
        )
        + f" of job(s) {', '.join(f['jobs'])}"
    ),
)
NODE_IS_DEAD = Say("node_is_dead", Edge.ENDED_BY, said("{subject} is DEAD"))
DRAINING = Say(
    "draining",
    Edge.ENDED_BY,
    lambda f: (
        f"{f.subject} is being drained ({f['message']}) while "
        + " and ".join(
            x
            for x in (
                f"{f['actors']} actor(s) ({f['classes']})" if f["actors"] else "",
                f"{f['tasks']} running task(s)" if f["tasks"] else "",
            )
            if x
        )
        + " still run on it"
    ),
)


def _bound_words(f: Link) -> str:
    head = f"{f.subject} could not be scheduled: hard node affinity (soft=False) to "
    if f.get("node"):
        state = f["state"]
        told = (
            "is not in the cluster's node list (never joined, or long gone)"
            if state is None
            else f"is DEAD: died {_died(f['death'])}"
            if f.get("death")
            else f"is {state}"
        )
        return f"{head}{f['node']}, and that node {told}"
    if not f.get("last"):
        return (
            f"{head}a node that is gone or cannot fit it (Ray's error does not name it); no node "
            "of this cluster has died, so the node id given was never part of it, or that node lacks what it "
            "needs"
        )
    more = f"; {f['before']} other node(s) died before it" if f["before"] else ""
    return f"{head}a gone node; the last node to die: {f['last'].text}{more}"


BOUND_NODE = Say("bound_node", Edge.ENDED_BY, _bound_words)


@rule(On.HELPER, Kind.NODE_DIED, refs=(FT_DOC,), reads=("nodes", "events"))
def node_death(g: Graph, node_id: str | None) -> list[Link]:
    """A node that died: when and why (its state message and the cluster event that names it), or that it is
    gone from the node list."""
    if not node_id:
        return []  # never placed (or not recorded): no node to blame
    row = g.nodes.get(node_id)
    if row is None:
        return [NODE_GONE(g.node_label(node_id))]
    if row.get("state") != "DEAD":
        return []
    message = str(row.get("state_message") or "no death reason recorded")
    events = [e for e in g.ev.events or [] if node_id and node_id in str(e.get("message") or "")]
    quote = message + (f" | event: {one_line(events[-1].get('message'), EVENT_CHARS)}" if events else "")
    return [
        NODE_DIED_AT(
            g.node_label(node_id),
            quote,
            when=ms_clock(row.get("end_time_ms")),
            drained=bool(DRAINED.search(message)),
            message=quoted(message, NODE_DEATH_CHARS),
        )
    ]


def died_ms(g: Graph, row: Row, ctx: Row) -> float:
    """When an actor died, as early as the records show it: its end time, its owner's end when Ray says the
    owner died, the first call to it that failed."""
    from ray_mcp.diagnosis.graph import DRIVER_WORKER

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
    """The calls made to an actor (their last attempts)."""
    aid = row.get("actor_id")
    return [
        rows[-1]
        for rows in g.attempts.values()
        if rows[-1].get("actor_id") == aid and rows[-1].get("type") == "ACTOR_TASK"
    ]


def death_reason(row: Row) -> tuple[str, Row]:
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    return str(ctx.get("reason") or ""), ctx


@rule(On.TASK_END, Kind.NODE_DIED, order=20, reads=("tasks", "nodes"))
def task_node_died(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose node (or raylet) died under it: the node's death."""
    if str(t.get("error_type") or "") not in ("NODE_DIED", "LOCAL_RAYLET_DIED"):
        return []
    msg = str(t.get("error_message") or "")
    return [DIED_WITH_NODE(g.task_label(t), one_line(msg, QUOTE_CHARS)), *node_death(g, t.get("node_id"))]


@rule(On.TASK_END, Kind.NODE_DIED, order=45, reads=("tasks", "actors", "nodes"))
def task_actor_node_died(g: Graph, t: Row, depth: int) -> list[Link]:
    """A call whose actor is gone with its node (the actor not DEAD yet in Ray's records)."""
    kind = str(t.get("error_type") or "")
    actor = (
        g.actors.get(str(t.get("actor_id") or "")) if kind in ("ACTOR_DIED", "ACTOR_UNAVAILABLE") else None
    )
    if actor is None or (depth < 3 and actor.get("state") == "DEAD"):
        return []  # a DEAD actor's own end explains it (owners.task_actor_died)
    died = node_death(g, actor.get("node_id"))
    if not died:
        return []
    msg = str(t.get("error_message") or "")
    return [ACTOR_NODE_DIED(g.task_label(t), one_line(msg, QUOTE_CHARS)), *died]


@rule(On.TASK_END, Kind.NODE_DIED, order=75, reads=("tasks", "workers", "nodes"))
def task_worker_died_with_node(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose worker died because its node did."""
    from ray_mcp.diagnosis.rules.workers import task_worker_died, worker_memory_kill

    if not task_worker_died(t) or worker_memory_kill(g, t):
        return []
    died = node_death(g, t.get("node_id"))
    if not died:
        return []
    msg = str(t.get("error_message") or "")
    return [WORKER_DIED_WITH_NODE(g.task_label(t), one_line(msg, QUOTE_CHARS)), *died]


@rule(On.ACTOR_END, Kind.NODE_DIED, order=40, refs=(FT_DOC,), reads=("actors", "nodes", "tasks", "jobs"))
def actor_died_with_node(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor that died with its node, whatever Ray recorded, when the node was marked DEAD within the health
    checks' lag of the actor's death (Ray often records OWNER_DIED then)."""
    reason, ctx = death_reason(row)
    if not died_with_node(g, row, reason, ctx):
        return []
    msg = str(ctx.get("error_message") or "")
    note = f" (Ray recorded {reason}: its owner exited after losing it)" if reason == "OWNER_DIED" else ""
    return [DIED_WITH_NODE(g.actor_label(row), msg + note), *node_death(g, row.get("node_id"))]


@rule(On.HELPER, Kind.NODE_DIED, reads=("nodes",))
def bound_node(g: Graph, label: str, msg: str, when_ms: float = 0.0) -> Link:
    """Work that hard node affinity (soft=False) binds to a node that is gone or cannot fit it: that node's own
    state. Ray 2.60's error does not name the node; then the node that died last (before the work failed) is
    the one to look at, with its death."""
    named = NODE_ID.search(msg)
    if named:
        nid = named.group(0)
        row, died = g.nodes.get(nid), node_death(g, nid)
        death = died[0] if died and died[0].say is NODE_DIED_AT else None
        return BOUND_NODE(
            label,
            exc_quote(msg),
            node=g.node_label(nid),
            state=None if row is None else row.get("state"),
            death=death,
        )
    dead = sorted(
        (
            n
            for n in g.nodes.values()
            if n.get("state") == "DEAD" and (not when_ms or num(n.get("end_time_ms")) <= when_ms)
        ),
        key=lambda n: -num(n.get("end_time_ms")),
    )
    if not dead:
        return BOUND_NODE(label, exc_quote(msg), last=None)
    last = node_death(g, str(dead[0].get("node_id")))[0]
    return BOUND_NODE(
        label, "Ray's error does not name the node: " + exc_quote(msg), last=last, before=len(dead) - 1
    )


@rule(On.TASK_END, Kind.NODE_DIED, order=80, reads=("tasks", "nodes"))
def task_bound_node(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task bound by hard node affinity to a node that is gone: that node and its death."""
    msg = str(t.get("error_message") or "")
    if not node_affinity(msg, str(t.get("error_type") or "")):
        return []
    return [bound_node(g, g.task_label(t), msg, num(t.get("end_time_ms")))]


@rule(
    On.CLUSTER,
    Kind.NODE_DIED,
    order=10,
    next_steps=("list_nodes state=DEAD",),
    reads=("nodes", "actors", "tasks", "events"),
)
def node_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Each dead node with what it took down (actors and tasks that died with it), newest death first; a
    problem for an hour after it died."""
    from ray_mcp.diagnosis.rules.lifecycle import benign_end
    from ray_mcp.diagnosis.rules.symptoms import final_attempts

    out = []
    dead = sorted(
        (n for n in g.nodes.values() if n.get("state") == "DEAD"), key=lambda n: -num(n.get("end_time_ms"))
    )
    for node in dead[:DEAD_NODES_SHOWN]:
        nid = str(node.get("node_id"))
        actors = [
            a
            for a in g.actors.values()
            if a.get("node_id") == nid
            and (
                a.get("state") == "RESTARTING"
                or (a.get("state") == "DEAD" and died_with_node(g, a, *death_reason(a)))
            )
            and not benign_end(g, a)
        ]
        since = num(node.get("end_time_ms")) - HEALTH_CHECK_LAG_MS
        tasks = [
            t
            for t in final_attempts(g, None)
            if t.get("node_id") == nid
            and t.get("state") == "FAILED"
            and t.get("error_type") in SYSTEM_ENDS
            and num(t.get("end_time_ms") or since) >= since
        ]
        jobs = sorted({str(x.get("job_id")) for x in [*actors, *tasks] if x.get("job_id")})
        links = node_death(g, nid)
        if actors or tasks:
            links.append(
                TOOK_DOWN(
                    "",
                    "; ".join(g.actor_label(a) for a in actors[:NAMES_SHOWN]),
                    actors=len(actors),
                    classes=names(str(a.get("class_name")) for a in actors),
                    tasks=len(tasks),
                    jobs=jobs,
                )
            )
        recent = num(node.get("end_time_ms")) > g.ev.now_ms - 3600_000 if g.ev.now_ms else True
        out.append(
            Chain(
                STUCK if recent else CONTEXT,
                Kind.NODE_DIED,
                NODE_IS_DEAD(g.node_label(nid)),
                links,
                list(node_chains.next_steps),
                None,
                {
                    f"node:{nid}",
                    *(f"actor:{a.get('actor_id')}" for a in actors),
                    *(f"task:{t.get('task_id')}" for t in tasks),
                },
            )
        )
    return out


@rule(
    On.CLUSTER, Kind.NODE_DRAINING, order=20, severity=STUCK - 10, reads=("nodes", "actors", "running_tasks")
)
def draining_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """An ALIVE node Ray is draining (scale-down, preemption, `ray drain-node`) with work still on it: that work
    ends when the drain does."""
    out = []
    for nid, node in g.nodes.items():
        message = str(node.get("state_message") or "")
        if node.get("state") != "ALIVE" or not DRAINED.search(message):
            continue
        actors = [a for a in g.actors.values() if a.get("node_id") == nid and a.get("state") == "ALIVE"]
        tasks = [t for t in g.running.values() if t.get("node_id") == nid]
        if not actors and not tasks:
            continue
        out.append(
            Chain(
                STUCK - 10,
                Kind.NODE_DRAINING,
                None,
                [
                    DRAINING(
                        g.node_label(nid),
                        message,
                        message=one_line(message, NODE_DEATH_CHARS),
                        actors=len(actors),
                        classes=names(str(a.get("class_name")) for a in actors),
                        tasks=len(tasks),
                    )
                ],
                ["list_nodes", "list_actors node_id=" + nid],
                subjects={f"node:{nid}"},
            )
        )
    return out
