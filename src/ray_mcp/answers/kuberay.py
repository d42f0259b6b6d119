"""Read one KubeRay object with its RayCluster's pods and their events, and Ray's own view where it differs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.limits import (
    KUBE_LOG_BYTES,
    KUBE_LOG_READS,
    KUBE_SUBMITTER_LOG_BYTES,
    KUBE_SUBMITTER_LOG_LINES,
    OTHER_PODS_NAMED,
)
from ray_mcp.models.kuberay import KubeLog, KubeStatus, PodState
from ray_mcp.shaping.kuberay import (
    events_digest,
    incremental_upgrade,
    object_findings,
    pod_state,
    pods_shown,
    upgrade_line,
    verdict_of,
    worker_groups,
)
from ray_mcp.sources.kube_names import checked
from ray_mcp.sources.kube_target import RayTarget, cluster_of, head_service_of
from ray_mcp.sources.kubernetes import CLUSTER_LABEL, JOB_NAME_LABEL, NODE_TYPE_LABEL, Kube
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
    details: list[str] = []
    pod_objs = await _own_pods(kube, cluster_name, raycluster, details) if cluster_name else []
    pods = [pod_state(p) for p in pod_objs]
    submitters: list[PodState] = []
    pending: tuple[dict[str, Any] | None, list[PodState]] | None = None
    live: str | None = None
    upgrade = incremental_upgrade(obj) if kind == "RayService" else None
    if kind == "RayJob":
        job_id = status.get("jobId") or (obj.get("spec") or {}).get("jobId")
        live = await _ray_status(ray_job_status, job_id) if job_id else None
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
        details.append(f"Submitter: the Kubernetes Job {name} (kuberay_logs(pod='submitter') tails it).")
        details += await _submitter_log(kube, submitters)
    elif kind == "RayService":
        active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending_name = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if pending_name:
            pending_rc = await _cluster(kube, pending_name)
            pending = (
                pending_rc,
                [pod_state(p) for p in await _own_pods(kube, pending_name, pending_rc, details)],
            )
        pending_ready = bool(
            pending and pending[0] and (pending[0].get("status") or {}).get("state") == "ready"
        )
        details += _service_lines(obj, active, pending_name, pending_ready)
        if upgrade is not None:
            details.append(upgrade_line(upgrade))
    findings = object_findings(
        obj, raycluster, pods, submitters=submitters, pending=pending, ray_status=live, now_s=time.time()
    )
    pods = pods + submitters + (pending[1] if pending else [])
    if raycluster is not None:
        details.append(_cluster_line(raycluster))
    groups = worker_groups(raycluster) if raycluster is not None else []
    _ready_counts(groups, pods)
    names = {name, *(p.name for p in pods), *([cluster_name] if cluster_name else [])}
    shown_events, events_total = events_digest(await kube.events(), names) if events else ([], 0)
    verdict = verdict_of(obj, findings)
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
        upgrade=upgrade,
    )


def _service_lines(
    obj: dict[str, Any], active: str | None, pending: str | None, pending_ready: bool
) -> list[str]:
    """A RayService's status, clusters, upgrade strategy and Serve apps, one line each."""
    status = obj.get("status") or {}
    strategy = ((obj.get("spec") or {}).get("upgradeStrategy") or {}).get("type") or "NewCluster"
    upgrade = "ready" if pending_ready else "not ready" if pending else "no upgrade"
    lines = [
        f"Service status {status.get('serviceStatus') or 'unknown'}; active cluster {active or 'none'}; "
        f"pending cluster {pending or 'none'} ({upgrade}); upgrade strategy {strategy}."
    ]
    for role, key in (("", "activeServiceStatus"), (" (pending cluster)", "pendingServiceStatus")):
        apps = (status.get(key) or {}).get("applicationStatuses") or {}
        for app, app_status in list(apps.items()):
            lines.append(
                f"Serve app {app}{role}: {app_status.get('status', 'unknown')}"
                + (f": {quoted(app_status['message'])}" if app_status.get("message") else "")
            )
    return lines


async def _submitters(kube: Kube, rayjob: str) -> list[PodState]:
    """The pods of a RayJob's submitter (K8sJobMode: the Kubernetes Job KubeRay names after the RayJob, whose
    pods carry the job-name label); none in the other submission modes."""
    found = await kube.pods_labelled({JOB_NAME_LABEL: rayjob}, f"the submitter pods of RayJob {rayjob!r}")
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


def _hint(findings: list[Any], pods: list[Any]) -> str | None:
    if findings and findings[0].pod:
        return f"Next: kuberay_logs(pod={findings[0].pod!r}) for its log; cluster_health for Ray's view."
    if pods:
        head = next((p.name for p in pods if p.node_type == "head"), None)
        if head:
            return f"Next: cluster_health for Ray's view; kuberay_logs(pod={head!r}, container='autoscaler')."
    return None


# -- one Ray cluster's pods, and no other ---------------------------------------------------------------------


async def pod_of(target: RayTarget, pod: str, container: str | None = None) -> str:
    """The pod ``pod`` names (a pod name, ``head``, or a RayJob's ``submitter``), when it is one of the target's:
    a head or worker of its RayCluster (a RayService's active or pending one), or a RayJob's submitter. Any
    other pod of the namespace is refused before its log is read, whatever the server's mode. The names are
    checked first, before any request."""
    if pod not in ("head", "submitter"):
        checked(pod, "pod")
    if container is not None:
        checked(container, "container")
    kube = target.kube
    owners = await _cluster_owners(target)
    if pod == "head":
        found = await kube.pods_labelled(
            {CLUSTER_LABEL: target.cluster, NODE_TYPE_LABEL: "head"}, "the head pod"
        )
        found = [p for p in found if pod_owner(p, owners, None)]
    elif pod == "submitter":
        if target.kind != "RayJob":
            raise InvalidArgument(f"pod='submitter' is a RayJob's, and {target.name} is a {target.kind}.")
        found = await kube.pods_labelled({JOB_NAME_LABEL: target.name}, "the submitter pod")
        found = [p for p in found if pod_owner(p, {}, target.name)]
    else:
        obj = await kube.pod(pod)
        if pod_owner(obj, owners, target.name if target.kind == "RayJob" else None) is None:
            raise InvalidArgument(
                f"Pod {pod!r} is not one of {target.kind} {target.namespace}/{target.name}'s: kuberay_logs reads "
                f"only the pods of its RayCluster ({', '.join(sorted(owners))}: head and workers)"
                + (" and its submitter" if target.kind == "RayJob" else "")
                + ". Nothing was read. kuberay_status lists them."
            )
        return pod
    if not found:
        raise InvalidArgument(f"No {pod} pod of {target.kind} {target.name} exists now; see kuberay_status.")
    newest = max(found, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    return str(newest["metadata"]["name"])


async def _cluster_owners(target: RayTarget) -> dict[str, str | None]:
    """The RayClusters whose pods are the target's, by name, with their uid (None: not found now)."""
    names = {target.cluster}
    if target.kind == "RayService":
        status = (await target.kube.get_ray("rayservices", target.name)).get("status") or {}
        for side in ("activeServiceStatus", "pendingServiceStatus"):
            if named := (status.get(side) or {}).get("rayClusterName"):
                names.add(str(named))
    owners: dict[str, str | None] = {}
    for name in sorted(names):
        rc = await _cluster(target.kube, name)
        owners[name] = str((rc or {}).get("metadata", {}).get("uid") or "") or None
    return owners


async def _own_pods(
    kube: Kube, cluster: str, raycluster: dict[str, Any] | None, details: list[str]
) -> list[dict[str, Any]]:
    """The RayCluster's pods: labelled as its and controlled by it (pod_owner, the rule kuberay_logs' scope
    uses). A pod that only carries the label is not shown as one of its pods, and the answer says so."""
    uid = str(((raycluster or {}).get("metadata") or {}).get("uid") or "") or None
    labelled = await kube.pods(cluster)
    own = [p for p in labelled if pod_owner(p, {cluster: uid}, None)]
    if others := [str((p.get("metadata") or {}).get("name")) for p in labelled if p not in own]:
        details.append(
            f"{len(others)} pod(s) carry RayCluster {cluster}'s label but KubeRay does not control them (no "
            f"owner reference to it), so they are not counted as its pods: {', '.join(others[:OTHER_PODS_NAMED])}."
        )
    return own


def pod_owner(pod: dict[str, Any], clusters: dict[str, str | None], rayjob: str | None) -> str | None:
    """What the pod belongs to among ``clusters`` (its controller is one of these RayClusters, by name and uid)
    or the RayJob ``rayjob``'s submitter (its controller is the Kubernetes Job KubeRay names after the RayJob);
    None: neither. Owner references, not labels alone: any pod may carry a label."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        name, uid = str(ref.get("name") or ""), ref.get("uid")
        labelled = (meta.get("labels") or {}).get(CLUSTER_LABEL) == name
        if (
            ref.get("kind") == "RayCluster"
            and name in clusters
            and clusters[name] in (None, uid)
            and labelled
        ):
            return f"RayCluster {name}"
        if ref.get("kind") == "Job" and rayjob is not None and name == rayjob:
            return f"RayJob {rayjob}'s submitter"
    return None


async def pod_log(
    target: RayTarget, pod: str, *, container: str | None, previous: bool, lines: int
) -> KubeLog:
    """The newest ``lines`` of a container's log of one of the target's pods, at most KUBE_LOG_BYTES read.

    The API server cuts a reply at limitBytes counted from its start, that is the oldest lines of the tail, and
    the newest are lost. So a reply cut there is asked again for only as many lines as fitted whole, until the
    newest lines come whole (KUBE_LOG_READS at most; a single line over the limit keeps its start).
    """
    kube, name = target.kube, await pod_of(target, pod, container)
    asked, hints = lines, []
    for _ in range(KUBE_LOG_READS):
        text = await kube.log(
            name, container=container, previous=previous, lines=asked, max_bytes=KUBE_LOG_BYTES
        )
        cut = len(text.encode()) >= KUBE_LOG_BYTES
        whole = len(text.splitlines()) - 1  # the last line of a cut reply may be cut
        if not cut or whole < 1 or whole >= asked:
            break
        asked = whole
    if asked < lines:
        hints.append(
            f"The newest {asked} of the {lines} lines asked fill the {KUBE_LOG_BYTES:,}-byte read: the "
            f"{lines - asked} older ones were not read."
        )
    if cut:
        hints.append(f"Cut at {KUBE_LOG_BYTES:,} bytes: lines too long to read them all; ask fewer lines.")
    return KubeLog(
        pod=name, container=container, previous=previous, lines=text.splitlines(), truncated=cut, hints=hints
    )
