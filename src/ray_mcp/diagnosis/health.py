"""What is wrong in the cluster right now: pure reasoning over the evidence gather.py collected."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ray_mcp import models
from ray_mcp.diagnosis.findings import (
    CONTRIBUTING,
    FT_DOC,
    JOBS_DOC,
    OBJECT_STORE_DOC,
    OBS_DOC,
    PG_DOC,
    SERVE_DOC,
    STUCK,
    SYMPTOM,
    finding,
    rank,
)
from ray_mcp.diagnosis.job import crashed
from ray_mcp.diagnosis.tracebacks import (
    _EXCEPTION,
    _LOG_RECORD,
    cut_text,
    first_line,
    last_traceback,
    short_type,
    tidy,
)
from ray_mcp.limits import (
    CAUSE_CHARS,
    CRASH_CAUSES_QUOTED,
    DEAD_NODES_SHOWN,
    DEMANDS_QUOTED,
    DEPLOYMENT_EXCEPTION_LINES,
    EVIDENCE_LINE_CHARS,
    FAILED_JOBS_SHOWN,
    FAILING_DEPLOYMENTS_QUOTED,
    INFEASIBLE_DEMANDS_QUOTED,
    JOB_CAUSE_HEAD_CHARS,
    LINE_CHARS,
    PENDING_GROUPS_QUOTED,
    REPLICA_LOG_LINES_QUOTED,
    RESTARTING_ACTORS_QUOTED,
    SHORT_CAUSE_CHARS,
    STORE_HOLDERS_QUOTED,
    TASK_ERROR_TYPES_QUOTED,
)
from ray_mcp.shaping.objects import STORE_NEAR_FULL, store_pressure
from ray_mcp.text import quoted

_SYSTEM_LINE = re.compile(r"\((?:pid=)?(?:gcs_server|raylet|dashboard\w*|monitor|log_monitor|autoscaler)\)")


def job_cause(info: models.JobInfo) -> str:
    """One line on why a job failed: its last exception, else the most telling line of its message."""
    # Ray's own processes print into the driver's output too ("(pid=gcs_server) ... exporter agent"): not the job's.
    lines = [line for line in (info.message or "").splitlines() if not _SYSTEM_LINE.search(line)]
    tb = last_traceback(lines)
    if tb is not None and tb.innermost:
        kind, msg = tb.innermost
        where = f" ({tb.user_frame.short()})" if tb.user_frame and not tb.user_frame.internal else ""
        return cut_text(f"{short_type(kind)}: {msg}{where}", CAUSE_CHARS)
    telling = [
        line
        for line in lines[1:]
        if line.strip() and not _LOG_RECORD.match(line) and not line.startswith("Running entrypoint")
    ]
    head = first_line(info.message, JOB_CAUSE_HEAD_CHARS)
    code = (
        f"exit code {info.driver_exit_code}"
        if info.driver_exit_code is not None
        else (info.error_type or "FAILED")
    )
    return cut_text(f"{code}: {tidy(telling[-1])}" if telling else head, CAUSE_CHARS)


@dataclass
class HealthEvidence:
    status: models.ClusterStatus | None = None
    failed_jobs: list[models.JobInfo] = field(default_factory=list)
    dead_actors: list[models.Actor] = field(default_factory=list)
    dead_actors_total: int = 0
    restarting: list[models.Actor] = field(default_factory=list)
    task_errors: list[models.ErrorGroup] = field(default_factory=list)
    serve: models.ServeStatus | None = None
    pending_pgs: list[models.PlacementGroup] = field(default_factory=list)
    pending_pgs_total: int = 0
    store: models.ObjectStoreSummary | None = None  # read only when a node's store is near full or spilling


def _status_findings(s: models.ClusterStatus) -> list[models.Finding]:
    """Dead nodes, demands that wait (forever or for resources in use), memory pressure."""
    findings: list[models.Finding] = []
    dead = [n for n in s.nodes if n.state == "DEAD"]
    if s.nodes_dead:
        findings.append(finding(STUCK, f"{s.nodes_dead} node(s) are DEAD",
                            [f"{n.node_id} {n.ip}: {cut_text(n.death_reason or '', CAUSE_CHARS)}" for n in dead[:DEAD_NODES_SHOWN]],
                            ["list_nodes state=DEAD"], [FT_DOC], kind="dead_node"))  # fmt: skip
    infeasible = [d for d in s.pending_demands if d.infeasible]
    waiting = [d for d in s.pending_demands if not d.infeasible]
    if infeasible:
        findings.append(finding(STUCK - 5, f"{len(infeasible)} resource demand(s) fit on no node and wait forever",
                            [f"{d.kind} {d.strategy or ''} {d.bundles} x{d.count}".replace("  ", " ") for d in infeasible[:INFEASIBLE_DEMANDS_QUOTED]],
                            ["pg_status state=PENDING", "cluster_status"], [PG_DOC], kind="infeasible"))  # fmt: skip
    if waiting:
        findings.append(finding(SYMPTOM, f"{len(waiting)} resource demand(s) wait for resources in use",
                            [f"{d.kind} {d.bundles} x{d.count}" for d in waiting[:DEMANDS_QUOTED]], ["cluster_status"],
                            kind="pending_demand"))  # fmt: skip
    for name in ("object_store_memory", "memory"):
        for node in s.nodes:
            use = node.resources.get(name)
            if node.state == "ALIVE" and use and use.total and use.used / use.total >= 0.8:
                pct = 100 * use.used / use.total
                findings.append(finding(CONTRIBUTING + 10 if pct >= 95 else SYMPTOM,
                                    f"{name} on node {node.node_id} is {pct:.0f}% used",
                                    [f"{use.used / 1024**3:.2f} of {use.total / 1024**3:.2f} GiB"],
                                    ["list_actors node_id=... to see who holds it"], [OBS_DOC], kind="memory"))  # fmt: skip
    return findings


def store_finding(store: models.ObjectStoreSummary | None) -> models.Finding | None:
    """A node's object store near full or spilling, with who holds the most (summarize_objects' read)."""
    pressure = store_pressure(store.nodes) if store is not None else []
    if store is None or not pressure:
        return None
    full = any(n.fraction is not None and n.fraction >= STORE_NEAR_FULL for n in store.nodes)
    holders = [f"{g.owner} holds {g.bytes / 1024**2:.0f} MiB in {g.objects} ref(s) from {quoted(g.call_site)}"
               + (f" (LEAK: {g.leak})" if g.leak else "") for g in store.groups[:STORE_HOLDERS_QUOTED]]  # fmt: skip
    return finding(CONTRIBUTING if full else SYMPTOM, "The object store is " + ("near full" if full else "spilling"),
                   [*pressure, *holders], ["summarize_objects"], [OBJECT_STORE_DOC], kind="object_store")  # fmt: skip


def _serve_findings(serve: models.ServeStatus) -> list[models.Finding]:
    """Serve applications that are not RUNNING, with the failing deployments' errors and replica logs."""
    findings: list[models.Finding] = []
    for app in serve.apps:
        if app.status in ("RUNNING", "NOT_STARTED"):
            continue
        bad = [d for d in app.deployments if d.status not in ("HEALTHY", "UPSCALING", "DOWNSCALING")]
        evidence = [first_line(app.message)] if app.message else []
        for d in bad[:FAILING_DEPLOYMENTS_QUOTED]:
            error = d.error or d.message or ""
            evidence.append(
                f"deployment {d.name}: {d.status} ({d.status_trigger or '-'}) {first_line(error, LINE_CHARS)}"
            )
            exc = [line for line in (error or "").splitlines() if _EXCEPTION.match(line.strip())]
            evidence += [
                f"  {cut_text(line, EVIDENCE_LINE_CHARS)}" for line in exc[-DEPLOYMENT_EXCEPTION_LINES:]
            ]
            evidence += [
                f"  [replica log] {cut_text(line, CAUSE_CHARS)}"
                for line in (d.log_tail or [])[-REPLICA_LOG_LINES_QUOTED:]
            ]
        findings.append(finding(STUCK if app.status in ("DEPLOY_FAILED", "UNHEALTHY") else CONTRIBUTING,
                            f"Serve application {app.name!r} is {app.status}"
                            + (f": deployment {bad[0].name} is {bad[0].status}" if bad else ""),
                            evidence, [f"serve_status app={app.name}", f"prompt serve-deployment-unhealthy(app={app.name})"],
                            [SERVE_DOC, "prompt:serve-deployment-unhealthy"], kind="serve"))  # fmt: skip
    return findings


def cluster_health(e: HealthEvidence) -> list[models.Finding]:
    """Every finding about the cluster, ranked: the most urgent first."""
    findings: list[models.Finding] = []
    if e.status is not None:
        findings += _status_findings(e.status)
    if e.pending_pgs_total:
        findings.append(finding(CONTRIBUTING + 10 if any(p.infeasible for p in e.pending_pgs) else SYMPTOM,
                                f"{e.pending_pgs_total} placement group(s) are PENDING",
                                [f"{p.placement_group_id} {p.name or ''}: {cut_text(p.why_pending or '', SHORT_CAUSE_CHARS)}" for p in e.pending_pgs[:PENDING_GROUPS_QUOTED]],
                                ["pg_status state=PENDING"], [PG_DOC, "prompt:debug-pending-placement-group"],
                                kind="pending_pg"))  # fmt: skip
    if e.serve is not None:
        findings += _serve_findings(e.serve)
    if (store := store_finding(e.store)) is not None:
        findings.append(store)
    if e.failed_jobs:
        findings.append(finding(CONTRIBUTING, f"{len(e.failed_jobs)} job(s) failed recently",
                                [f"{j.submission_id or j.job_id}: {job_cause(j)}" for j in e.failed_jobs[:FAILED_JOBS_SHOWN]],
                                ["diagnose_job job=<id> for the root cause"], [JOBS_DOC], kind="failed_jobs"))  # fmt: skip
    if e.restarting:
        findings.append(finding(CONTRIBUTING + 5, f"{len(e.restarting)} actor(s) restart in a loop or are RESTARTING",
                                [f"{a.class_name} ({a.actor_id}) {a.state}, restarts={a.restarts}" for a in e.restarting[:RESTARTING_ACTORS_QUOTED]],
                                ["tail_logs actor_id=<id> to see why each restart dies"], [FT_DOC], kind="restarting"))  # fmt: skip
    crashes = [a for a in e.dead_actors if crashed(a)]
    if crashes:
        groups: dict[str, list[models.Actor]] = {}
        for a in crashes:
            cause = a.death_cause
            key = f"{a.class_name}: {cause.reason if cause else 'UNKNOWN'}" + (
                f" {cause.error_type}" if cause and cause.error_type else ""
            )
            groups.setdefault(key, []).append(a)
        findings.append(finding(CONTRIBUTING, f"{len(crashes)} actor(s) crashed (of {e.dead_actors_total} DEAD), by cause:",
                                [f"{len(v)}x {k}: {cut_text(tidy((v[0].death_cause.message if v[0].death_cause else '') or ''), SHORT_CAUSE_CHARS)}"
                                 for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:CRASH_CAUSES_QUOTED]],
                                ["list_actors state=DEAD class_name=<class>", "get_actor actor_id=<id> for one in full"],
                                [FT_DOC], kind="dead_actors"))  # fmt: skip
    if e.task_errors:
        total = sum(g.count for g in e.task_errors)
        app_errors = any(g.error_type == "APPLICATION_ERROR" for g in e.task_errors)
        findings.append(finding(CONTRIBUTING if app_errors else SYMPTOM, f"{total} task(s) failed, by error type:",
                                [f"{g.count}x {g.error_type}: {cut_text(first_line(g.sample_message), SHORT_CAUSE_CHARS)}" for g in e.task_errors[:TASK_ERROR_TYPES_QUOTED]],
                                ["summarize_tasks", "list_tasks state=FAILED error_type=<type>"], [FT_DOC], kind="failed_tasks"))  # fmt: skip
    return rank(findings)
