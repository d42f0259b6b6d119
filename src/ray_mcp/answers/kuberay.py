"""Read one KubeRay object with its RayCluster's pods and their events, and Ray's own view where it differs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ray_mcp.errors import RayMCPError
from ray_mcp.limits import KUBE_SUBMITTER_LOG_BYTES, KUBE_SUBMITTER_LOG_LINES
from ray_mcp.models.kuberay import KubeStatus, PodState
from ray_mcp.shaping.kuberay import (
    cluster_findings,
    events_digest,
    job_findings,
    pod_state,
    pods_shown,
    serve_app_findings,
    service_findings,
    worker_groups,
)
from ray_mcp.sources.kubernetes import JOB_NAME_LABEL, Kube, cluster_of, head_service_of
from ray_mcp.text import first_sentence, quoted

RayJobStatus = Callable[[str], Awaitable[str | None]]  # submission id -> Ray's status (None: unknown)


async def describe(
    kube: Kube, name: str, *, ray_job_status: RayJobStatus | None = None, events: bool = True
) -> KubeStatus:
    """The object named (RayCluster, RayJob or RayService), verdict first."""
    obj = await kube.find_ray(name)
    kind, status = str(obj["kind"]), obj.get("status") or {}
    cluster_name = cluster_of(obj)
    raycluster = await _cluster(kube, cluster_name) if cluster_name else None
    pod_objs = await kube.pods(cluster_name) if cluster_name else []
    pods = [pod_state(p) for p in pod_objs]
    findings = cluster_findings(raycluster, pods) if raycluster is not None or cluster_name else []
    details: list[str] = []
    if kind == "RayJob":
        job_id = status.get("jobId") or (obj.get("spec") or {}).get("jobId")
        live = await _ray_status(ray_job_status, job_id) if job_id else None
        findings = job_findings(obj, live) + findings
        spec = obj.get("spec") or {}
        details.append(
            f"Deployment status {status.get('jobDeploymentStatus') or 'unknown'}; Ray's job status "
            f"{live or 'unknown (Ray not asked)'} (KubeRay recorded {status.get('jobStatus') or 'none'}); "
            f"submission mode {spec.get('submissionMode') or 'K8sJobMode'}; job id {job_id or 'none yet'}; "
            f"cluster {cluster_name or 'none yet'}"
            + (
                ""
                if spec.get("clusterSelector")
                else f" (its own: shutdownAfterJobFinishes={bool(spec.get('shutdownAfterJobFinishes'))})"
            )
            + "."
        )
        submitters = await _submitters(kube, name)
        findings += cluster_findings(None, submitters)
        pods += submitters
        details.append(f"Submitter: the Kubernetes Job {name} (kuberay_logs(pod='submitter') tails it).")
        details += await _submitter_log(kube, submitters)
    elif kind == "RayService":
        active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        pending_ready = None
        if pending:
            pending_rc = await _cluster(kube, pending)
            pending_ready = bool(pending_rc and (pending_rc.get("status") or {}).get("state") == "ready")
            pending_pods = [pod_state(p) for p in await kube.pods(pending)]
            findings += cluster_findings(pending_rc, pending_pods)
            pods += pending_pods
        findings = (
            service_findings(obj, now_s=time.time(), pending_ready=pending_ready)
            + serve_app_findings(obj)
            + findings
        )
        strategy = ((obj.get("spec") or {}).get("upgradeStrategy") or {}).get("type") or "NewCluster"
        details.append(
            f"Service status {status.get('serviceStatus') or 'unknown'}; active cluster {active or 'none'}; "
            f"pending cluster {pending or 'none'} ({'ready' if pending_ready else 'not ready' if pending else 'no upgrade'}); "
            f"upgrade strategy {strategy}."
        )
        for role, key in (("", "activeServiceStatus"), (" (pending cluster)", "pendingServiceStatus")):
            apps = (status.get(key) or {}).get("applicationStatuses") or {}
            for app, app_status in list(apps.items()):
                details.append(
                    f"Serve app {app}{role}: {app_status.get('status', 'unknown')}"
                    + (f": {quoted(app_status['message'])}" if app_status.get("message") else "")
                )
    if raycluster is not None:
        details.append(_cluster_line(raycluster))
    groups = worker_groups(raycluster) if raycluster is not None else []
    _ready_counts(groups, pods)
    names = {name, *(p.name for p in pods), *([cluster_name] if cluster_name else [])}
    shown_events, events_total = events_digest(await kube.events(), names) if events else ([], 0)
    verdict = findings[0].verdict if findings else _healthy(kind, obj, raycluster)
    shown = pods_shown(pods)
    return KubeStatus(
        verdict=verdict,
        kind=kind,
        name=name,
        namespace=kube.namespace,
        summary=_summary(kind, obj, raycluster),
        findings=findings,
        details=details,
        groups=groups,
        pods=shown,
        pods_total=len(pods),
        pods_shown=len(shown),
        events=shown_events,
        events_total=events_total,
        hint=_hint(findings, pods),
    )


async def _submitters(kube: Kube, rayjob: str) -> list[PodState]:
    """The pods of a RayJob's submitter (K8sJobMode: the Kubernetes Job KubeRay names after the RayJob, whose
    pods carry the job-name label); none in the other submission modes."""
    found = await kube.pods_labelled(f"{JOB_NAME_LABEL}={rayjob}", f"the submitter pods of RayJob {rayjob!r}")
    return [pod_state(p).model_copy(update={"node_type": "submitter"}) for p in found]


async def _submitter_log(kube: Kube, submitters: list[PodState]) -> list[str]:
    """The end of the newest failed submitter's log: why it gave up (often: the head was not ready yet)."""
    failed = [p for p in submitters if p.phase == "Failed" or p.last_terminated or p.waiting]
    if not failed:
        return []
    pod = failed[-1]
    try:
        text = await kube.log(
            pod.name,
            container=None,
            previous=False,
            lines=KUBE_SUBMITTER_LOG_LINES,
            max_bytes=KUBE_SUBMITTER_LOG_BYTES,
        )
    except RayMCPError as exc:
        return [f"Submitter pod {pod.name}'s log unreadable: {first_sentence(str(exc))}"]
    lines = [quoted(line) for line in text.splitlines()[-KUBE_SUBMITTER_LOG_LINES:] if line.strip()]
    return [f"Submitter pod {pod.name}'s log ends: " + (" / ".join(lines) or "(empty)")]


async def _cluster(kube: Kube, name: str) -> dict[str, Any] | None:
    from ray_mcp.errors import NotFound

    try:
        return await kube.get_ray("rayclusters", name)
    except NotFound:
        return None


async def _ray_status(read: RayJobStatus | None, job_id: str) -> str | None:
    if read is None:
        return None
    try:
        return await read(job_id)
    except RayMCPError:
        return None  # the cluster is gone or unreachable: Ray's side is unknown, said as such


def _ready_counts(groups: list[Any], pods: list[Any]) -> None:
    for g in groups:
        g.ready = sum(1 for p in pods if p.group == g.name and p.node_type == "worker" and p.ready)


def _cluster_line(rc: dict[str, Any]) -> str:
    spec, status = rc.get("spec") or {}, rc.get("status") or {}
    head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
    image = next((c.get("image") for c in head.get("containers") or []), None)
    groups = ", ".join(
        f"{g.get('groupName')} {g.get('replicas', '?')} (min {g.get('minReplicas', '?')}, max {g.get('maxReplicas', '?')})"
        for g in spec.get("workerGroupSpecs") or []
    )
    conditions = ", ".join(f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or [])
    return (
        f"RayCluster {rc['metadata']['name']}: state {status.get('state') or 'unknown'}"
        + (f" ({conditions})" if conditions else "")
        + f"; Ray {spec.get('rayVersion') or '?'}, image {image or '?'}; autoscaler "
        f"{'on' if spec.get('enableInTreeAutoscaling') else 'off'}; head service {head_service_of(rc)}; "
        f"worker groups: {groups or 'none'}; ready workers {status.get('readyWorkerReplicas', '?')} of "
        f"{status.get('desiredWorkerReplicas', '?')} desired."
    )


def _summary(kind: str, obj: dict[str, Any], rc: dict[str, Any] | None) -> str:
    status = obj.get("status") or {}
    if kind == "RayJob":
        return f"deployment {status.get('jobDeploymentStatus') or 'unknown'}, job {status.get('jobStatus') or 'unknown'}"
    if kind == "RayService":
        return f"service {status.get('serviceStatus') or 'unknown'}"
    return f"state {status.get('state') or 'unknown'}"


def _healthy(kind: str, obj: dict[str, Any], rc: dict[str, Any] | None) -> str:
    """healthy only when KubeRay says so; anything else is reported as it stands, never as healthy."""
    status = obj.get("status") or {}
    if kind == "RayCluster":
        return "healthy" if status.get("state") == "ready" else str(status.get("state") or "unknown")
    if kind == "RayJob":
        return str(status.get("jobDeploymentStatus") or "unknown").lower()
    return (
        "healthy"
        if status.get("serviceStatus") == "Running"
        else str(status.get("serviceStatus") or "unknown")
    )


def _hint(findings: list[Any], pods: list[Any]) -> str | None:
    if findings and findings[0].pod:
        return f"Next: kuberay_logs(pod={findings[0].pod!r}) for its log; cluster_health for Ray's view."
    if pods:
        head = next((p.name for p in pods if p.node_type == "head"), None)
        if head:
            return f"Next: cluster_health for Ray's view; kuberay_logs(pod={head!r}, container='autoscaler')."
    return None
