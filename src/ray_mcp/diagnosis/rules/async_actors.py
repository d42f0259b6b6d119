"""An async actor whose event loop is blocked: Ray warns when a method calls the blocking ray.get, and from then
on the loop runs nothing else. The call that blocks it and what it waits for are named with Ray's warning; the
actor's other calls, shown RUNNING, are starved, not running."""

from __future__ import annotations

import re

from ray_mcp.amounts import duration
from ray_mcp.diagnosis.facts import STUCK, Chain, Edge, Kind, Say
from ray_mcp.diagnosis.graph import Graph, Row, names, num
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import LOG_QUOTE_LINE_CHARS
from ray_mcp.text import ANSI, quoted, truncate_text

ASYNC_DOC = "ray-docs://reference/03-ray-core-actors"

# Ray's warning (worker.py), forwarded to the driver's log with the actor's prefix "(Class pid=…)".
BLOCKING_GET = re.compile(
    r"\((?P<cls>[\w.]+) pid=(?P<pid>\d+)[^)]*\).*?(?P<warning>Using blocking ray\.get inside async actor\.[^.]*\.)"
)


LOOP_BLOCKED = Say(
    "loop_blocked",
    Edge.WAITS_ON,
    lambda f: (
        f"{f['actor']} blocks its own async event loop: {f['blocker']} called the blocking ray.get"
        + (f" on {f['waits_on']}" if f["waits_on"] else "")
        + (f" ({f['since']})" if f["since"] else "")
        + (f", so {f['starved']} (shown RUNNING) {f['are']} starved, not running" if f["starved"] else "")
        + "; Ray warned: "
        + quoted(f["warning"], LOG_QUOTE_LINE_CHARS)
        + " Use `await ref` (or asyncio.gather) instead of ray.get"
    ),
)


def _in_get(g: Graph, cls: str) -> str:
    """The method of ``cls`` its stacks show blocked in ray.get ("Gateway.refresh"), when they were read."""
    for group in (g.ev.stacks or {}).get("groups") or []:
        where = str(group.get("where") or "")
        if (
            group.get("blocked_in") == "ray.get"
            and cls
            and cls in str(group.get("role") or "")
            and " in " in where
        ):
            return where.rsplit(" in ", 1)[1]
    return ""


def _open_calls(g: Graph, actor_id: str) -> list[Row]:
    rows = [rows[-1] for rows in g.attempts.values() if str(rows[-1].get("actor_id") or "") == actor_id]
    return [t for t in rows if t.get("state") not in ("FINISHED", "FAILED") and t.get("type") == "ACTOR_TASK"]


@rule(
    On.JOB,
    Kind.BLOCKED_LOOP,
    order=78,
    severity=STUCK + 6,
    refs=(ASYNC_DOC,),
    next_steps=("stack_traces of the actor to see the ray.get",),
    reads=("driver_lines", "actors", "tasks"),
)
def blocked_loop(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Ray's warning that an async actor called the blocking ray.get (in the driver's log, with the actor's
    prefix): the call that blocks the loop, what it waits for, and the actor's other calls it starves."""
    if status not in ("RUNNING", "PENDING"):
        return []
    found = [m for line in g.ev.driver_lines or [] for m in [BLOCKING_GET.search(line)] if m]
    out = []
    for m in found[-1:]:
        actor = next(
            (
                a
                for a in g.actors.values()
                if str(a.get("pid") or "") == m["pid"] and str(a.get("class_name") or "").endswith(m["cls"])
            ),
            None,
        )
        if actor is None or actor.get("state") != "ALIVE":
            continue
        calls = _open_calls(g, str(actor.get("actor_id")))
        # Work an actor submits names as its parent the call that submitted it or (an async actor's) the actor's
        # creation task: either way, work called from inside this actor.
        inside = {str(t.get("task_id")) for t in calls} | {
            str(t.get("task_id"))
            for rows in g.attempts.values()
            for t in rows[-1:]
            if t.get("type") == "ACTOR_CREATION_TASK" and t.get("actor_id") == actor.get("actor_id")
        }
        called = [
            t
            for rows in g.attempts.values()
            for t in rows[-1:]
            if str(t.get("parent_task_id") or "") in inside
            and t.get("state") not in ("FINISHED", "FAILED")
            and t.get("type") != "ACTOR_CREATION_TASK"
        ]
        if not calls or not called:
            continue
        # The loop runs one call at a time: the one its stack shows blocked in ray.get (when the stacks were
        # read), else the first to have started; the calls after it never got the loop.
        in_get = _in_get(g, str(actor.get("class_name") or ""))
        blocker = next(
            (t for t in calls if in_get and str(t.get("name") or "").endswith(in_get)), None
        ) or min(calls, key=lambda t: num(t.get("start_time_ms")) or num(t.get("creation_time_ms")))
        children = {str(blocker.get("task_id")): called[0]}
        child = children[str(blocker.get("task_id"))]
        started = num(child.get("start_time_ms")) or num(child.get("creation_time_ms"))
        starved = [t for t in calls if t is not blocker]
        link = LOOP_BLOCKED(
            "",
            truncate_text(ANSI.sub("", m.string.strip()), LOG_QUOTE_LINE_CHARS),
            actor=g.actor_label(actor),
            blocker=blocker.get("name"),
            waits_on=str(child.get("name") or ""),
            since=f"{child.get('state')} {duration((g.ev.now_ms - started) / 1000)}" if started else "",
            starved=names(str(t.get("name")) for t in starved),
            are="is" if len(starved) == 1 else "are",
            warning=m["warning"],
        )
        subjects = {f"task:{t.get('task_id')}" for t in calls} | {f"actor:{actor.get('actor_id')}"}
        out.append(
            Chain(STUCK + 6, Kind.BLOCKED_LOOP, None, [link], list(blocked_loop.next_steps), job_id, subjects)
        )
    return out
