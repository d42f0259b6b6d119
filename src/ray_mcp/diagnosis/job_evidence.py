"""Gathering diagnose_job's evidence through RayAPI, in a bounded number of requests.

Phase 1 (concurrent, 7 requests): the job's actors and task attempts, and what every gathering reads of the whole
cluster (evidence.py: nodes, placement groups, jobs, cluster events and dead workers). Phase 2 (concurrent, only
what phase 1 calls for, at most ~8 requests): the holders of resources when something waits for them, an actor
looked up by name, owners that are not the job's own, and the stderr of workers that crashed in a loop. A source
that fails is recorded in ``GraphInputs.unreadable`` and the reasoning says so instead of concluding anything from
its absence.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ray_mcp.answers.targets import LogTarget, Target
from ray_mcp.diagnosis import history
from ray_mcp.diagnosis.evidence import (
    checked,
    failure,
    read_cluster_wide,
    read_crash_logs,
    read_rows,
    read_serve_decisions,
    read_store,
    read_strategies,
)
from ray_mcp.diagnosis.graph import (
    DRIVER_WORKER,
    NAME_TAKEN,
    OWNER_REF,
    GraphInputs,
    Row,
    num,
)
from ray_mcp.diagnosis.recognise import ACTOR_ERROR, CONNECT_FAILED, actor_ids
from ray_mcp.limits import (
    CLUSTER_ROWS_READ,
    DRIVER_LOG_BYTES,
    DRIVER_LOG_LINES,
    HANG_STACK_FRAMES,
    HANG_STACK_PROCESSES,
    JOB_ACTORS_READ,
    OWNER_SEARCH_CHARS,
    OWNER_SEARCH_TASKS,
    OWNERS_READ,
    RELATED_ACTORS_NAMED,
    RELATED_ACTORS_READ,
    SERVE_SEARCH_CHARS,
    TASKS_READ,
)
from ray_mcp.sources.dashboard import nothing

if TYPE_CHECKING:
    from ray_mcp.answers import RayAPI


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
        read_rows(api, ev, "actors", "the job's actors", filters=by_job, limit=JOB_ACTORS_READ)
        if by_job
        else nothing(),
        read_rows(api, ev, "tasks", "the job's tasks", filters=by_job, limit=TASKS_READ)
        if by_job
        else nothing(),
        read_cluster_wide(api, ev),
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
        await checked(ev, read_store(api, ev), "the object store")
    if stalled_by_tasks(ev):  # where its processes wait, in their stacks
        target = Target(kind="job", job=str(sid or job_id))
        stacks = await checked(
            ev,
            api.stacks.traces(target, limit=HANG_STACK_PROCESSES, max_frames=HANG_STACK_FRAMES),
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


# What a job's driver prints when the object store is its trouble: then diagnose_job looks at the store.
STORE_TROUBLE = re.compile(r"ObjectStoreFullError|OutOfDiskError|ObjectLostError|[Ss]pill(?:ed|ing)")


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
        jobs.append(read_strategies(api, ev))
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
    jobs.append(read_crash_logs(api, ev, dead_actors=True))
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
    ev.serve_decisions = await read_serve_decisions(api, ev.serve)


async def _holders(api: RayAPI, ev: GraphInputs) -> None:
    alive, running = await asyncio.gather(
        read_rows(
            api,
            ev,
            "actors",
            "the alive actors (resource holders)",
            filters=[("state", "=", "ALIVE")],
            limit=CLUSTER_ROWS_READ,
        ),
        read_rows(
            api,
            ev,
            "tasks",
            "the running tasks (resource holders)",
            filters=[("state", "=", "RUNNING")],
            limit=TASKS_READ,
        ),
    )
    ev.alive_actors, ev.running_tasks = alive, running


async def _related(api: RayAPI, ev: GraphInputs, filters: list[tuple[str, str, str]], what: str) -> None:
    rows = await read_rows(api, ev, "actors", what, filters=filters, limit=RELATED_ACTORS_READ)
    ev.related_actors += rows or []


async def _owner(api: RayAPI, ev: GraphInputs, worker_id: str) -> None:
    """The owner worker of a lost object or an orphaned actor: its exit, and the actor that ran in it."""
    known = {w.get("worker_id"): w for w in ev.workers or []}
    worker = known.get(worker_id)
    if worker is None:
        rows = await read_rows(
            api, ev, "workers", f"worker {worker_id}", filters=[("worker_id", "=", worker_id)], limit=1
        )
        if rows:
            worker = rows[0]
            ev.workers = [*(ev.workers or []), worker]
    pid = int(num((worker or {}).get("pid")))
    if pid and not any(int(num(a.get("pid"))) == pid for a in ev.actors or []):
        await _related(api, ev, [("pid", "=", str(pid))], f"the actor in pid {pid}")
