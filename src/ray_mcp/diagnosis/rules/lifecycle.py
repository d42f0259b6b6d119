"""Ends that are not failures, or not the work's own: ray.cancel, ray.kill, an actor out of scope or exiting on
purpose, work still running when its job ended, an actor whose placement group was removed."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, ms_clock
from ray_mcp.diagnosis.recognise import JOB_FINISHED, PG_REMOVED
from ray_mcp.diagnosis.registry import On, ended, rule
from ray_mcp.diagnosis.rules.nodes import death_reason
from ray_mcp.limits import QUOTE_CHARS, QUOTE_LINE_CHARS
from ray_mcp.text import one_line

PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"

CANCELLED = Say("cancelled", Edge.ENDED_BY, said("{subject} was cancelled (ray.cancel)"))
ENDED_WITH_JOB = Say(
    "ended_with_job",
    Edge.ENDED_BY,
    said("{subject} was still running when its job ended (the driver exited); Ray ended it with the job"),
)
RAY_KILL = Say("ray_kill", Edge.ENDED_BY, said("{subject} was killed by ray.kill (on request)"))
OUT_OF_SCOPE = Say(
    "out_of_scope",
    Edge.ENDED_BY,
    said("{subject} ended because every handle to it was dropped (out of scope)"),
)
EXITED = Say("exited", Edge.ENDED_BY, said("{subject} exited on purpose (exit_actor or sys.exit)"))
PG_WAS_REMOVED = Say(
    "pg_was_removed",
    Edge.ENDED_BY,
    lambda f: (
        f"{f.subject} ended because its {f['pg']} was removed"
        + (f" at {ms_clock(f['end_ms'])}" if f["end_ms"] else "")
    ),
)
CANCELLED_TASKS = Say(
    "cancelled_tasks", Edge.ENDED_BY, said("{count} task(s) cancelled with ray.cancel (not a failure)")
)
ENDED_ON_REQUEST = Say(
    "ended_on_request",
    Edge.ENDED_BY,
    said("{count} actor(s) ended on request or out of scope (not a failure): {labels}"),
)


@rule(On.TASK_END, Kind.CANCELLED, order=40, reads=("tasks",))
def task_cancelled(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task cancelled with ray.cancel: not a failure."""
    if str(t.get("error_type") or "") != "TASK_CANCELLED":
        return []
    return [CANCELLED(g.task_label(t), one_line(str(t.get("error_message") or ""), QUOTE_LINE_CHARS))]


@rule(On.TASK_END, Kind.ENDED_WITH_JOB, order=60, reads=("tasks",))
def task_ended_with_job(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task still running when its job's driver exited: Ray ended it with the job (not its own failure)."""
    msg = str(t.get("error_message") or "")
    if not JOB_FINISHED.search(msg):
        return []
    return [ENDED_WITH_JOB(g.task_label(t), one_line(msg, QUOTE_CHARS))]


@rule(On.ACTOR_END, Kind.PG_REMOVED, order=25, refs=(PG_DOC,), reads=("actors", "pgs"))
def actor_pg_removed(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor ended because its placement group was removed, and when."""
    _reason, ctx = death_reason(row)
    msg = str(ctx.get("error_message") or "")
    if not PG_REMOVED.search(msg):
        return []
    pg = g.pgs.get(str(row.get("placement_group_id") or ""))
    end_ms = (pg.get("stats") or {}).get("end_time_ms") if pg and pg.get("state") == "REMOVED" else None
    label = g.pg_label(pg or {"placement_group_id": row.get("placement_group_id")})
    return [PG_WAS_REMOVED(g.actor_label(row), msg, pg=label, end_ms=end_ms)]


@rule(On.ACTOR_END, Kind.KILLED, order=30, reads=("actors",))
def actor_ray_kill(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor killed with ray.kill: on request."""
    reason, ctx = death_reason(row)
    if reason != "RAY_KILL":
        return []
    return [RAY_KILL(g.actor_label(row), str(ctx.get("error_message") or ""))]


@rule(On.ACTOR_END, Kind.KILLED, order=60, reads=("actors",))
def actor_out_of_scope(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose every handle was dropped: out of scope, not a failure."""
    reason, ctx = death_reason(row)
    if reason not in ("OUT_OF_SCOPE", "REF_DELETED"):
        return []
    return [OUT_OF_SCOPE(g.actor_label(row), str(ctx.get("error_message") or ""))]


@rule(On.ACTOR_END, Kind.KILLED, order=61, reads=("actors",))
def actor_exited(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor that exited on purpose (exit_actor, sys.exit)."""
    reason, ctx = death_reason(row)
    msg = str(ctx.get("error_message") or "")
    if reason != "INTENDED_USER_EXIT" and "exit_actor" not in msg:
        return []
    return [EXITED(g.actor_label(row), msg)]


BENIGN = (RAY_KILL, OUT_OF_SCOPE, EXITED)


def benign_end(g: Graph, row: Row) -> bool:
    """Did the actor end on request or on purpose (not a failure)?"""
    links = ended(On.ACTOR_END, g, row, 0)
    return bool(links) and links[-1].say in BENIGN
