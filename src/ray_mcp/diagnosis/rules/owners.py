"""Owners: the owner of an object or an actor that died and took it along (who it was: the driver, an actor, a
task, a worker; and why it ended), an object lost with its node, an actor whose calls failed as unreachable."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import DRIVER_WORKER, Graph, Row, ms_clock, num
from ray_mcp.diagnosis.recognise import (
    OBJECT_LOST,
    OWNER_LOST,
    argument_lost,
    exc_quote,
    exception_line,
    parse_owner,
)
from ray_mcp.diagnosis.registry import On, ended, rule
from ray_mcp.diagnosis.rules.nodes import actor_calls, death_reason, node_death
from ray_mcp.limits import QUOTE_CHARS
from ray_mcp.text import one_line

FT_DOC = "ray-docs://reference/14-fault-tolerance"
OBJECTS_DOC = "ray-docs://reference/04-ray-core-objects"

OWNER_WAS_DRIVER = Say(
    "owner_was_driver",
    Edge.OWNS,
    lambda f: (
        f"the owner was the driver of {f['job']}, which is {f['status']}"
        + (f" at {ms_clock(f['end'])}" if f["end"] else "")
    ),
)
OWNER_WAS = Say(
    "owner_was",
    Edge.OWNS,
    lambda f: f"the owner was {f['owner']}" + (f" of {f['job']}" if f.get("job") else ""),
)
OWNER_WORKER_EXITED = Say(
    "owner_worker_exited",
    Edge.OWNS,
    said("the owner was worker {worker} (pid {pid}), which exited: {exit_type}"),
)
OWNER_WORKER_ON = Say("owner_worker_on", Edge.OWNS, said("the owner was worker {worker} on {node}"))
NEEDED_OWNED = Say(
    "needed_owned",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject} needed {'an argument' if f['argument'] else 'an object'} whose owner died ({f['error']})"
    ),
)
NEEDED_LOST = Say("needed_lost", Edge.WAITS_ON, said("{subject} needed an object that was lost ({error})"))
OWNER_DIED = Say("owner_died", Edge.ENDED_BY, said("{subject} died because its owner died"))
OWNER_DRIVER_ENDED = Say(
    "owner_driver_ended",
    Edge.OWNS,
    lambda f: (
        f"{f['actor']}'s owner, the driver of "
        + ("another job, " if f["other_job"] else "")
        + f"{f['job']}, ended ({f['status']}"
        + (f" at {ms_clock(f['end'])}" if f["end"] else "")
        + ")"
        + (
            '; not detached, it lived only as long as that driver (lifetime="detached" outlives it)'
            if f["other_job"]
            else ""
        )
    ),
)
LOST_CONTACT = Say(
    "lost_contact",
    Edge.ENDED_BY,
    said(
        "{subject} on {node} stopped answering (calls failed with ACTOR_UNAVAILABLE) and its owner exited on "
        "that error: its worker process or its node died (the GCS marks a node DEAD only after its health checks "
        "fail)"
    ),
)
FAILED_ACTOR_DIED = Say("failed_actor_died", Edge.ENDED_BY, said("{subject} failed because its actor died"))


@rule(On.HELPER, Kind.OWNER_DIED, refs=(FT_DOC, OBJECTS_DOC), reads=("workers", "actors", "tasks", "jobs"))
def owner_chain(g: Graph, message: str | None, depth: int = 0) -> list[Link]:
    """The owner an error names (a lost object's, an actor's): the driver of a job and its status, an actor or
    task with why it ended, a worker that exited, or the node it was on."""
    owner = parse_owner(message)
    if not owner:
        return []
    worker_id = owner["worker"]
    driver = DRIVER_WORKER.match(worker_id)
    if driver:
        row = g.jobs.get(driver["job"]) or {}
        return [
            OWNER_WAS_DRIVER(
                "",
                f"owner worker ID {worker_id}",
                job=g.job_label(driver["job"]),
                status=row.get("status") or "?",
                end=row.get("end_time"),
            )
        ]
    task = g.task_by_worker(worker_id)
    worker = g.workers.get(worker_id) or {}
    actor = g.actors.get(str(task["actor_id"])) if task is not None and task.get("actor_id") else None
    if actor is None and worker.get("pid"):
        actor = g.actor_by_pid(int(num(worker["pid"])), owner.get("node"))
    quote = f"owner worker ID {worker_id}" + (f", pid {worker.get('pid')}" if worker.get("pid") else "")
    if actor is not None:
        label = g.actor_label(actor)
        links = [OWNER_WAS("", quote, owner=label, job=g.job_label(actor.get("job_id")))]
        return links + (ended(On.ACTOR_END, g, actor, depth + 1) if depth < 3 else [])
    if task is not None:
        links = [OWNER_WAS("", quote, owner=g.task_label(task))]
        return links + (ended(On.TASK_END, g, task, depth + 1) if depth < 3 else [])
    if worker:
        detail = one_line(str(worker.get("exit_detail") or ""), QUOTE_CHARS)
        return [
            OWNER_WORKER_EXITED(
                "", detail, worker=worker_id, pid=worker.get("pid"), exit_type=worker.get("exit_type")
            )
        ]
    links = [OWNER_WORKER_ON("", quote, worker=worker_id, node=g.node_label(owner.get("node")))]
    return links + node_death(g, owner.get("node"))


@rule(On.TASK_END, Kind.FAILED, order=44, reads=("tasks", "actors"))
def task_actor_died(g: Graph, t: Row, depth: int) -> list[Link]:
    """A call that failed because its actor died: why the actor died."""
    actor = g.actors.get(str(t.get("actor_id") or ""))
    kind = str(t.get("error_type") or "")
    if (
        kind not in ("ACTOR_DIED", "ACTOR_UNAVAILABLE")
        or actor is None
        or depth >= 3
        or actor.get("state") != "DEAD"
    ):
        return []
    msg = str(t.get("error_message") or "")
    return [
        FAILED_ACTOR_DIED(g.task_label(t), one_line(msg, QUOTE_CHARS)),
        *ended(On.ACTOR_END, g, actor, depth + 1),
    ]


@rule(
    On.TASK_END, Kind.OWNER_DIED, order=50, refs=(FT_DOC, OBJECTS_DOC), reads=("tasks", "workers", "actors")
)
def task_owner_died(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task that needed an argument or object whose owner died: the owner, and why it ended."""
    msg = str(t.get("error_message") or "")
    if not parse_owner(msg) or depth >= 3 or not OWNER_LOST.search(msg):
        return []
    needed = NEEDED_OWNED(
        g.task_label(t),
        exc_quote(msg),
        argument=argument_lost(msg),
        error=exception_line(msg) or "OwnerDiedError",
    )
    return [needed, *owner_chain(g, msg, depth + 1)]


@rule(On.TASK_END, Kind.NODE_DIED, order=55, reads=("tasks", "nodes"))
def task_object_lost(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task that needed an object lost with no owner named: the node that died last."""
    msg = str(t.get("error_message") or "")
    if not OBJECT_LOST.search(msg) or parse_owner(msg):
        return []
    dead = sorted(
        (n for n in g.nodes.values() if n.get("state") == "DEAD"), key=lambda n: -num(n.get("end_time_ms"))
    )
    if not dead:
        return []
    lost = NEEDED_LOST(g.task_label(t), exc_quote(msg), error=exception_line(msg) or "ObjectLostError")
    return [lost, *node_death(g, str(dead[0].get("node_id")))]


@rule(On.ACTOR_END, Kind.NODE_DIED, order=50, reads=("actors", "tasks", "nodes"))
def lost_contact(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose calls failed as unreachable before its owner died: the owner died of losing it (the node
    is not marked DEAD yet, or the worker process alone died)."""
    reason, _ctx = death_reason(row)
    if reason != "OWNER_DIED":
        return []
    failed = [t for t in actor_calls(g, row) if t.get("error_type") == "ACTOR_UNAVAILABLE"]
    if not failed:
        return []
    quote = one_line(str(failed[0].get("error_message") or ""), QUOTE_CHARS)
    return [LOST_CONTACT(g.actor_label(row), quote, node=g.node_label(row.get("node_id")))]


@rule(
    On.ACTOR_END, Kind.OWNER_DIED, order=51, refs=(FT_DOC, OBJECTS_DOC), reads=("actors", "jobs", "workers")
)
def actor_owner_died(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor that died because its owner did: the driver of a job and its status, or the owner and why it
    ended."""
    reason, ctx = death_reason(row)
    if reason != "OWNER_DIED":
        return []
    owner_id = str(ctx.get("owner_id") or "")
    links = [OWNER_DIED(g.actor_label(row), str(ctx.get("error_message") or ""))]
    driver = DRIVER_WORKER.match(owner_id)
    if driver:
        job = g.jobs.get(driver["job"]) or {}
        diagnosed = str((g.ev.job or {}).get("job_id") or "")
        links.append(
            OWNER_DRIVER_ENDED(
                "",
                f"owner_id {owner_id}",
                job=g.job_label(driver["job"]),
                status=job.get("status") or "?",
                end=job.get("end_time"),
                other_job=bool(diagnosed) and driver["job"] != diagnosed,
                actor=g.actor_label(row),
            )
        )
    elif depth < 3 and len(owner_id) == 56:
        links += owner_chain(g, f"Owner worker ID: {owner_id}", depth + 1)
    return links
