"""Memory: work the memory monitor killed (a task, an actor, the job's driver), a node's memory or object store
under pressure, and who holds a full object store."""

from __future__ import annotations

from ray_mcp import models
from ray_mcp.amounts import byte_size
from ray_mcp.diagnosis.facts import CONTEXT, PROBLEM, ROOT, STUCK, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, num
from ray_mcp.diagnosis.recognise import (
    MONITOR_KILL,
    OOM_NODE,
    low_memory,
    memory_summary,
    oom_quote,
    top_memory_user,
)
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import STORE_HOLDERS_QUOTED, STORE_ONE_HOLDER_SHARE
from ray_mcp.shaping.objects import STORE_CRITICAL, STORE_NEAR_FULL, store_pressure
from ray_mcp.text import quoted

OBS_DOC = "ray-docs://reference/13-dashboard-observability"
OBJECTS_DOC = "ray-docs://reference/04-ray-core-objects"
MEMORY_PRESSURE = 0.8  # a node's memory or object store this full is named
MEMORY_CRITICAL = 0.95  # and this full ranks as a cause


def _oom_words(f: Link) -> str:
    after = ""
    if "attempts" in f.values:
        after = "; not retried" if f["attempts"] == 1 else f"; killed on each of {f['attempts']} attempts"
    elif "restarts" in f.values:
        after = f"; restarted {f['restarts']} time(s) before" if f["restarts"] else "; not restarted"
    return f"{f.subject} was killed by the memory monitor on {f['node']}: {f['memory']}{after}"


OOM_KILLED = Say("oom_killed", Edge.ENDED_BY, _oom_words)
DRIVER_OOM_KILLED = Say(
    "driver_oom_killed",
    Edge.ENDED_BY,
    lambda f: (
        f"the job's driver process was killed by the memory monitor on {f['node']}: {f['memory']}"
        + (f"; the top memory user was {f['top']}" if f["top"] else "")
    ),
)
SUPERVISOR_SWEPT = Say(
    "supervisor_swept",
    Edge.ENDED_BY,
    said("the job failed: the memory monitor's sweep killed its driver's supervisor too"),
)
NODE_MEMORY = Say(
    "node_memory",
    Edge.HOLDS,
    lambda f: (
        f"{f['resource']} on {f['node']} is {100 * f['share']:.0f}% used "
        f"({byte_size(f['used'])} of {byte_size(f['total'])})"
    ),
)
STORE_PRESSURE = Say(
    "store_pressure",
    Edge.HOLDS,
    lambda f: f"the object store is {'near full' if f['full'] else 'spilling'}: {'; '.join(f['pressure'])}",
)


# memory_profile (toolset "profiling") names the lines a worker allocates and keeps: offered where the memory
# monitor killed work (on a rerun, while its memory grows) and where a node's memory fills.
MEMORY_PROFILE_STEP = "memory_profile actor_id=<a worker of a rerun> leaks_only=true while its memory grows"


@rule(On.TASK_END, Kind.OOM, order=10, refs=(OBS_DOC,), reads=("tasks", "nodes"))
def task_oom(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task the memory monitor killed: the node, its memory use against the limit and threshold, and whether
    it was retried (killed on each attempt)."""
    msg = str(t.get("error_message") or "")
    if str(t.get("error_type") or "") != "OUT_OF_MEMORY" and not low_memory(msg):
        return []
    tries = len(g.attempts.get(str(t.get("task_id")), [])) or 1
    return [
        OOM_KILLED(
            g.task_label(t),
            oom_quote(msg),
            node=g.node_label(t.get("node_id")),
            memory=memory_summary(msg),
            attempts=tries,
        )
    ]


@rule(On.ACTOR_END, Kind.OOM, order=10, reads=("actors", "nodes"))
def actor_oom(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor the memory monitor killed, in Ray's own record of it (its OOM context), with its restarts."""
    cause = row.get("death_cause") or {}
    if "oom_context" not in cause:
        return []
    msg = str(cause["oom_context"].get("error_message") or "")
    return [
        OOM_KILLED(
            g.actor_label(row),
            oom_quote(msg),
            node=g.node_label(row.get("node_id")),
            memory=memory_summary(msg),
            restarts=int(num(row.get("num_restarts"))),
        )
    ]


@rule(On.ACTOR_END, Kind.OOM, order=70, reads=("actors", "nodes"))
def actor_monitor_kill(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose death message is the memory monitor's own words."""
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    msg = str(ctx.get("error_message") or "")
    if not MONITOR_KILL.search(msg):
        return []
    return [
        OOM_KILLED(
            g.actor_label(row),
            oom_quote(msg),
            node=g.node_label(row.get("node_id")),
            memory=memory_summary(msg),
        )
    ]


@rule(
    On.JOB,
    Kind.OOM,
    order=200,
    severity=ROOT + 1,
    next_steps=(
        "cluster_status (memory per node)",
        "list_tasks state=RUNNING (what else uses memory)",
        MEMORY_PROFILE_STEP,
    ),
    reads=("job",),
)
def memory_kill(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A job the memory monitor failed: the kill of its own tasks ranks first (it names the memory users), else
    the driver itself was the monitor's pick, with the top memory user."""
    job = g.ev.job or {}
    message = str(job.get("message") or "")
    if job.get("status") != "FAILED" or not low_memory(message):
        return []
    killed = [c for c in chains if c.kind is Kind.OOM]
    if killed:
        killed[0].severity = ROOT + 2
        killed[0].links.insert(0, SUPERVISOR_SWEPT("", oom_quote(message)))
        if MEMORY_PROFILE_STEP not in killed[0].next_steps:
            killed[0].next_steps.append(MEMORY_PROFILE_STEP)
        return []
    node = OOM_NODE.search(message)
    return [
        Chain(
            ROOT + 1,
            Kind.OOM,
            None,
            [
                DRIVER_OOM_KILLED(
                    "",
                    oom_quote(message),
                    node=g.node_label(node[1] if node else None),
                    memory=memory_summary(message),
                    top=top_memory_user(message),
                )
            ],
            list(memory_kill.next_steps),
            job_id or None,
        )
    ]


@rule(On.CLUSTER, Kind.MEMORY, order=130, refs=(OBS_DOC,), reads=("status",))
def memory_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Each alive node whose memory or object store is at least 80% full, in GiB (a cause from 95%)."""
    out = []
    for node in (g.ev.status or {}).get("nodes") or []:
        if node.get("state") != "ALIVE":
            continue
        for name in ("object_store_memory", "memory"):
            use = (node.get("resources") or {}).get(name) or {}
            used, total = float(use.get("used") or 0), float(use.get("total") or 0)
            if not total or used / total < MEMORY_PRESSURE:
                continue
            share = used / total
            out.append(
                Chain(
                    CONTEXT + 20 if share >= MEMORY_CRITICAL else PROBLEM,
                    Kind.MEMORY,
                    None,
                    [
                        NODE_MEMORY(
                            resource=name,
                            node=g.node_label(node.get("node_id")),
                            share=share,
                            used=used,
                            total=total,
                        )
                    ],
                    [f"list_actors node_id={node.get('node_id')} to see who holds it"]
                    + (
                        [
                            "memory_profile actor_id=<a worker on it> leaks_only=true (the lines whose memory it keeps)"
                        ]
                        if name == "memory"
                        else []
                    ),
                    subjects={f"memory:{node.get('node_id')}:{name}"},
                )
            )
    return out


@rule(
    On.JOB,
    Kind.OBJECT_STORE,
    order=210,
    refs=(OBJECTS_DOC,),
    next_steps=("summarize_objects",),
    reads=("store",),
)
def job_store_chains(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A node's object store near full or spilling, with who holds the most."""
    return [] if any(STORE_SUBJECT in c.subjects for c in chains) else store_chains(g)


@rule(On.CLUSTER, Kind.OBJECT_STORE, order=140, next_steps=("summarize_objects",), reads=("store",))
def cluster_store_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """A node's object store near full or spilling, with who holds the most."""
    return [] if any(STORE_SUBJECT in c.subjects for c in chains) else store_chains(g)


STORE_SUBJECT = "object_store"
STORE_HELD = Say(
    "store_held",
    Edge.HOLDS,
    lambda f: (
        f"the object store is near full ({'; '.join(f['pressure'])}): {f['holder']} holds {byte_size(f['bytes'])} of it in "
        f"{f['objects']} ref(s)"
        + (f" created at {quoted(f['call_site'])}" if f["call_site"] else "")
        + "; until it drops them, new objects (puts, task results) spill to disk or wait"
    ),
)


def full_store_holder(g: Graph) -> list[Chain]:
    """A full object store that one owner holds most of: that owner (the actor or driver in its process), its
    call site and its share, ranked above work that waits (every put and result of the cluster depends on it)."""
    if g.ev.store is None:
        return []
    store = models.ObjectStoreSummary.model_validate(g.ev.store)
    full = [n for n in store.nodes if n.fraction is not None and n.fraction >= STORE_NEAR_FULL]
    used = sum(num(n.used) for n in full)
    top = store.groups[0] if store.groups else None
    if not full or top is None or not used or top.bytes < STORE_ONE_HOLDER_SHARE * used:
        return []
    actor = g.actor_by_pid(top.pid) if top.pid else None
    holder = f"{g.actor_label(actor)} of {g.job_label(actor.get('job_id'))}" if actor else quoted(top.owner)
    site = top.call_site if top.call_site and top.call_site != "disabled" else ""
    link = STORE_HELD(
        "",
        top.owner,
        pressure=store_pressure(full),
        holder=holder,
        bytes=top.bytes,
        objects=top.objects,
        call_site=site,
    )
    steps = ["summarize_objects", "set RAY_record_ref_creation_sites=1 to see call sites" if not site else ""]
    return [
        Chain(STUCK + 3, Kind.OBJECT_STORE, None, [link], [s for s in steps if s], subjects={STORE_SUBJECT})
    ]


@rule(On.JOB, Kind.OBJECT_STORE, order=205, reads=("store", "actors"))
def job_store_holder(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A full object store one owner holds most of: that owner (an actor by its pid, or the driver), its call
    site and its share, ranked above the work waiting behind it."""
    return full_store_holder(g)


@rule(On.CLUSTER, Kind.OBJECT_STORE, order=139, reads=("store", "actors"))
def cluster_store_holder(g: Graph, chains: list[Chain]) -> list[Chain]:
    """The same full store's holder in cluster_health."""
    return full_store_holder(g)


def store_chains(g: Graph) -> list[Chain]:
    """A node's object store near full or spilling, with who holds the most (summarize_objects' read)."""
    if g.ev.store is None:
        return []
    store = models.ObjectStoreSummary.model_validate(g.ev.store)
    pressure = store_pressure(store.nodes)
    if not pressure:
        return []
    fullest = max((n.fraction for n in store.nodes if n.fraction is not None), default=0.0)
    full = fullest >= STORE_NEAR_FULL
    severity = CONTEXT + 20 if fullest >= STORE_CRITICAL else PROBLEM + 5 if full else CONTEXT + 10
    holders = [
        f"{quoted(h.owner)} holds {byte_size(h.bytes)} in {h.objects} ref(s) from {quoted(h.call_site)}"
        + (f" (leak: {quoted(h.leak)})" if h.leak else "")
        for h in store.groups[:STORE_HOLDERS_QUOTED]
    ]
    return [
        Chain(
            severity,
            Kind.OBJECT_STORE,
            None,
            [STORE_PRESSURE("", "; ".join(holders), full=full, pressure=pressure)],
            ["summarize_objects"],
            subjects={"object_store"},
        )
    ]
