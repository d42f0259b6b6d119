"""The Kubernetes layer of a diagnosis, for a cluster given as k8s://: KubeRay's findings (a Pending worker pod,
an OOMKilled or evicted pod, a RayJob whose CRD and Ray disagree) as diagnosis findings, joined to Ray's own
view (the demand a Pending pod would have served). cluster_health and diagnose_job rank them in with theirs."""

from __future__ import annotations

from ray_mcp import models
from ray_mcp.answers import RayAPI
from ray_mcp.answers.kuberay import describe
from ray_mcp.diagnosis.facts import LOOP, PROBLEM, ROOT, STUCK
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import EVIDENCE_ITEMS, NEXT_STEPS
from ray_mcp.models.kuberay import KubeFinding, KubeVerdict
from ray_mcp.sources.kube_target import RayTarget

# How much each KubeRay finding weighs next to Ray's own (the pod's fate is below Ray's symptom, so it leads).
SEVERITY: dict[KubeVerdict, int] = {
    "unschedulable": STUCK,
    "image pull failing": STUCK,
    "stuck in init": STUCK,
    "cannot start": STUCK,
    "OOMKilled": ROOT,
    "evicted": ROOT,
    "crash looping": LOOP,
    "status disagrees": STUCK,
    "RayJob failed": PROBLEM,
    "upgrade stuck": STUCK,
    "no pods": STUCK,
    "pod failed": PROBLEM,
    "serve app failing": PROBLEM,
}
NEXT = (
    "kuberay_status for the pods and events; kuberay_logs(pod=..., previous=true) for a restarted container."
)


async def findings(target: RayTarget, api: RayAPI, *, notes: list[str]) -> list[models.Finding]:
    """KubeRay's findings for the cluster of ``target``; a Kubernetes failure is a note, never a crash."""

    async def ray_job_status(job_id: str) -> str | None:
        return str((await api.jobs.details(job_id)).get("status") or "") or None

    try:
        status = await describe(target.kube, target.name, ray_job_status=ray_job_status, events=False)
    except RayMCPError as exc:
        notes.append(f"Could not check the Kubernetes layer: {exc}")
        return []
    demands = (
        await _waiting_demands(api) if any(f.verdict == "unschedulable" for f in status.findings) else []
    )
    return [_finding(f, demands) for f in status.findings]


async def _waiting_demands(api: RayAPI) -> list[str]:
    try:
        ray_status = await api.nodes.cluster_status(max_nodes=1)
    except RayMCPError:
        return []
    return [
        f"{d.count} x {d.bundles[0] if d.bundles else {}}" + (" (infeasible)" if d.infeasible else "")
        for d in ray_status.pending_demands
    ]


def _finding(f: KubeFinding, demands: list[str]) -> models.Finding:
    title = f.text
    evidence = [f"Kubernetes: {f.verdict}" + (f" (pod {f.pod})" if f.pod else "")]
    if f.verdict == "unschedulable" and demands:
        title = f"Ray's demand waits for a node that Kubernetes cannot schedule: {f.text}"
        evidence.append(f"Ray's waiting demand: {'; '.join(demands)}")
    return models.Finding(
        severity=SEVERITY.get(f.verdict, PROBLEM),
        kind=f"kubernetes:{f.verdict}",
        title=title,
        evidence=evidence[:EVIDENCE_ITEMS],
        next_steps=[NEXT][:NEXT_STEPS],
    )
