"""The Kubernetes layer of a diagnosis, for a cluster given as k8s://: what KubeRay's view of the cluster says (a
Pending worker pod, an OOMKilled or evicted pod, a RayJob whose CRD and Ray disagree), read into the evidence
beside Ray's own; rules/kuberay.py turns it into chains that cluster_health and diagnose_job rank with theirs."""

from __future__ import annotations

from ray_mcp.answers import RayAPI
from ray_mcp.answers.kuberay import describe
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.errors import RayMCPError
from ray_mcp.sources.kube_target import RayTarget


async def gather(target: RayTarget, api: RayAPI, ev: GraphInputs) -> None:
    """KubeRay's findings for the cluster of ``target`` into ``ev``; a Kubernetes failure is a note, never a
    crash. A pod Kubernetes cannot schedule brings Ray's pending demands with it (what the pod would serve)."""

    async def ray_job_status(job_id: str) -> str | None:
        return str((await api.jobs.details(job_id)).get("status") or "") or None

    try:
        status = await describe(target.kube, target.name, ray_job_status=ray_job_status, events=False)
    except RayMCPError as exc:
        ev.notes.append(f"Could not check the Kubernetes layer: {exc}")
        return
    ev.kuberay = [f.model_dump(mode="json") for f in status.findings]
    if not any(f.verdict == "unschedulable" for f in status.findings):
        return
    if ev.status is not None:  # cluster_health has read the cluster status already: its demands are there
        ev.kuberay_waiting = list(ev.status.get("pending_demands") or [])
        return
    try:
        ray_status = await api.nodes.cluster_status(max_nodes=1)
    except RayMCPError:
        return
    ev.kuberay_waiting = [d.model_dump(mode="json") for d in ray_status.pending_demands]
