"""KubeRay on Kubernetes: a RayCluster, RayJob or RayService with its pods and events, a pod's log, scaling a
worker group, deleting a RayJob. Listed only when the address is k8s:// (or --kubernetes-tools)."""

from typing import Annotated, Literal

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.kuberay import describe
from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.guard import confirm as confirmation
from ray_mcp.guard.audit import note_audit
from ray_mcp.guard.confirm import Approval, Decision, Pending
from ray_mcp.limits import KUBE_LOG_BYTES, KUBE_LOG_LINES
from ray_mcp.models.kuberay import KubeChange, KubeLog, KubeStatus
from ray_mcp.server.context import app_of
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.kuberay import render
from ray_mcp.sources.kubernetes import CLUSTER_LABEL, JOB_NAME_LABEL, NODE_TYPE_LABEL, RayTarget
from ray_mcp.text import quoted
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, WRITE, Api, Confirm


async def current_target(ctx: Context) -> RayTarget:
    return await app_of(ctx).kube()


Target = Annotated[RayTarget, Resolve(current_target)]
Name = Annotated[
    str | None,
    Field(description="A RayCluster, RayJob or RayService of the namespace (default: the address's)."),
]


async def kuberay_status(
    target: Target,
    api: Api,
    name: Name = None,
    events: Annotated[bool, Field(description="Include the events of it and its pods.")] = True,
) -> Annotated[CallToolResult, KubeStatus]:
    """The Kubernetes side of a KubeRay RayCluster, RayJob or RayService: state, worker groups, pods that are
    Pending, pulling, OOMKilled or crashing, a RayJob's status against Ray's, a RayService's upgrade, events.
    """

    async def ray_job_status(job_id: str) -> str | None:
        return str((await api.jobs.details(job_id)).get("status") or "") or None

    status = await describe(target.kube, name or target.name, ray_job_status=ray_job_status, events=events)
    return tool_result(status, render(status))


async def kuberay_logs(
    target: Target,
    pod: Annotated[str, Field(min_length=1, description="A pod name, or head, or submitter (a RayJob's).")],
    container: Annotated[
        str | None, Field(description="e.g. autoscaler, wait-gcs-ready; default the first.")
    ] = None,
    previous: Annotated[
        bool, Field(description="The container before its last restart (an OOMKilled one).")
    ] = False,
    lines: Annotated[int, Field(ge=KUBE_LOG_LINES.low, le=KUBE_LOG_LINES.high)] = KUBE_LOG_LINES.default,
) -> Annotated[CallToolResult, KubeLog]:
    """A pod container's log tail from Kubernetes, including the previous container's and the head's
    autoscaler (tail_logs reads Ray's own log files)."""
    kube = target.kube
    name = await _pod_name(target, pod)
    text = await kube.log(name, container=container, previous=previous, lines=lines, max_bytes=KUBE_LOG_BYTES)
    got = text.splitlines()
    truncated = len(text.encode()) >= KUBE_LOG_BYTES
    result = KubeLog(
        pod=name,
        container=container,
        previous=previous,
        lines=got,
        truncated=truncated,
        hint=f"Cut at {KUBE_LOG_BYTES} bytes: ask fewer lines." if truncated else None,
    )
    where = (
        f"pod {name}" + (f" container {container}" if container else "") + (" (previous)" if previous else "")
    )
    return tool_result(result, f"{len(got)} line(s) of {where}:\n" + text)


async def _pod_name(target: RayTarget, pod: str) -> str:
    if pod == "head":
        selector, what = f"{CLUSTER_LABEL}={target.cluster},{NODE_TYPE_LABEL}=head", "head"
    elif pod == "submitter":
        if target.kind != "RayJob":
            raise InvalidArgument(f"pod='submitter' is a RayJob's, and {target.name} is a {target.kind}.")
        selector, what = f"{JOB_NAME_LABEL}={target.name}", "submitter"
    else:
        return pod
    pods = await target.kube.pods_labelled(selector, f"the {what} pod")
    if not pods:
        raise InvalidArgument(f"No {what} pod of {target.kind} {target.name} exists now; see kuberay_status.")
    newest = max(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    return str(newest["metadata"]["name"])


async def scale_plan(
    ctx: Context,
    target: Target,
    group: str,
    replicas: int | None,
    min_replicas: int | None,
    max_replicas: int | None,
) -> Pending:
    """The change to the worker group, found before anything changes; scaling to 0 is what must be confirmed."""
    rc = await target.kube.get_ray("rayclusters", target.cluster)
    specs = (rc.get("spec") or {}).get("workerGroupSpecs") or []
    index = next((i for i, g in enumerate(specs) if g.get("groupName") == group), None)
    if index is None:
        names = ", ".join(str(g.get("groupName")) for g in specs) or "none"
        raise InvalidArgument(
            f"RayCluster {target.cluster} has no worker group {quoted(group)}; its groups: {names}."
        )
    if replicas is not None and (rc.get("spec") or {}).get("enableInTreeAutoscaling"):
        raise InvalidArgument(
            f"RayCluster {target.cluster} autoscales: the autoscaler owns the replicas of {group}, so ray-mcp "
            "does not set them (it would undo them). Set min_replicas or max_replicas instead; nothing changed."
        )
    if replicas is None and min_replicas is None and max_replicas is None:
        raise InvalidArgument("Give replicas, min_replicas or max_replicas; nothing changed.")
    spec = specs[index]
    new = {"replicas": replicas, "minReplicas": min_replicas, "maxReplicas": max_replicas}
    after = {k: (v if v is not None else spec.get(k)) for k, v in new.items()}
    if (
        after["minReplicas"] is not None
        and after["maxReplicas"] is not None
        and after["minReplicas"] > after["maxReplicas"]
    ):
        raise InvalidArgument(
            f"min_replicas {after['minReplicas']} is above max_replicas {after['maxReplicas']}."
        )
    to_zero = replicas == 0 or (max_replicas == 0)
    app = app_of(ctx)
    if to_zero and not app.settings.allow_destructive:
        raise InvalidArgument(
            f"Scaling worker group {group} to 0 stops every worker in it (their tasks and actors die), so it needs "
            "--allow-destructive, which this server runs without; nothing changed."
        )
    change = ", ".join(f"{k} {spec.get(k)} -> {v}" for k, v in new.items() if v is not None)
    what = f"scale worker group {group} of RayCluster {target.namespace}/{target.cluster} ({change})"
    meta = rc.get("metadata") or {}
    return Pending(
        "scale_worker_group",
        f"{target.namespace}/{target.cluster}/{group}",
        what,
        subject={"index": index, "spec": spec, "new": new},
        instance=f"{meta.get('uid')}@{meta.get('resourceVersion')}",
        cluster=await app.cluster_ref(),
        required=to_zero,
        ttl_s=app.settings.confirm_token_ttl_s,
    )


def not_done(
    obj: str, namespace: str, action: Literal["scale", "delete"], decision: Decision
) -> CallToolResult:
    """A change left undone: asked for confirmation (a dry run with its token), declined or refused."""
    change = KubeChange(
        object=obj,
        namespace=namespace,
        action=action,
        done=False,
        dry_run=decision.token is not None,
        confirm_token=decision.token,
        message=decision.text,
    )
    return tool_result(change, decision.text)


async def scale_worker_group(
    target: Target,
    group: Annotated[str, Field(min_length=1, description="The worker group's groupName.")],
    pending: Annotated[Pending, Resolve(scale_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(scale_plan)],
    replicas: Annotated[int | None, Field(ge=0, description="Not on an autoscaling cluster.")] = None,
    min_replicas: Annotated[int | None, Field(ge=0)] = None,
    max_replicas: Annotated[int | None, Field(ge=0)] = None,
    confirm: Confirm = None,
) -> Annotated[CallToolResult, KubeChange]:
    """Set a KubeRay worker group's replicas, minReplicas or maxReplicas (a patch of the RayCluster). To 0 is
    destructive and confirmed."""
    obj = f"RayCluster {target.cluster} worker group {group}"
    note_audit(targets={"raycluster": f"{target.namespace}/{target.cluster}", "group": group})
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        return not_done(obj, target.namespace, "scale", decision)
    index, spec, new = pending.subject["index"], pending.subject["spec"], pending.subject["new"]
    patch: list[dict[str, object]] = [
        {"op": "test", "path": f"/spec/workerGroupSpecs/{index}/groupName", "value": group}
    ]
    for key, value in new.items():
        if value is not None:
            op = "replace" if key in spec else "add"
            patch.append({"op": op, "path": f"/spec/workerGroupSpecs/{index}/{key}", "value": value})
    await target.kube.patch_ray("rayclusters", target.cluster, patch)
    message = f"Done: {pending.description}. KubeRay now adds or removes pods; kuberay_status shows them."
    return tool_result(
        KubeChange(object=obj, namespace=target.namespace, action="scale", done=True, message=message),
        message,
    )


async def delete_plan(ctx: Context, target: Target, rayjob: str) -> Pending:
    """What deleting the RayJob takes with it: its own cluster, unless it runs on one it selected."""
    obj = await target.kube.get_ray("rayjobs", rayjob)
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj.get("metadata") or {}
    own = not spec.get("clusterSelector") and status.get("rayClusterName")
    takes = f" AND its RayCluster {status['rayClusterName']} with every job on it" if own else ""
    what = (
        f"delete RayJob {target.namespace}/{rayjob} (deployment {status.get('jobDeploymentStatus') or 'unknown'}, "
        f"job {status.get('jobStatus') or 'unknown'}){takes}"
    )
    app = app_of(ctx)
    return Pending(
        "delete_ray_job",
        f"{target.namespace}/{rayjob}",
        what,
        subject=obj,
        instance=str(meta.get("uid")),
        cluster=await app.cluster_ref(),
        ttl_s=app.settings.confirm_token_ttl_s,
    )


async def delete_ray_job(
    target: Target,
    rayjob: Annotated[str, Field(min_length=1, description="The RayJob's name.")],
    pending: Annotated[Pending, Resolve(delete_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(delete_plan)],
    confirm: Confirm = None,
) -> Annotated[CallToolResult, KubeChange]:
    """Delete a RayJob (kubectl delete rayjob): KubeRay stops its Ray job and deletes the cluster it created.
    Confirmed."""
    note_audit(targets={"rayjob": f"{target.namespace}/{rayjob}"})
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        return not_done(f"RayJob {rayjob}", target.namespace, "delete", decision)
    try:
        await target.kube.delete_ray("rayjobs", rayjob, str(pending.instance))
    except RayMCPError as exc:
        raise type(exc)(
            f"{exc} Nothing was deleted: the RayJob may have been replaced since the confirmation."
        ) from None
    message = f"Done: {pending.description}."
    change = KubeChange(
        object=f"RayJob {rayjob}", namespace=target.namespace, action="delete", done=True, message=message
    )
    return tool_result(change, message)


def register(server: MCPServer) -> None:
    if not server.app.kubernetes:  # type: ignore[attr-defined]  # RayMCPServer's App
        return
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "KubeRay status"}))(kuberay_status)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Kubernetes pod log"}))(kuberay_logs)
    server.tool(
        annotations=WRITE.model_copy(update={"title": "Scale a worker group", "idempotent_hint": True})
    )(scale_worker_group)
    server.tool(annotations=DESTRUCTIVE.model_copy(update={"title": "Delete a RayJob"}))(delete_ray_job)
