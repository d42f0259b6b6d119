"""The cluster's pods, as the head tells them: Kubernetes events the head ingests
(``RAY_DASHBOARD_INGEST_PLATFORM_EVENTS=1``, served at ``/api/v0/platform_events``), so a cluster reached by its
dashboard URL alone still says why a pod never came up: it cannot be scheduled, its image cannot be pulled, it was
evicted or OOMKilled, its container restarts in a loop."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import LOOP, ROOT, STUCK, WARNING, Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import Graph, Row, num
from ray_mcp.diagnosis.recognise import POD_RESOLVED, pod_trouble
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import EVENT_MESSAGE_CHARS
from ray_mcp.text import one_line, quoted

KUBE_DOC = "ray-docs://reference/20-kuberay"
RECENT_S = 3600.0  # a pod's trouble older than this (and not seen since) is context, not a problem
SEVERITY = {
    Kind.POD_UNSCHEDULABLE: STUCK,
    Kind.IMAGE_PULL: STUCK,
    Kind.POD_EVICTED: ROOT,
    Kind.POD_OOM_KILLED: ROOT,
    Kind.POD_CRASH_LOOP: LOOP,
}
NEXT = {
    Kind.POD_UNSCHEDULABLE: "cluster_status for the demand it would serve; the pod's resources against the nodes'",
    Kind.IMAGE_PULL: "check the image name and tag, and the pull secret, of the pod's group",
    Kind.POD_EVICTED: "list_events source=KUBERNETES for the node's pressure; raise the pod's memory request",
    Kind.POD_OOM_KILLED: "raise the container's memory limit, or lower the work's memory on it",
    Kind.POD_CRASH_LOOP: "kuberay_logs(pod=..., previous=true) where a kubeconfig reaches the cluster",
}


def _pod_words(f: Link) -> str:
    count = f"; seen {f['count']} times" if f.get("count") else ""
    return (
        f"{f.subject}: Kubernetes reports {f['reason']} ({f['component'] or 'unknown component'}, "
        f"{f['when']}{count}): {quoted(f['message'], EVENT_MESSAGE_CHARS)}"
    )


POD_EVENT = Say("pod_event", Edge.ENDED_BY, _pod_words)


def _fields(e: Row) -> Row:
    fields = e.get("custom_fields")
    return fields if isinstance(fields, dict) else {}


@rule(
    On.CLUSTER,
    Kind.POD_UNSCHEDULABLE,
    order=15,
    refs=(KUBE_DOC,),
    reads=("platform_events",),
    also=(Kind.IMAGE_PULL, Kind.POD_EVICTED, Kind.POD_OOM_KILLED, Kind.POD_CRASH_LOOP),
)
def pod_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """A pod of the cluster in trouble, by the newest Kubernetes event that tells it (FailedScheduling, an image
    that cannot be pulled, an eviction, OOMKilled, a restart loop), unless a later event of the pod ended it (it
    was scheduled, its image pulled); a problem for an hour, a warning after."""
    newest: dict[tuple[str, str], Row] = {}
    resolved: dict[tuple[str, str], float] = {}
    for e in sorted(g.ev.platform_events or [], key=lambda e: num(e.get("timestamp"))):
        fields = _fields(e)
        pod, reason = str(fields.get("name") or ""), str(fields.get("reason") or "")
        if str(fields.get("kind") or "Pod") != "Pod" or not pod:
            continue
        for ended, enders in POD_RESOLVED.items():
            if reason in enders:
                resolved[pod, ended] = num(e.get("timestamp"))
        trouble = pod_trouble(reason, str(fields.get("message") or e.get("message") or ""))
        if trouble is not None:
            newest[pod, trouble] = e
    now_s = g.ev.now_ms / 1000 if g.ev.now_ms else None
    out = []
    for (pod, kind_name), e in newest.items():
        at = num(e.get("timestamp"))
        if resolved.get((pod, kind_name), -1.0) >= at:
            continue
        kind, fields = Kind(kind_name), _fields(e)
        recent = now_s is None or now_s - at <= RECENT_S
        link = POD_EVENT(
            f"pod {quoted(pod)}",
            one_line(str(fields.get("message") or ""), EVENT_MESSAGE_CHARS),
            reason=str(fields.get("reason") or ""),
            component=str(fields.get("component") or ""),
            count=str(fields.get("count") or ""),
            when=str(e.get("time") or "?"),
            message=str(fields.get("message") or ""),
        )
        out.append(
            Chain(
                SEVERITY[kind] if recent else WARNING,
                kind,
                None,
                [link],
                [NEXT[kind]],
                subjects={f"pod:{pod}"},
            )
        )
    return out
