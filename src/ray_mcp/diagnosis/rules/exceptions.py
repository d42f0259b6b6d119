"""Exceptions and what is left: an exception raised in a task or an actor method (where: the task, the user's
frame, the process), an actor's constructor that raised, work Ray could not schedule, and the last resort when
Ray recorded nothing telling."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, num
from ray_mcp.diagnosis.recognise import exc_quote, exception_line, first_raise
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules.nodes import bound_node, death_reason
from ray_mcp.diagnosis.tracebacks import last_traceback
from ray_mcp.limits import MESSAGE_HEAD_CHARS, SHORT_CAUSE_CHARS
from ray_mcp.text import one_line

RAISED_IN = Say(
    "raised_in",
    Edge.RAISED_IN,
    lambda f: (
        f"{f['error']} was raised in {f['name']}"
        + (f" at {f['frame']}" if f["frame"] else "")
        + f" (pid {f['pid']}, {f['ip']})"
    ),
)
CONSTRUCTOR_RAISED = Say(
    "constructor_raised", Edge.RAISED_IN, said("{subject} raised in its constructor: {error}")
)
UNSCHEDULABLE = Say("unschedulable", Edge.ENDED_BY, said("{subject} could not be scheduled: {error}"))
FAILED_WITH = Say("failed_with", Edge.ENDED_BY, said("{subject} failed with {kind}: {error}"))
ACTOR_DIED_WITH = Say("actor_died_with", Edge.ENDED_BY, said("{subject} died: {error}"))
NO_CAUSE = Say("no_cause", Edge.ENDED_BY, said("{subject} is DEAD; Ray recorded no death cause"))


@rule(On.TASK_END, Kind.RAISED, order=90, reads=("tasks",))
def task_raised(g: Graph, t: Row, depth: int) -> list[Link]:
    """An exception raised in a task or actor method: the exception, the user's frame, the process and node
    where it first happened (Ray's "ray::f() (pid=…, ip=…)")."""
    msg = str(t.get("error_message") or "")
    where = first_raise(msg)
    if not where:
        return []
    tb = last_traceback(msg.splitlines())
    frame = tb.user_frame if tb is not None else None
    user = frame.short() if frame is not None and not frame.internal else ""
    error = exception_line(msg) or str(t.get("error_type") or "")
    return [
        RAISED_IN(
            "", exc_quote(msg), error=error, name=where["name"], frame=user, pid=where["pid"], ip=where["ip"]
        )
    ]


@rule(On.TASK_END, Kind.FAILED, order=99, reads=("tasks",))
def task_failed(g: Graph, t: Row, depth: int) -> list[Link]:
    """Any other failed task: Ray's error type and the innermost exception (or the message's start)."""
    msg = str(t.get("error_message") or "")
    error = exception_line(msg) or one_line(msg, MESSAGE_HEAD_CHARS)
    return [FAILED_WITH(g.task_label(t), exc_quote(msg), kind=str(t.get("error_type") or ""), error=error)]


@rule(On.ACTOR_END, Kind.RAISED, order=11, reads=("actors",))
def actor_constructor(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose constructor raised: the exception, in Ray's record of the creation task."""
    ctx = (row.get("death_cause") or {}).get("creation_task_failure_context")
    if ctx is None:
        return []
    text = str(ctx.get("formatted_exception_string") or ctx.get("error_message") or "")
    error = exception_line(text) or one_line(text, SHORT_CAUSE_CHARS)
    return [CONSTRUCTOR_RAISED(g.actor_label(row), exc_quote(text), error=error)]


@rule(On.ACTOR_END, Kind.FAILED, order=13, reads=("actors", "nodes"))
def actor_unschedulable(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor Ray could not schedule: a node it is bound to by hard affinity (that node's state), else Ray's
    words."""
    ctx = (row.get("death_cause") or {}).get("actor_unschedulable_context")
    if ctx is None:
        return []
    text = str(ctx.get("error_message") or "")
    if "NodeAffinity" in text:
        return [bound_node(g, g.actor_label(row), text, num(row.get("end_time")))]
    return [UNSCHEDULABLE(g.actor_label(row), text, error=one_line(text, SHORT_CAUSE_CHARS))]


@rule(On.ACTOR_END, Kind.FAILED, order=90, reads=("actors",))
def actor_died(g: Graph, row: Row, depth: int) -> list[Link]:
    """Any other dead actor with a death message: Ray's words."""
    _reason, ctx = death_reason(row)
    msg = str(ctx.get("error_message") or "")
    if not msg:
        return []
    return [ACTOR_DIED_WITH(g.actor_label(row), msg, error=one_line(msg, SHORT_CAUSE_CHARS))]


@rule(On.ACTOR_END, Kind.FAILED, order=99, reads=("actors",))
def actor_no_cause(g: Graph, row: Row, depth: int) -> list[Link]:
    """A dead actor Ray recorded no death cause for."""
    return [NO_CAUSE(g.actor_label(row))]
