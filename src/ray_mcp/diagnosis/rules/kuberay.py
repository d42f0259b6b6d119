"""KubeRay's layer of a k8s:// cluster: what the Kubernetes API says of the cluster's pods and its custom resource
(read by diagnosis/kubernetes.py). Each finding of KubeRay's view is a chain of its own kind, ranked in with Ray's:
a pod's fate is below Ray's symptom, so an OOMKilled or evicted pod leads. A pod Kubernetes cannot schedule is
joined to the demand of Ray's that waits for it."""

from __future__ import annotations

from typing import get_args

from ray_mcp.diagnosis.facts import PROBLEM, STUCK, Chain, Edge, Kind, Say
from ray_mcp.diagnosis.graph import Graph, Row
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules import platform
from ray_mcp.diagnosis.rules.platform import KUBE_DOC
from ray_mcp.models.kuberay import KubeVerdict
from ray_mcp.text import quoted

# KubeRay's verdict (shaping/kuberay.py) -> the finding's kind; the pod kinds are those the head's events give too.
KIND: dict[str, Kind] = {
    "unschedulable": Kind.POD_UNSCHEDULABLE,
    "image pull failing": Kind.IMAGE_PULL,
    "stuck in init": Kind.POD_STUCK_INIT,
    "cannot start": Kind.POD_CANNOT_START,
    "OOMKilled": Kind.POD_OOM_KILLED,
    "evicted": Kind.POD_EVICTED,
    "pod failed": Kind.POD_FAILED,
    "crash looping": Kind.POD_CRASH_LOOP,
    "no pods": Kind.NO_PODS,
    "status disagrees": Kind.CRD_DISAGREES,
    "RayJob failed": Kind.RAYJOB_FAILED,
    "upgrade stuck": Kind.UPGRADE_STUCK,
    "serve app failing": Kind.RAYSERVICE_APP_FAILING,
}
assert set(KIND) == set(get_args(KubeVerdict)), "every verdict of KubeRay's view has its kind"

# The pod kinds weigh what they weigh when the head's events tell them (rules/platform.py).
SEVERITY: dict[Kind, int] = {
    **platform.SEVERITY,
    Kind.POD_STUCK_INIT: STUCK,
    Kind.POD_CANNOT_START: STUCK,
    Kind.CRD_DISAGREES: STUCK,
    Kind.RAYJOB_FAILED: PROBLEM,
    Kind.UPGRADE_STUCK: STUCK,
    Kind.NO_PODS: STUCK,
    Kind.POD_FAILED: PROBLEM,
    Kind.RAYSERVICE_APP_FAILING: PROBLEM,
}
assert set(SEVERITY) == set(KIND.values()), "every kind of KubeRay's view has its weight"
NEXT = (
    "kuberay_status for the pods and events; kuberay_logs(pod=..., previous=true) for a restarted container."
)
KINDS = tuple(dict.fromkeys(KIND.values()))


def _demand(d: Row) -> str:
    bundles = d.get("bundles") or [{}]
    return f"{d.get('count')} x {bundles[0]}" + (" (infeasible)" if d.get("infeasible") else "")


# KubeRay's sentence is rendered by shaping/kuberay.py from the objects; here it is only said, never read.
KUBE_FINDING = Say("kuberay_finding", Edge.ENDED_BY, lambda f: str(f["text"]))
WAITS_ON_POD = Say(
    "demand_waits_on_pod",
    Edge.WAITS_ON,
    lambda f: f"Ray's demand waits for a node that Kubernetes cannot schedule: {f['text']}",
)
KUBE_VERDICT = Say(
    "kubernetes_verdict",
    Edge.ENDED_BY,
    lambda f: f"Kubernetes: {f['verdict']}" + (f" (pod {quoted(f['pod'])})" if f.get("pod") else ""),
)
RAY_WAITING = Say("rays_waiting_demand", Edge.WAITS_ON, lambda f: f"Ray's waiting demand: {f['demands']}")


def kuberay_chains(g: Graph) -> list[Chain]:
    out = []
    for f in g.ev.kuberay or []:
        verdict, pod = str(f.get("verdict") or ""), f.get("pod")
        kind = KIND.get(verdict)
        if kind is None:  # a verdict this server version does not know: said as a plain problem
            kind = Kind.POD_FAILED
        text = str(f.get("text") or "")
        details = [KUBE_VERDICT(text=text, verdict=verdict, pod=pod)]
        say = KUBE_FINDING
        if kind is Kind.POD_UNSCHEDULABLE and g.ev.kuberay_waiting:
            say = WAITS_ON_POD
            details.append(RAY_WAITING(demands="; ".join(map(_demand, g.ev.kuberay_waiting))))
        out.append(
            Chain(
                SEVERITY[kind],
                kind,
                None,
                [say(text=text, verdict=verdict, pod=pod)],
                [NEXT],
                subjects={f"pod:{pod}"} if pod else set(),
                details=details,
            )
        )
    return out


@rule(On.CLUSTER, KINDS[0], order=16, refs=(KUBE_DOC,), reads=("kuberay", "kuberay_waiting"), also=KINDS[1:])
def kuberay_of_cluster(g: Graph, chains: list[Chain]) -> list[Chain]:
    """What KubeRay's view of a k8s:// cluster shows wrong (a pod that cannot be scheduled, joined to Ray's
    demand that waits for it; OOMKilled, evicted, crash looping; a CRD whose status and Ray's disagree)."""
    return kuberay_chains(g)


@rule(On.JOB, KINDS[0], order=110, refs=(KUBE_DOC,), reads=("kuberay", "kuberay_waiting"), also=KINDS[1:])
def kuberay_of_job(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The same for the cluster a job runs on: its pods' fate and its RayJob's status beside Ray's."""
    return kuberay_chains(g)
