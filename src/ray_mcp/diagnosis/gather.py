"""Gathering the evidence for diagnose_job and cluster_health through the Ray adapter, concurrently; the
reasoning over it lives beside (job.py, health.py) and talks to no cluster."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

from ray_mcp import models
from ray_mcp.diagnosis import evidence as chain_evidence
from ray_mcp.diagnosis import hang, kubernetes, report
from ray_mcp.diagnosis import health as health_reasoning
from ray_mcp.diagnosis import job as job_reasoning
from ray_mcp.diagnosis.findings import rank
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import (
    ACTOR_LOG_BYTES,
    ACTOR_LOG_LINES,
    AREA_ALIVE_ACTORS,
    AREA_DEAD_ACTORS,
    AREA_PENDING_GROUPS,
    AREA_RESTARTING_ACTORS,
    CRASHED_ACTOR_LOGS,
    DRIVER_LOG_BYTES,
    DRIVER_LOG_LINES,
    FAILED_JOBS_SHOWN,
    HEALTH_NODES,
    HEALTH_SERVE_LOG_LINES,
    JOB_DEAD_ACTORS_READ,
    PENDING_ACTORS_SHOWN,
    PENDING_GROUPS_SHOWN,
)
from ray_mcp.ray_api import RayAPI
from ray_mcp.ray_api.client import gather, nothing
from ray_mcp.ray_api.kuberay import RayTarget
from ray_mcp.ray_api.targets import LogTarget
from ray_mcp.shaping.jobs import entrypoint_resources, job_info, job_list
from ray_mcp.text import first_sentence

log = logging.getLogger("ray_mcp.diagnosis")


async def or_note(
    awaitable: Awaitable[Any], notes: list[str], what: str, missed: list[str] | None = None
) -> Any:
    """One piece of evidence: a failure to get it becomes a note (and an entry of ``missed``), not an error of
    the whole diagnosis. A check that could not run is never taken for a clean one: the verdict says UNKNOWN."""
    try:
        return await awaitable
    except RayMCPError as exc:
        notes.append(f"Could not check {what}: {first_sentence(str(exc))}")
    except Exception as exc:  # a bug in one check must not hide the others; its traceback goes to stderr
        log.error("ray-mcp: checking %s failed with an unexpected %s", what, type(exc).__name__, exc_info=exc)
        notes.append(f"Could not check {what}: unexpected {type(exc).__name__} in ray-mcp (see its log).")
    if missed is not None:
        missed.append(what)
    return None


async def diagnose_job(
    api: RayAPI, job: str, *, max_bytes: int, kube: RayTarget | None = None
) -> tuple[models.JobDiagnosis, str]:
    """Gather everything about one job concurrently, then rank the findings (diagnose_job)."""
    details = await api.jobs.details(job)
    info = job_info(details, time.time())
    notes: list[str] = []
    missed: list[str] = []
    job_id = info.job_id
    sid = info.submission_id
    by_job = [("job_id", "=", job_id)] if job_id else None
    driver, dead, pending, supervisor, tasks, pgs, capacities, status, ev = await gather(
        or_note(api.logs.tail(LogTarget(job=sid or job), lines=DRIVER_LOG_LINES, max_bytes=DRIVER_LOG_BYTES),
                      notes, "the driver log", missed),
        or_note(api.actors.list(filters=[*by_job, ("state", "=", "DEAD")], limit=JOB_DEAD_ACTORS_READ, detail=True, notes=[]),
                      notes, "the job's dead actors", missed) if by_job else nothing(),
        or_note(api.actors.list(filters=[*by_job, ("state", "=", "PENDING_CREATION")], limit=PENDING_ACTORS_SHOWN,
                                       detail=True, notes=[]), notes, "the job's pending actors", missed) if by_job else nothing(),
        or_note(api.actors.list(filters=[("name", "=", f"_ray_internal_job_actor_{sid}")], limit=1,
                                       detail=True, notes=[]), notes, "the job's supervisor", missed) if sid else nothing(),
        or_note(api.tasks.error_groups(filters=list(by_job)), notes, "the job's failed tasks", missed) if by_job else nothing(),
        or_note(api.placement_groups.status(placement_group=None, state="PENDING", job_id=job_id, limit=PENDING_GROUPS_SHOWN, notes=[]),
                      notes, "the job's placement groups", missed) if job_id else nothing(),
        or_note(api.nodes.capacities(), notes, "the nodes", missed),
        or_note(api.nodes.cluster_status(max_nodes=1), notes, "pending demands", missed)
        if info.status in ("PENDING", "RUNNING") else nothing(),
        chain_evidence.gather_job(api, details, None),
    )  # fmt: skip
    driver_lines = [line for section in driver.sections for line in section.lines] if driver else None
    ev.driver_lines = driver_lines
    await chain_evidence.phase_two(api, ev)
    evidence = job_reasoning.JobEvidence(
        info=info,
        entrypoint_resources=entrypoint_resources(details),
        driver_lines=driver_lines,
        dead_actors=list(dead.actors) if dead else [],
        dead_actors_total=dead.matched if dead else 0,
        pending_actors=list(pending.actors) if pending else [],
        supervisor=supervisor.actors[0] if supervisor and supervisor.actors else None,
        failed_tasks=list(tasks or []),
        pending_pgs=list(pgs.placement_groups) if pgs else [],
        node_totals=[dict(c.total) for c in capacities[1]] if capacities else [],
        infeasible_demands=[d for d in status.pending_demands if d.infeasible] if status else [],
    )
    crashed = [a for a in evidence.dead_actors if a.death_cause and a.death_cause.error_type][
        :CRASHED_ACTOR_LOGS
    ]
    logs = await gather(
        *(or_note(api.logs.tail(LogTarget(actor_id=a.actor_id), lines=ACTOR_LOG_LINES, max_bytes=ACTOR_LOG_BYTES,
                                       grep=r"Traceback|Error|Exception", context=2), notes, f"the log of actor {a.actor_id}")
          for a in crashed)
    )  # fmt: skip
    for actor, tail in zip(crashed, logs, strict=True):
        if tail is not None:
            evidence.actor_log_lines[actor.actor_id] = [line for sec in tail.sections for line in sec.lines]
    findings = job_reasoning.diagnose_job(evidence)
    # A RUNNING job that makes no progress: where its processes wait, and what the driver waits on (hang.py).
    stall = await or_note(hang.gather(api, details), notes, "the job's progress", missed)
    if stall is not None and (stalled := hang.findings(stall, evidence.node_totals, sid or job)):
        findings = rank([*(f for f in findings if f.kind != "running"), *stalled])
    if kube is not None and info.status != "SUCCEEDED":  # the pods under it (k8s:// clusters)
        findings = rank([*findings, *await kubernetes.findings(kube, api, notes=notes)])
    return report.job_report(job, info, ev, findings, notes, max_bytes=max_bytes, unchecked=missed)


async def cluster_health(
    api: RayAPI, *, max_bytes: int, kube: RayTarget | None = None
) -> tuple[models.ClusterHealth, str]:
    """What is wrong in the cluster right now, from every angle at once, ranked by severity.

    The evidence graph (evidence.gather_cluster) reads actors, tasks, nodes and placement groups once and
    explains them; the per-area checks it stands in for (dead, restarting and looping actors, failed tasks,
    pending groups) run only when it could not read actors or nodes. The job list is read once, for both the
    failed jobs and the graph."""
    notes: list[str] = []
    missed: list[str] = []
    checks = [
        "nodes and demands", "failed jobs", "dead actors", "restarting actors", "actor restarts",
        "failed tasks", "placement groups", "Serve", "cluster events",
    ]  # fmt: skip
    status, jobs, serve, ev = await gather(
        or_note(api.nodes.cluster_status(max_nodes=HEALTH_NODES), notes, "nodes and demands", missed),
        or_note(api.jobs.rows(), notes, "failed jobs", missed),
        or_note(api.serve.status(app=None, log_lines=HEALTH_SERVE_LOG_LINES), notes, "Serve", missed),
        chain_evidence.gather_cluster(api, job_list=True),
    )  # fmt: skip
    failed = job_list(
        jobs or [], statuses=["FAILED"], entrypoint_contains=None, limit=FAILED_JOBS_SHOWN, now_s=time.time()
    )
    by_id = {str(j.get("submission_id") or j.get("job_id")): j for j in jobs or []}
    failed_jobs = [job_info(by_id[str(j.submission_id or j.job_id)], time.time())
                   for j in failed.jobs if j.submission_id or j.job_id]  # fmt: skip
    evidence = health_reasoning.HealthEvidence(
        status=status,
        failed_jobs=failed_jobs,
        serve=serve if serve is not None and serve.running else None,
    )
    if ev.actors is None or ev.nodes is None:  # the graph cannot explain the cluster: the per-area checks
        await _area_checks(api, evidence, notes, missed)
    else:
        sources = {"dead actors": ev.actors, "restarting actors": ev.actors, "actor restarts": ev.alive_actors,
                   "failed tasks": ev.tasks, "placement groups": ev.pgs}  # fmt: skip
        missed += [what for what, rows in sources.items() if rows is None]
    findings = health_reasoning.cluster_health(evidence)
    if kube is not None:  # the pods under it (k8s:// clusters)
        findings = rank([*findings, *await kubernetes.findings(kube, api, notes=notes)])
    if ev.events is None:
        missed.append("cluster events")
    checked = [c for c in checks if c not in missed]
    return report.health_report(
        api.dashboard_url, ev, findings, checked, [*ev.capped, *notes], max_bytes=max_bytes, unchecked=missed
    )


async def _area_checks(
    api: RayAPI, evidence: health_reasoning.HealthEvidence, notes: list[str], missed: list[str]
) -> None:
    """The per-area checks of actors, tasks and placement groups, for when the evidence graph has no actors
    or nodes to reason over (their State API lists failed)."""
    dead, restarting, alive, tasks, pgs = await gather(
        or_note(api.actors.list(filters=[("state", "=", "DEAD")], limit=AREA_DEAD_ACTORS, detail=True, notes=[]),
                      notes, "dead actors", missed),
        or_note(api.actors.list(filters=[("state", "=", "RESTARTING")], limit=AREA_RESTARTING_ACTORS, detail=True, notes=[]),
                      notes, "restarting actors", missed),
        or_note(api.actors.list(filters=[("state", "=", "ALIVE")], limit=AREA_ALIVE_ACTORS, detail=True, notes=[]),
                      notes, "actor restarts", missed),
        or_note(api.tasks.error_groups(filters=[]), notes, "failed tasks", missed),
        or_note(api.placement_groups.status(placement_group=None, state="PENDING", job_id=None, limit=AREA_PENDING_GROUPS, notes=[]), notes,
                      "placement groups", missed),
    )  # fmt: skip
    looping = [a for a in (alive.actors if alive else []) if (a.restarts or 0) >= 3]
    evidence.dead_actors = list(dead.actors) if dead else []
    evidence.dead_actors_total = dead.matched if dead else 0
    evidence.restarting = [*(restarting.actors if restarting else []), *looping]
    evidence.task_errors = list(tasks or [])
    evidence.pending_pgs = list(pgs.placement_groups) if pgs else []
    evidence.pending_pgs_total = pgs.matched if pgs else 0
