"""Gathering the evidence graph's inputs through RayAPI, in a bounded number of requests: cluster_health's
(``gather_cluster``), and the readers every gathering shares (job_evidence.py gathers diagnose_job's with them).

cluster_health reads concurrently the actors, the unfinished tasks, what every gathering reads of the whole
cluster (nodes, placement groups, jobs, cluster events, dead workers), the cluster status and Serve; then the
pods' events, crash logs, trends, the object store and missing placement group strategies. A source that fails
is recorded in ``GraphInputs.unreadable`` and the reasoning says so instead of concluding anything from its
absence; a check that could not be made is in ``GraphInputs.unchecked``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ray_mcp.answers.events import NOT_INGESTED
from ray_mcp.answers.targets import LogTarget
from ray_mcp.diagnosis import history
from ray_mcp.diagnosis.graph import (
    GraphInputs,
    Row,
    failure_restarts,
    num,
)
from ray_mcp.errors import RayMCPError, RayRequestFailed
from ray_mcp.limits import (
    CLUSTER_ROWS_READ,
    CRASH_LOG_BYTES,
    CRASH_LOG_LINES,
    CRASH_LOGS,
    CRASHED_TASK_LOGS,
    DEAD_WORKERS_PER_ACTOR,
    DEAD_WORKERS_READ,
    EVENTS_READ,
    HEALTH_NODES,
    LOOPING_ACTOR_LOGS,
    STATE_API_MAX_ROWS,
    STORE_HOLDERS_QUOTED,
    TASKS_READ,
)
from ray_mcp.shaping.objects import store_pressure
from ray_mcp.sources.dashboard import nothing
from ray_mcp.text import first_sentence

if TYPE_CHECKING:
    from ray_mcp.answers import RayAPI

log = logging.getLogger("ray_mcp.diagnosis")


async def read_rows(
    api: RayAPI,
    ev: GraphInputs,
    resource: str,
    what: str,
    *,
    filters: list[tuple[str, str, str]] | None = None,
    limit: int,
    detail: bool = True,
) -> list[dict[str, Any]] | None:
    state = api.sources.state
    try:
        if resource == "nodes" and not filters:  # the one node list every asker of a call shares
            result = await state.nodes()
        else:
            result = await state.page(resource, filters=filters or [], limit=limit, detail=detail)
    except Exception as exc:  # one source failing (even by a bug) leaves the others; the answer says so
        ev.unreadable.append(f"{what}: {failure(exc)}")
        return None
    rows = [dict(r) for r in result.get("result") or []]
    total = int(num(result.get("total")))
    if total > len(rows) and not filters:
        ev.unreadable.append(f"{what}: only {len(rows)} of {total} read")
    matched = int(num(result.get("num_filtered")))
    if filters and matched > len(rows):  # the findings count what was read: say how much that was
        at_cap = int(num(result.get("num_after_truncation"))) >= STATE_API_MAX_ROWS
        of = f"at least {matched:,}" if at_cap else f"{matched:,}"
        ev.capped.append(
            f"{what[0].upper()}{what[1:]}: {len(rows):,} of {of} read; the counts above cover those."
        )
    return rows


def failure(exc: BaseException) -> str:
    if isinstance(exc, RayMCPError):
        return str(exc).split(". ")[0]
    log.warning("diagnosis: unexpected %s while gathering", type(exc).__name__, exc_info=exc)
    return f"unexpected {type(exc).__name__}"


async def checked(ev: GraphInputs, awaitable: Awaitable[Any], what: str) -> Any:
    """One check's evidence: a failure to get it is a note and an entry of ``ev.unchecked``, never an error of
    the whole diagnosis (and never taken for a clean check: the verdict says UNKNOWN)."""
    try:
        return await awaitable
    except RayMCPError as exc:
        ev.notes.append(f"Could not check {what}: {first_sentence(str(exc))}")
    except Exception as exc:  # a bug in one check must not hide the others; its traceback goes to stderr
        log.error("ray-mcp: checking %s failed with an unexpected %s", what, type(exc).__name__, exc_info=exc)
        ev.notes.append(f"Could not check {what}: unexpected {type(exc).__name__} in ray-mcp (see its log).")
    ev.unchecked.append(what)
    return None


async def read_cluster_wide(api: RayAPI, ev: GraphInputs) -> None:
    """What every gathering reads of the whole cluster, concurrently: nodes, placement groups, jobs (the Jobs
    API's list, which also teaches the redactor every job's env_vars), cluster events and dead workers."""
    ev.nodes, ev.pgs, ev.jobs, ev.events, ev.workers = await asyncio.gather(
        read_rows(api, ev, "nodes", "the nodes", limit=CLUSTER_ROWS_READ),
        read_rows(api, ev, "placement_groups", "the placement groups", limit=CLUSTER_ROWS_READ),
        _listed_jobs(api, ev),
        cluster_events(api, ev),
        read_rows(
            api,
            ev,
            "workers",
            "the dead workers",
            filters=[("is_alive", "=", "False")],
            limit=DEAD_WORKERS_READ,
        ),
    )


# The State API's basic job columns: the rows the graph reads, whichever list they come from.
JOB_COLUMNS = (
    "job_id",
    "submission_id",
    "status",
    "entrypoint",
    "type",
    "error_type",
    "message",
    "driver_info",
    "driver_exit_code",
    "start_time",
    "end_time",
)


async def _listed_jobs(api: RayAPI, ev: GraphInputs) -> list[Row] | None:
    try:
        rows = await api.jobs.rows()
    except Exception as exc:
        ev.unreadable.append(f"the jobs: {failure(exc)}")
        return None
    return [{k: row.get(k) for k in JOB_COLUMNS} for row in rows]


async def _actors(api: RayAPI, ev: GraphInputs) -> list[list[Row] | None]:
    """The actors that are not alive, and the alive ones."""
    return list(
        await asyncio.gather(
            read_rows(
                api,
                ev,
                "actors",
                "the actors that are not alive",
                filters=[("state", "!=", "ALIVE")],
                limit=CLUSTER_ROWS_READ,
            ),
            read_rows(
                api,
                ev,
                "actors",
                "the alive actors",
                filters=[("state", "=", "ALIVE")],
                limit=CLUSTER_ROWS_READ,
            ),
        )
    )


TASK_STATES = (
    ("FAILED", "the failed tasks"),
    ("PENDING_NODE_ASSIGNMENT", "the tasks waiting for a node"),
    ("RUNNING", "the running tasks"),
)


async def _tasks(api: RayAPI, ev: GraphInputs) -> list[list[Row] | None]:
    """The failed tasks, those waiting for a node and the running ones: one list of every task attempt that did
    not finish (the GCS filters task events by state, so the finished ones are never converted), split here."""
    rows = await read_rows(
        api,
        ev,
        "tasks",
        "the unfinished tasks",
        filters=[("state", "!=", "FINISHED")],
        limit=STATE_API_MAX_ROWS,
    )
    if rows is None:
        return [None] * len(TASK_STATES)
    out: list[list[Row] | None] = []
    for state, what in TASK_STATES:
        matched = [r for r in rows if r.get("state") == state]
        if len(matched) > TASKS_READ:
            ev.capped.append(
                f"{what[0].upper()}{what[1:]}: {TASKS_READ:,} of {len(matched):,} read; the counts "
                "above cover those."
            )
        out.append(matched[:TASKS_READ])
    return out


# cluster_health's checks, each by the sources it needs (a source that could not be read leaves it unchecked).
CHECKS = {
    "nodes and demands": ("nodes", "status"),
    "failed jobs": ("jobs",),
    "dead actors": ("actors",),
    "restarting actors": ("actors",),
    "actor restarts": ("alive_actors",),
    "failed tasks": ("tasks",),
    "placement groups": ("pgs",),
    "Serve": ("serve",),
    "cluster events": ("events",),
    "the object store": (),
}


async def gather_cluster(api: RayAPI) -> GraphInputs:
    """The whole cluster's evidence, read once: actors, unfinished tasks, nodes, groups, jobs (the Jobs API's
    list), events, dead workers, the cluster status (memory use, demands) and Serve."""
    ev = GraphInputs(now_ms=time.time() * 1000)
    (actors, alive), (tasks, pending, running), _, status, serve = await asyncio.gather(
        _actors(api, ev),
        _tasks(api, ev),
        read_cluster_wide(api, ev),
        checked(
            ev,
            api.nodes.cluster_status(max_nodes=HEALTH_NODES, groups_read=CLUSTER_ROWS_READ),
            "the cluster status",
        ),
        checked(ev, api.serve.details(), "Serve"),
    )
    tasks = None if tasks is None else [*tasks, *(pending or [])]
    ev.actors = (
        (actors or []) + [a for a in alive or [] if failure_restarts(a) >= 2] if actors is not None else None
    )
    ev.alive_actors, ev.tasks, ev.running_tasks = alive, tasks, running
    ev.status = status.model_dump(mode="json") if status is not None else None
    ev.serve = serve
    ev.serve_decisions = await read_serve_decisions(api, serve)
    ev.unchecked = [c for c, sources in CHECKS.items() if any(getattr(ev, s) is None for s in sources)]
    await asyncio.gather(
        _platform(api, ev),
        read_crash_logs(api, ev),
        history.cluster_trends(api, ev),
        checked(ev, read_store(api, ev), "the object store"),
        read_strategies(api, ev)
        if any(p.get("state") == "PENDING" and not p.get("strategy") for p in ev.pgs or [])
        else nothing(),
    )
    return ev


async def _platform(api: RayAPI, ev: GraphInputs) -> None:
    """The pods' Kubernetes events the head ingests; when it does not, a note names the setting (an optional
    source: its absence leaves the other checks' verdict as it is)."""
    try:
        ev.platform_events = await api.events.platform()
    except Exception as exc:
        ev.unreadable.append(f"the Kubernetes pod events: {failure(exc)}")
        return
    if ev.platform_events is None:
        ev.info.append(NOT_INGESTED + ".")


async def cluster_events(api: RayAPI, ev: GraphInputs) -> list[dict[str, Any]] | None:
    """Cluster events (node added or removed, OOM kills, autoscaler decisions, worker crashes), the newest
    EVENTS_READ, oldest first (list_events' read)."""
    notes: list[str] = []
    try:
        rows = await api.events.rows(notes, limit=EVENTS_READ)
    except Exception as exc:
        ev.unreadable.append(f"the cluster events: {failure(exc)}")
        return None
    ev.unreadable += [f"the newest cluster events: {n}" for n in notes]
    rows.sort(key=lambda r: num(r.get("timestamp")))
    return rows[-EVENTS_READ:]


async def read_store(api: RayAPI, ev: GraphInputs) -> None:
    """The object store's holders when a node's store is near full or spilling (else one cheap read)."""
    notes: list[str] = []
    stores = await api.objects.store_stats(notes)
    if notes:  # not read: unknown, never taken for a store with room
        raise RayRequestFailed(notes[0])
    if store_pressure(stores):
        ev.store = (await api.objects.summarize(limit=STORE_HOLDERS_QUOTED)).model_dump(mode="json")


async def read_strategies(api: RayAPI, ev: GraphInputs) -> None:
    """The strategy of each placement group (the State API omits it; the GCS's table has it)."""
    try:
        strategies = await api.placement_groups.strategies()
    except Exception as exc:
        ev.unreadable.append(f"the placement group strategies: {failure(exc)} (STRICT_* not checked)")
        return
    for pg in ev.pgs or []:
        strategy = strategies.get(str(pg.get("placement_group_id")))
        if not pg.get("strategy") and strategy:
            pg["strategy"] = strategy


async def read_serve_decisions(api: RayAPI, serve: Row | None) -> list[Row] | None:
    """The autoscaling decisions the Serve controller logged, as rows (None: none to read, or unreadable)."""
    if not serve:
        return None
    logged, _unknown = await api.serve.decisions(serve)
    if logged is None:
        return None
    return [
        {"app": app, "deployment": dep, **d.model_dump(mode="json")}
        for (app, dep), decisions in logged[0].items()
        for d in decisions
    ]

    # Jobs of holders that the job list may lack (a job list cut at its limit).


async def read_crash_logs(api: RayAPI, ev: GraphInputs, dead_actors: bool = False) -> None:
    """Stderr of crashed workers: the newest dead worker of each looping actor, crashed task workers and the
    workers of the job's actors that died of a crash (``dead_actors``, for diagnose_job; CRASH_LOGS in all)."""
    dead = [
        w
        for w in ev.workers or []
        if w.get("worker_type") == "WORKER"
        and w.get("exit_type") not in ("INTENDED_USER_EXIT", "INTENDED_SYSTEM_EXIT")
    ]
    # An actor between two lives, or a task never placed, has no node yet: no worker log to read there.
    looping = [
        a
        for a in ev.actors or []
        if int(num(a.get("num_restarts"))) >= 1 and a.get("state") != "DEAD" and a.get("node_id")
    ][:LOOPING_ACTOR_LOGS]
    reads: list[tuple[str, Awaitable[Any]]] = []
    for actor in looping:
        node = actor.get("node_id")
        job = str(actor.get("job_id") or "")
        files = await _worker_files(api, ev, str(node), job)
        mine = [
            w
            for w in dead
            if w.get("node_id") == node
            and int(num(w.get("pid"))) in files
            and int(num(w.get("pid"))) != int(num(actor.get("pid")))
        ]
        actor["_dead_workers"] = [
            {k: w.get(k) for k in ("pid", "exit_type", "exit_detail", "end_time_ms", "worker_id")}
            for w in mine[-DEAD_WORKERS_PER_ACTOR:]
        ]
        newest = sorted(mine, key=lambda w: num(w.get("end_time_ms")))[-1:]
        for w in newest:
            target = LogTarget(pid=int(num(w.get("pid"))), node=str(node), stream="err")
            reads.append(
                (
                    f"actor:{actor.get('actor_id')}",
                    api.logs.tail(target, lines=CRASH_LOG_LINES, max_bytes=CRASH_LOG_BYTES),
                )
            )
    pids = {str(w.get("worker_id")): int(num(w.get("pid"))) for w in ev.workers or []}
    crashed = [
        (str(t.get("node_id")), int(num(t.get("worker_pid"))) or pids.get(str(t.get("worker_id")), 0))
        for t in ev.tasks or []
        if t.get("error_type") == "WORKER_DIED" and t.get("node_id")
    ]  # a crashed task's row may lack its worker's pid: the dead worker's record has it
    crashed = [c for c in crashed if c[1]][:CRASHED_TASK_LOGS]
    for a in (
        ev.actors or [] if dead_actors else []
    ):  # actors whose worker died (not in a loop): a segfault, os._exit, a fatal error
        ctx = (a.get("death_cause") or {}).get("actor_died_error_context") or {}
        pid = int(num(ctx.get("pid") or a.get("pid")))
        if (
            a.get("state") == "DEAD"
            and ctx.get("reason") == "WORKER_DIED"
            and a.get("node_id")
            and pid
            and len(crashed) < CRASH_LOGS
        ):
            crashed.append((str(a.get("node_id")), pid))
    for node, pid in dict.fromkeys(crashed):
        target = LogTarget(pid=pid, node=node, stream="err")
        reads.append(
            (f"{node}:{pid}", api.logs.tail(target, lines=CRASH_LOG_LINES, max_bytes=CRASH_LOG_BYTES))
        )
    results = await asyncio.gather(*(aw for _, aw in reads), return_exceptions=True)
    for (key, _), result in zip(reads, results, strict=True):
        if isinstance(result, BaseException):
            ev.unreadable.append(f"the worker log for {key}: {failure(result)}")
            continue
        ev.worker_logs[key] = [line for sec in result.sections for line in sec.lines][-CRASH_LOG_LINES:]


async def _worker_files(api: RayAPI, ev: GraphInputs, node_id: str, job_id: str) -> set[int]:
    """The pids of the job's worker processes on a node, from their log file names (worker-<id>-<job>-<pid>)."""
    try:
        names = await api.sources.logs.node_files(node_id, f"worker-*-{job_id}-*.err")
    except Exception as exc:
        ev.unreadable.append(f"the worker log list of node {node_id}: {failure(exc)}")
        return set()
    return {int(m[1]) for name in names if (m := re.search(r"-(\d+)\.err$", name))}
