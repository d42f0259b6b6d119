"""KubeRay objects, their pods and events -> one bounded answer, verdict first (pure functions).

The verdict names the failure class KubeRay users lose the most hours to, from the most to the least
blocking: a pod that cannot be scheduled (the scheduler's message and the worker group), an image that cannot
be pulled, a pod stuck in an init container (``wait-gcs-ready``), a container OOMKilled or crash-looping, a
RayJob whose deployment status and Ray's job status disagree (or whose submitter failed), a RayService upgrade
that does not finish or a Serve app it keeps failing on.
"""

from __future__ import annotations

import re
from typing import Any

from ray_mcp.limits import (
    KUBE_DEPLOYMENT_MESSAGE_CHARS,
    KUBE_EVENTS_SHOWN,
    KUBE_PODS_SHOWN,
    KUBE_UPGRADE_STUCK_S,
)
from ray_mcp.models.kuberay import (
    KubeEvent,
    KubeFinding,
    KubeLog,
    KubeStatus,
    KubeVerdict,
    PodState,
    ServiceUpgrade,
    UpgradeSide,
    WorkerGroup,
)
from ray_mcp.sources.kube_reasons import IMAGE_PULL_REASONS
from ray_mcp.text import quoted

# A container Kubernetes could not create (a missing ConfigMap, Secret or volume, a bad command): with no restart
# it never ran, so it is not crash-looping; its message (and the pod's events) name what it references.
CREATE_REASONS = ("CreateContainerConfigError", "CreateContainerError")
CRASH_REASONS = (
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
)
# A RayJob's deployment status that says the job is over, and the Ray job statuses that say it is not.
JOB_DONE = ("Complete", "Failed")
RAY_RUNNING = ("PENDING", "RUNNING")
RAY_ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
SERVE_APP_FAILING = ("DEPLOY_FAILED", "UNHEALTHY")
DEPLOYMENT_FAILING = (
    "UNHEALTHY",
    "DEPLOY_FAILED",
)  # Ray Serve's DeploymentStatus values that are failures  # Ray Serve's ApplicationStatus values that are failures


def pod_state(pod: dict[str, Any]) -> PodState:
    """One pod: phase, readiness, restarts, what it waits on, and why its last container ended."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    containers = status.get("containerStatuses") or []
    inits = status.get("initContainerStatuses") or []
    waiting = next(
        (
            (c["name"], c["state"]["waiting"])
            for c in [*inits, *containers]
            if (c.get("state") or {}).get("waiting")
        ),
        None,
    )
    running_init = next((c["name"] for c in inits if (c.get("state") or {}).get("running")), None)
    last = next(
        (
            (c["name"], c["lastState"]["terminated"])
            for c in containers
            if (c.get("lastState") or {}).get("terminated")
        ),
        None,
    )
    current_end = next(
        (
            (c["name"], c["state"]["terminated"])
            for c in containers
            if (c.get("state") or {}).get("terminated")
        ),
        None,
    )
    ended = current_end or last
    unscheduled = next(
        (
            c.get("message") or c.get("reason")
            for c in status.get("conditions") or []
            if c.get("type") == "PodScheduled" and c.get("status") == "False"
        ),
        None,
    )
    return PodState(
        name=meta.get("name", "?"),
        node_type=labels.get("ray.io/node-type"),
        group=labels.get("ray.io/group"),
        phase=status.get("phase") or "Unknown",
        reason=status.get("reason"),
        message=status.get("message"),
        ready=all(c.get("ready") for c in containers) if containers else False,
        restarts=sum(int(c.get("restartCount") or 0) for c in containers),
        waiting=f"{waiting[0]}: {waiting[1].get('reason')}" if waiting else None,
        waiting_message=(waiting[1].get("message") if waiting else None),
        in_init=running_init,
        last_terminated=(
            f"{ended[0]}: {ended[1].get('reason')} (exit {ended[1].get('exitCode')})" if ended else None
        ),
        unschedulable=unscheduled,
        node=spec.get("nodeName"),
        containers=[c["name"] for c in spec.get("containers") or []],
    )


def events_digest(events: list[dict[str, Any]], names: set[str]) -> tuple[list[KubeEvent], int]:
    """The events of the named objects: deduplicated (same object, type, reason, message) with their counts
    summed, warnings first, then the most frequent, then the newest. Returns the shown ones and the total."""
    merged: dict[tuple[str, str, str, str], KubeEvent] = {}
    for e in events:
        obj = e.get("involvedObject") or e.get("regarding") or {}
        if obj.get("name") not in names:
            continue
        key = (
            obj.get("name", ""),
            e.get("type") or "Normal",
            e.get("reason") or "",
            e.get("message") or e.get("note") or "",
        )
        count = int(e.get("count") or (e.get("series") or {}).get("count") or 1)
        last = (
            e.get("lastTimestamp") or e.get("eventTime") or (e.get("metadata") or {}).get("creationTimestamp")
        )
        if key in merged:
            seen = merged[key]
            seen.count += count
            seen.last_seen = max(seen.last_seen or "", last or "") or None
        else:
            merged[key] = KubeEvent(
                object=f"{obj.get('kind', '?')}/{key[0]}",
                type=key[1],
                reason=key[2],
                message=key[3],
                count=count,
                last_seen=last,
            )
    ordered = sorted(merged.values(), key=lambda v: (v.type != "Warning", -v.count, v.last_seen or ""))
    return ordered[:KUBE_EVENTS_SHOWN], len(ordered)


def worker_groups(raycluster: dict[str, Any]) -> list[WorkerGroup]:
    spec, status = raycluster.get("spec") or {}, raycluster.get("status") or {}
    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    groups = []
    for g in spec.get("workerGroupSpecs") or []:
        groups.append(
            WorkerGroup(
                name=g.get("groupName", "?"),
                replicas=g.get("replicas"),
                min_replicas=g.get("minReplicas"),
                max_replicas=g.get("maxReplicas"),
                suspended=g.get("suspend") or None,
                autoscaled=autoscaling,
            )
        )
    del status
    return groups


def cluster_findings(raycluster: dict[str, Any] | None, pods: list[PodState]) -> list[KubeFinding]:
    """What is wrong with a RayCluster's pods, the most blocking first."""
    findings: list[KubeFinding] = []
    for p in pods:
        if (found := _pod_finding(p)) is not None:
            findings.append(KubeFinding(verdict=found[0], pod=p.name, group=p.group, text=found[1]))
    if raycluster is not None and not pods:
        findings.append(
            KubeFinding(
                verdict="no pods",
                text="KubeRay created no pod for this RayCluster: read the operator's events below.",
            )
        )
    return findings


def _pod_finding(p: PodState) -> tuple[KubeVerdict, str] | None:
    """What is wrong with one pod (its verdict and the sentence that says so), the most blocking first; None:
    nothing."""
    where = f"{p.node_type or 'pod'} pod {p.name}" + (
        f" (worker group {p.group})" if p.node_type == "worker" else ""
    )
    if p.unschedulable:
        return "unschedulable", (
            f"{where} is Pending: the scheduler says {quoted(p.unschedulable)}. Ray's demand for it waits "
            "until a node with those resources joins (cluster autoscaler, node pool, quota)."
        )
    if p.waiting and p.waiting.split(": ")[-1] in IMAGE_PULL_REASONS:
        return "image pull failing", (
            f"{where} cannot pull its image ({p.waiting}): {quoted(p.waiting_message or '')}. Check the "
            "image name and tag and the imagePullSecrets."
        )
    if p.waiting and p.waiting.split(": ")[-1] in CREATE_REASONS and p.restarts == 0:
        container, reason = p.waiting.split(": ", 1)
        return "cannot start", (
            f"{where}: container {quoted(container)} was never created: "
            f"{quoted(p.waiting_message or 'no message')} ({reason}, 0 restarts: not crash-looping). Fix "
            "what its spec references (volumes and mounts, ConfigMaps, Secrets, image, command); the pod's "
            "events below say which."
        )
    if p.in_init and p.phase == "Pending":
        return "stuck in init", (
            f"{where} is still in init container {quoted(p.in_init)}: a worker waits there until "
            "the head's GCS answers. Check the head pod and its service; read this container's log with "
            f"kuberay_logs(pod={p.name!r}, container={p.in_init!r})."
        )
    if p.last_terminated and "OOMKilled" in p.last_terminated:
        return "OOMKilled", (
            f"{where} was OOMKilled ({p.last_terminated}, {p.restarts} restart(s)): its memory limit is "
            "too low for what runs there. Read the log before the kill with "
            f"kuberay_logs(pod={p.name!r}, previous=true)."
        )
    if p.phase == "Failed" and p.reason == "Evicted":
        return "evicted", (f"{where} was evicted: {quoted(p.message or 'no message')}.")
    if p.phase == "Failed":
        return "pod failed", (
            f"{where} failed ({p.last_terminated or p.reason or 'no reason given'}): "
            f"{quoted(p.message or 'no message')}. Read kuberay_logs(pod={p.name!r})."
        )
    if p.waiting and p.waiting.split(": ")[-1] in CRASH_REASONS:
        return "crash looping", (
            f"{where} is in {p.waiting} after {p.restarts} restart(s) (last: {p.last_terminated or 'unknown'}). "
            f"Read kuberay_logs(pod={p.name!r}, previous=true)."
        )
    return None


def job_findings(rayjob: dict[str, Any], ray_status: str | None) -> list[KubeFinding]:
    """A RayJob whose deployment status, KubeRay's copy of Ray's status and Ray's own disagree, or whose
    submitter failed."""
    status = rayjob.get("status") or {}
    deployment, recorded = status.get("jobDeploymentStatus"), status.get("jobStatus")
    found: list[KubeFinding] = []
    live = ray_status or recorded
    if deployment in JOB_DONE and live in RAY_RUNNING:
        found.append(
            KubeFinding(
                verdict="status disagrees",
                text=f"The RayJob says {deployment} but Ray says the job is {live}: KubeRay gave up on a job that "
                "still runs (or its submitter failed). Trust Ray's status; read the submitter's log.",
            )
        )
    elif deployment == "Running" and live in RAY_ENDED:
        found.append(
            KubeFinding(
                verdict="status disagrees",
                text=f"The RayJob is still Running but Ray says the job is {live}: KubeRay has not caught up (or its "
                "submitter is wedged).",
            )
        )
    elif ray_status and recorded and ray_status != recorded and deployment not in JOB_DONE:
        found.append(
            KubeFinding(
                verdict="status disagrees",
                text=f"KubeRay records Ray's job status as {recorded}, Ray says {ray_status}.",
            )
        )
    reason, message = status.get("reason"), status.get("message")
    if deployment == "Failed" and reason:
        found.append(
            KubeFinding(
                verdict="RayJob failed",
                text=f"The RayJob failed: {reason}: {quoted(message or '')}."
                + (
                    " The submitter started before the head was ready and ran out of retries: resubmit, and raise "
                    "spec.backoffLimit or the submitter's wait."
                    if reason == "BackoffLimitExceeded" or "Backoff" in str(message)
                    else ""
                ),
            )
        )
    return found


def service_findings(
    rayservice: dict[str, Any], *, now_s: float, pending_ready: bool | None
) -> list[KubeFinding]:
    """A RayService upgrade that does not finish (its pending cluster never Ready)."""
    status = rayservice.get("status") or {}
    pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
    if not pending or pending_ready:
        return []
    since = next(
        (
            c.get("lastTransitionTime")
            for c in status.get("conditions") or []
            if c.get("type") == "UpgradeInProgress"
        ),
        None,
    )
    age = _age_s(since, now_s)
    if age is not None and age < KUBE_UPGRADE_STUCK_S:
        return []
    how_long = f" for {age / 60:.0f} min" if age is not None else ""
    return [
        KubeFinding(
            verdict="upgrade stuck",
            text=f"The upgrade to RayCluster {pending} has not finished{how_long}: its cluster is not ready, so traffic "
            "stays on the active one. Its pods' findings say why (often no node has the resources for it).",
        )
    ]


def failing_deployment(app_status: dict[str, Any]) -> tuple[str, str, str] | None:
    """The deployment whose own message carries the failure (a replica's exception), which the app's summary
    status only points at: (name, status, message) of the first failing one with a message."""
    for name, dep in (app_status.get("serveDeploymentStatuses") or {}).items():
        dep = dep or {}
        if str(dep.get("status") or "") in DEPLOYMENT_FAILING and dep.get("message"):
            return str(name), str(dep["status"]), _telling(str(dep["message"]))
    return None


_EXCEPTION_LINE = re.compile(r"^[\w.]*(?:Error|Exception|Exit)\b.*")


def _telling(message: str) -> str:
    """A deployment's message as Serve writes it (a summary line, then the replica's traceback): the summary and
    the exception line at the traceback's end."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    exceptions = [line for line in lines if _EXCEPTION_LINE.match(line)]
    if not lines or not exceptions or exceptions[-1] == lines[0]:
        return message
    return f"{exceptions[-1]} (after: {lines[0]})"


def serve_app_findings(rayservice: dict[str, Any]) -> list[KubeFinding]:
    """Serve apps KubeRay reports failing (DEPLOY_FAILED, UNHEALTHY) on the active or the pending cluster. On the
    pending one the upgrade cannot finish; on the active one KubeRay may replace the cluster, again and again
    while the cause stays (a RayService that restarts forever)."""
    status = rayservice.get("status") or {}
    found: list[KubeFinding] = []
    for role, key in (("pending", "pendingServiceStatus"), ("active", "activeServiceStatus")):
        side = status.get(key) or {}
        for app, app_status in (side.get("applicationStatuses") or {}).items():
            state = str((app_status or {}).get("status") or "")
            if state not in SERVE_APP_FAILING:
                continue
            then = (
                "so the upgrade cannot finish"
                if role == "pending"
                else "and KubeRay may replace the cluster over and over while the cause stays"
            )
            failing = failing_deployment(app_status or {})
            said = (
                f"deployment {quoted(failing[0])} is {failing[1]}: {quoted(failing[2], KUBE_DEPLOYMENT_MESSAGE_CHARS)}"
                if failing
                else quoted((app_status or {}).get("message") or "no message")
            )
            found.append(
                KubeFinding(
                    verdict="serve app failing",
                    text=f"Serve app {quoted(app)} on the {role} cluster {side.get('rayClusterName') or '?'} is "
                    f"{state}: {said}, {then}. Fix the app's config or code (serveConfigV2); serve_status shows "
                    "Ray's side of it.",
                )
            )
    return found


def object_findings(
    obj: dict[str, Any],
    raycluster: dict[str, Any] | None,
    pods: list[PodState],
    *,
    submitters: list[PodState],
    pending: tuple[dict[str, Any] | None, list[PodState]] | None,
    ray_status: str | None,
    now_s: float,
) -> list[KubeFinding]:
    """Everything wrong with a RayCluster, RayJob or RayService, the most blocking first: one function for
    kuberay_status and the fleet, so both give one object the same verdict. ``pending``: a RayService's pending
    cluster and its pods; ``ray_status``: Ray's own status of a RayJob's job (None: not asked)."""
    kind = obj.get("kind")
    findings = cluster_findings(raycluster, pods) if raycluster is not None or _runs_on(obj) else []
    if kind == "RayJob":
        findings = job_findings(obj, ray_status) + findings + cluster_findings(None, submitters)
    elif kind == "RayService":
        pending_ready = None
        if pending is not None:
            pending_rc, pending_pods = pending
            pending_ready = bool(pending_rc and (pending_rc.get("status") or {}).get("state") == "ready")
            findings += cluster_findings(pending_rc, pending_pods)
        findings = (
            service_findings(obj, now_s=now_s, pending_ready=pending_ready)
            + serve_app_findings(obj)
            + findings
        )
    return findings


def _runs_on(obj: dict[str, Any]) -> bool:
    from ray_mcp.sources.kube_target import cluster_of

    return cluster_of(obj) is not None


def verdict_of(obj: dict[str, Any], findings: list[KubeFinding]) -> str:
    """The first finding's class; else healthy only when KubeRay says so, and the state as it stands otherwise
    (never healthy by default)."""
    if findings:
        return findings[0].verdict
    status, kind = obj.get("status") or {}, obj.get("kind")
    if kind == "RayCluster":
        return "healthy" if status.get("state") == "ready" else str(status.get("state") or "unknown")
    if kind == "RayJob":
        return str(status.get("jobDeploymentStatus") or "unknown").lower()
    if kind == "RayService":
        return (
            "healthy"
            if status.get("serviceStatus") == "Running"
            else str(status.get("serviceStatus") or "unknown")
        )
    spec = obj.get("spec") or {}
    return "suspended" if spec.get("suspend") else "scheduled" if spec.get("schedule") else "unknown"


def _age_s(timestamp: str | None, now_s: float) -> float | None:
    from datetime import datetime

    if not timestamp:
        return None
    try:
        return now_s - datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def render(status: KubeStatus) -> str:
    """Verdict first, then the object, its findings, pods and events."""
    head = f"{status.verdict.upper()}: {status.kind} {status.namespace}/{status.name}"
    lines = [head + (f": {status.findings[0].text}" if status.findings else f" ({status.summary})")]
    lines += [f"- {f.text}" for f in status.findings[1:]]
    if status.findings:
        lines.append(status.summary)
    for line in status.details:
        lines.append(line)
    if status.pods:
        lines.append(f"Pods ({status.pods_shown} of {status.pods_total}):")
        for p in status.pods:
            extra = ", ".join(
                x for x in (p.waiting, p.last_terminated, p.in_init and f"init {p.in_init}") if x
            )
            lines.append(
                f"  {p.name} [{p.node_type or '?'}{'/' + p.group if p.group and p.node_type == 'worker' else ''}] "
                f"{p.phase}{' ready' if p.ready else ''} restarts={p.restarts}"
                + (f" ({extra})" if extra else "")
            )
    if status.events:
        lines.append(f"Events ({len(status.events)} of {status.events_total}, warnings first):")
        for e in status.events:
            lines.append(f"  {e.type} {e.reason} x{e.count} {e.object}: {quoted(e.message)}")
    if status.hint:
        lines.append(status.hint)
    return "\n".join(lines)


def pods_shown(pods: list[PodState]) -> list[PodState]:
    """Pods with a problem first, then the head, then the rest, bounded."""
    return sorted(pods, key=lambda p: (p.ready and not p.restarts, p.node_type != "head", p.name))[
        :KUBE_PODS_SHOWN
    ]


def _side(raw: Any) -> UpgradeSide:
    side = raw if isinstance(raw, dict) else {}
    return UpgradeSide(
        cluster=side.get("rayClusterName"),
        target_capacity=side.get("targetCapacity"),
        traffic_percent=side.get("trafficRoutedPercent"),
        last_traffic_migrated=side.get("lastTrafficMigratedTime"),
    )


def incremental_upgrade(rayservice: dict[str, Any]) -> ServiceUpgrade | None:
    """A RayService's incremental upgrade (KubeRay >= 1.5, beta in 1.7), in KubeRay's own status: each cluster's
    target_capacity and trafficRoutedPercent; the step follows from them as KubeRay's loop takes it (scale the
    pending cluster up by maxSurgePercent, shift traffic until it reaches that capacity, scale the active one
    down). None for another strategy, or with no pending cluster."""
    spec = (rayservice.get("spec") or {}).get("upgradeStrategy") or {}
    status = rayservice.get("status") or {}
    pending_raw = status.get("pendingServiceStatus") or {}
    if spec.get("type") != "NewClusterWithIncrementalUpgrade" or not pending_raw.get("rayClusterName"):
        return None
    active, pending = _side(status.get("activeServiceStatus")), _side(pending_raw)
    options = spec.get("clusterUpgradeOptions") or {}
    a_cap, p_cap, p_traffic = active.target_capacity, pending.target_capacity, pending.traffic_percent
    if p_cap is None or p_traffic is None:
        step = "starting: KubeRay has not reported the clusters' capacity and traffic yet"
    elif p_cap >= 100 and p_traffic >= 100:
        step = "done: the pending cluster takes all traffic; KubeRay promotes it next"
    elif p_traffic < p_cap:
        step = f"shifting traffic: {p_traffic}% of {p_cap}% routed to the pending cluster"
    elif (a_cap or 0) + p_cap > 100:
        step = f"scaling the active cluster down from {a_cap}% (total capacity {(a_cap or 0) + p_cap}%)"
    else:
        step = f"scaling the pending cluster up from {p_cap}% capacity"
    return ServiceUpgrade(
        step=step,
        active=active,
        pending=pending,
        max_surge_percent=options.get("maxSurgePercent"),
        step_size_percent=options.get("stepSizePercent"),
        interval_s=options.get("intervalSeconds"),
    )


def upgrade_line(u: ServiceUpgrade) -> str:
    def side(name: str, s: UpgradeSide) -> str:
        return f"{name} {s.cluster or '?'} {s.target_capacity if s.target_capacity is not None else '?'}% capacity, {s.traffic_percent if s.traffic_percent is not None else '?'}% of traffic"

    steps = ", ".join(
        f"{k} {v}"
        for k, v in (
            ("maxSurgePercent", u.max_surge_percent),
            ("stepSizePercent", u.step_size_percent),
            ("intervalSeconds", u.interval_s),
        )
        if v is not None
    )
    return (
        f"Incremental upgrade: {u.step}. Traffic split: {side('active', u.active)}; {side('pending', u.pending)}"
        + (f" ({steps})." if steps else ".")
    )


def render_kube_log(log: KubeLog) -> str:
    where = f"pod {log.pod}" + (f" container {log.container}" if log.container else "")
    head = f"{len(log.lines)} line(s) of {where}{' (previous)' if log.previous else ''}:"
    return "\n".join([head, *log.lines, *(f"Hint: {h}" for h in log.hints)])
