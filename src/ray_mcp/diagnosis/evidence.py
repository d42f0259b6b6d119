"""Gathering the evidence graph's inputs through RayAPI, in a bounded number of requests.

Phase 1 (concurrent, 7 requests): the job's actors and task attempts, nodes, placement groups, jobs, cluster
events and dead workers. Phase 2 (concurrent, only what phase 1 calls for, at most ~8 requests): the holders of
resources when something waits for them, an actor looked up by name, owners that are not the job's own, and the
stderr of workers that crashed in a loop. A source that fails is recorded in ``GraphInputs.unreadable`` and the
reasoning says so instead of concluding anything from its absence.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ray_mcp.answers.events import NOT_INGESTED
from ray_mcp.answers.targets import LogTarget, Target
from ray_mcp.diagnosis import history
from ray_mcp.diagnosis.graph import (
    DRIVER_WORKER,
    NAME_TAKEN,
    OWNER_REF,
    GraphInputs,
    Row,
    failure_restarts,
    num,
)
from ray_mcp.diagnosis.recognise import ACTOR_ERROR, CONNECT_FAILED, actor_ids
from ray_mcp.errors import RayMCPError, RayRequestFailed
from ray_mcp.limits import (
    CLUSTER_ROWS_READ,
    CRASH_LOG_BYTES,
    CRASH_LOG_LINES,
    CRASH_LOGS,
    CRASHED_TASK_LOGS,
    DEAD_WORKERS_PER_ACTOR,
    DEAD_WORKERS_READ,
    DRIVER_LOG_BYTES,
    DRIVER_LOG_LINES,
    EVENTS_READ,
    HANG_STACK_BYTES,
    HANG_STACK_FRAMES,
    HANG_STACK_PROCESSES,
    HEALTH_NODES,
    JOB_ACTORS_READ,
    LOOPING_ACTOR_LOGS,
    OWNER_SEARCH_CHARS,
    OWNER_SEARCH_TASKS,
    OWNERS_READ,
    RELATED_ACTORS_NAMED,
    RELATED_ACTORS_READ,
    SERVE_SEARCH_CHARS,
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


async def _rows(
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


def waits_for_resources(ev: GraphInputs) -> bool:
    states = {"PENDING_NODE_ASSIGNMENT"}
    if any(t.get("state") in states for t in ev.tasks or []):
        return True
    if any(a.get("state") in ("PENDING_CREATION", "RESTARTING") for a in ev.actors or []):
        return True
    job_id = (ev.job or {}).get("job_id")  # a job waits on its own groups, not on another job's
    if any(
        p.get("state") in ("PENDING", "RESCHEDULING")
        and (job_id is None or p.get("creator_job_id") == job_id)
        for p in ev.pgs or []
    ):
        return True
    return bool(ev.job and ev.job.get("status") == "PENDING")


def owner_workers(ev: GraphInputs, texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        for m in OWNER_REF.finditer(text):
            wid = m["worker"]
            if not DRIVER_WORKER.match(wid) and wid not in found:
                found.append(wid)
    for a in ev.actors or []:
        ctx = (a.get("death_cause") or {}).get("actor_died_error_context") or {}
        if (
            ctx.get("reason") == "OWNER_DIED"
            and ctx.get("owner_id")
            and not DRIVER_WORKER.match(str(ctx["owner_id"]))
        ):
            found.append(str(ctx["owner_id"]))
    return found[:OWNERS_READ]


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


SUPERVISOR_NAMESPACE = "SUPERVISOR_ACTOR_RAY_NAMESPACE"  # Ray's SUPERVISOR_ACTOR_RAY_NAMESPACE


async def gather_job(api: RayAPI, job: str) -> GraphInputs:
    """Everything diagnose_job reasons over, read once: the job, its driver log, actors and tasks, the whole
    cluster's nodes, groups, jobs, events and dead workers; then what those call for (phase_two)."""
    details = await api.jobs.details(job)
    ev = GraphInputs(now_ms=time.time() * 1000, job=dict(details))
    job_id = details.get("job_id")
    sid = details.get("submission_id")
    by_job = [("job_id", "=", str(job_id))] if job_id else None
    # the job's supervisor as Ray names it: its name in its namespace (dashboard/modules/job/common.py)
    supervisor = [
        ("name", "=", f"_ray_internal_job_actor_{sid}"),
        ("ray_namespace", "=", SUPERVISOR_NAMESPACE),
    ]
    ev.actors, ev.tasks, _, driver, ev.supervisor = await asyncio.gather(
        _rows(api, ev, "actors", "the job's actors", filters=by_job, limit=JOB_ACTORS_READ)
        if by_job
        else nothing(),
        _rows(api, ev, "tasks", "the job's tasks", filters=by_job, limit=TASKS_READ) if by_job else nothing(),
        _cluster_wide(api, ev),
        checked(
            ev,
            api.logs.tail(LogTarget(job=str(sid or job)), lines=DRIVER_LOG_LINES, max_bytes=DRIVER_LOG_BYTES),
            "the driver log",
        ),
        checked(ev, _first(api, supervisor), "the job's supervisor")
        if sid and details.get("status") == "PENDING"
        else nothing(),
    )
    ev.driver_lines = [line for section in driver.sections for line in section.lines] if driver else None
    if job_id and details.get("status") == "RUNNING":  # a pipeline that stalls with no error (chains/data.py)
        ev.datasets = await checked(ev, api.data.datasets(str(job_id)), "Ray Data's datasets")
    running = details.get("status") == "RUNNING"  # its trends: how its memory and throughput moved
    await asyncio.gather(phase_two(api, ev), history.job_trends(api, ev) if running else nothing())
    if details.get("status") in ("PENDING", "RUNNING") or STORE_TROUBLE.search(
        "\n".join(ev.driver_lines or [])
    ):
        await checked(ev, _store(api, ev), "the object store")
    if stalled_by_tasks(ev):  # where its processes wait, in their stacks
        target = Target(kind="job", job=str(sid or job_id))
        stacks = await checked(
            ev,
            api.stacks.traces(
                target, limit=HANG_STACK_PROCESSES, max_frames=HANG_STACK_FRAMES, max_bytes=HANG_STACK_BYTES
            ),
            "the job's stacks",
        )
        ev.stacks = stacks.model_dump(mode="json") if stacks is not None else None
    return ev


async def _first(api: RayAPI, filters: list[tuple[str, str, str]]) -> Row | None:
    found = await api.sources.state.actors(filters=filters, limit=1)
    return dict(found["result"][0]) if found["result"] else None


def stalled_by_tasks(ev: GraphInputs) -> bool:
    """A RUNNING job old enough to judge whose tasks all stood still for NO_PROGRESS_S (hang.py reads why)."""
    from ray_mcp.diagnosis.hang import reading

    stall = reading(ev)
    return stall is not None and stall.status != "progressing"


async def _cluster_wide(api: RayAPI, ev: GraphInputs) -> None:
    """What every gathering reads of the whole cluster, concurrently: nodes, placement groups, jobs (the Jobs
    API's list, which also teaches the redactor every job's env_vars), cluster events and dead workers."""
    ev.nodes, ev.pgs, ev.jobs, ev.events, ev.workers = await asyncio.gather(
        _rows(api, ev, "nodes", "the nodes", limit=CLUSTER_ROWS_READ),
        _rows(api, ev, "placement_groups", "the placement groups", limit=CLUSTER_ROWS_READ),
        _listed_jobs(api, ev),
        cluster_events(api, ev),
        _rows(
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
            _rows(
                api,
                ev,
                "actors",
                "the actors that are not alive",
                filters=[("state", "!=", "ALIVE")],
                limit=CLUSTER_ROWS_READ,
            ),
            _rows(
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
    rows = await _rows(
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
        _cluster_wide(api, ev),
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
    ev.serve_decisions = await _serve_decisions(api, serve)
    ev.unchecked = [c for c, sources in CHECKS.items() if any(getattr(ev, s) is None for s in sources)]
    await asyncio.gather(
        _platform(api, ev),
        _crash_logs(api, ev),
        history.cluster_trends(api, ev),
        checked(ev, _store(api, ev), "the object store"),
        _strategies(api, ev)
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


# What a job's driver prints when the object store is its trouble: then diagnose_job looks at the store.
STORE_TROUBLE = re.compile(r"ObjectStoreFullError|OutOfDiskError|ObjectLostError|[Ss]pill(?:ed|ing)")


async def _store(api: RayAPI, ev: GraphInputs) -> None:
    """The object store's holders when a node's store is near full or spilling (else one cheap read)."""
    notes: list[str] = []
    stores = await api.objects.store_stats(notes)
    if notes:  # not read: unknown, never taken for a store with room
        raise RayRequestFailed(notes[0])
    if store_pressure(stores):
        ev.store = (await api.objects.summarize(limit=STORE_HOLDERS_QUOTED)).model_dump(mode="json")


async def _strategies(api: RayAPI, ev: GraphInputs) -> None:
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


async def phase_two(api: RayAPI, ev: GraphInputs) -> None:
    """The requests phase 1 calls for (holders, a named actor, owners, crash logs), concurrently."""
    jobs: list[Awaitable[Any]] = []
    if waits_for_resources(ev):
        jobs.append(_holders(api, ev))
    job_id = (ev.job or {}).get("job_id")
    if any(
        (p.get("state") != "CREATED" and p.get("creator_job_id") in (job_id, None))
        or p.get("state") == "PENDING"
        for p in ev.pgs or []
    ) and not all(p.get("strategy") for p in ev.pgs or []):
        jobs.append(_strategies(api, ev))
    text = "\n".join(ev.driver_lines or [])
    m = re.search(r"Failed to look up actor(?: with name)? '(?P<name>[^']+)'", text) or NAME_TAKEN.search(
        text
    )
    if m:
        jobs.append(_related(api, ev, [("name", "=", m["name"])], f"actors named {m['name']!r}"))
    # An actor the driver's ActorDiedError names that is not the job's own (another job created it).
    known = {str(a.get("actor_id")) for a in ev.actors or []}
    for aid in (
        actor_ids(text[-OWNER_SEARCH_CHARS:])[:RELATED_ACTORS_NAMED] if ACTOR_ERROR.search(text) else []
    ):
        if aid not in known:
            jobs.append(_related(api, ev, [("actor_id", "=", aid)], f"actor {aid}"))
    messages = [
        text,
        *[str(t.get("error_message") or "") for t in ev.tasks or [] if t.get("state") == "FAILED"][
            :OWNER_SEARCH_TASKS
        ],
    ]
    for wid in owner_workers(ev, messages):
        jobs.append(_owner(api, ev, wid))
    jobs.append(_crash_logs(api, ev, dead_actors=True))
    if CONNECT_FAILED.search(text):  # a driver that never reached the cluster: where the cluster is
        jobs.append(_cluster_address(api, ev))
    if SERVE_DEPLOY.search(text[-SERVE_SEARCH_CHARS:]) or any(
        str(a.get("class_name") or "").startswith("ServeReplica:") for a in ev.actors or []
    ):
        jobs.append(_serve(api, ev))
    await asyncio.gather(*jobs)


# A driver whose serve.run failed ("Deploying application embedder failed: ..."), or one that called a Serve app.
SERVE_DEPLOY = re.compile(r"Deploying application .{0,80}failed|RayServeException|DeploymentUnavailable")


async def _cluster_address(api: RayAPI, ev: GraphInputs) -> None:
    """This cluster's GCS address (given, or found once from its dashboard), for a driver that tried another."""
    try:
        ev.cluster_address = await api.gcs.known_address()
    except Exception as exc:
        ev.unreadable.append(f"this cluster's GCS address: {failure(exc)}")


async def _serve(api: RayAPI, ev: GraphInputs) -> None:
    """The Serve applications' status (why a deployment failed: its replicas' constructor error)."""
    try:
        ev.serve = await api.serve.details()
    except Exception as exc:
        ev.unreadable.append(f"the Serve applications: {failure(exc)}")
    ev.serve_decisions = await _serve_decisions(api, ev.serve)


async def _serve_decisions(api: RayAPI, serve: Row | None) -> list[Row] | None:
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


async def _holders(api: RayAPI, ev: GraphInputs) -> None:
    alive, running = await asyncio.gather(
        _rows(
            api,
            ev,
            "actors",
            "the alive actors (resource holders)",
            filters=[("state", "=", "ALIVE")],
            limit=CLUSTER_ROWS_READ,
        ),
        _rows(
            api,
            ev,
            "tasks",
            "the running tasks (resource holders)",
            filters=[("state", "=", "RUNNING")],
            limit=TASKS_READ,
        ),
    )
    ev.alive_actors, ev.running_tasks = alive, running
    # Jobs of holders that the job list may lack (a job list cut at its limit).


async def _related(api: RayAPI, ev: GraphInputs, filters: list[tuple[str, str, str]], what: str) -> None:
    rows = await _rows(api, ev, "actors", what, filters=filters, limit=RELATED_ACTORS_READ)
    ev.related_actors += rows or []


async def _owner(api: RayAPI, ev: GraphInputs, worker_id: str) -> None:
    """The owner worker of a lost object or an orphaned actor: its exit, and the actor that ran in it."""
    known = {w.get("worker_id"): w for w in ev.workers or []}
    worker = known.get(worker_id)
    if worker is None:
        rows = await _rows(
            api, ev, "workers", f"worker {worker_id}", filters=[("worker_id", "=", worker_id)], limit=1
        )
        if rows:
            worker = rows[0]
            ev.workers = [*(ev.workers or []), worker]
    pid = int(num((worker or {}).get("pid")))
    if pid and not any(int(num(a.get("pid"))) == pid for a in ev.actors or []):
        await _related(api, ev, [("pid", "=", str(pid))], f"the actor in pid {pid}")


async def _crash_logs(api: RayAPI, ev: GraphInputs, dead_actors: bool = False) -> None:
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
