"""KubeRay changes, each a plan first: scaling a worker group, deleting a RayJob, applying a RayCluster, RayJob or
RayService (server-side apply), deleting a RayCluster or RayService. Each finds its change before anything is
sent, and a destructive one is confirmed (elicitation, or a token bound to the object's version). Registered with
the read tools by tools/kubernetes.py, in the order tools/list lists them."""

import contextlib
from typing import Annotated, Any, Literal

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers import kube_changes as changes
from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.guard import confirm as confirmation
from ray_mcp.guard.audit import note_audit
from ray_mcp.guard.confirm import Approval, Decision, Pending, change_digest
from ray_mcp.limits import KUBE_DIFF_SHOWN, KUBE_LINT_SHOWN
from ray_mcp.models.kuberay import KubeChange, KubePlan
from ray_mcp.server.context import app_of
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.kube_changes import diff_lines
from ray_mcp.shaping.kube_lint import render_lint
from ray_mcp.sources.kubernetes import KIND_PLURAL
from ray_mcp.text import quoted
from ray_mcp.tools import Confirm
from ray_mcp.tools.kubernetes import (
    KindArg,
    KubeContext,
    Manifest,
    Namespace,
    ObjName,
    Target,
    object_at,
)

# -- scaling and deleting a RayJob --------------------------------------------------------------------------------


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
        subject={"index": index, "spec": spec, "new": new, "version": meta.get("resourceVersion")},
        instance=f"{meta.get('uid')}@{meta.get('resourceVersion')}",
        cluster=await app.cluster_ref(),
        required=to_zero,
        ttl_s=app.settings.confirm_token_ttl_s,
        change=change_digest(
            {"group": group, **{k: [spec.get(k), v] for k, v in new.items() if v is not None}}
        ),
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
    replicas: Annotated[
        int | None, Field(ge=0, description="The group's new replicas (an autoscaling one: set min or max).")
    ] = None,
    min_replicas: Annotated[int | None, Field(ge=0, description="The group's new minReplicas.")] = None,
    max_replicas: Annotated[int | None, Field(ge=0, description="The group's new maxReplicas.")] = None,
    confirm: Confirm = None,
) -> Annotated[CallToolResult, KubeChange]:
    """Set a KubeRay worker group's replicas, minReplicas or maxReplicas by patching the RayCluster. Scaling to 0
    is destructive and confirmed."""
    obj = f"RayCluster {target.cluster} worker group {group}"
    note_audit(targets={"raycluster": f"{target.namespace}/{target.cluster}", "group": group})
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        return not_done(obj, target.namespace, "scale", decision)
    index, spec, new = pending.subject["index"], pending.subject["spec"], pending.subject["new"]
    # The object as confirmed, or nothing: its resourceVersion (the version the token is bound to) and the group.
    patch: list[dict[str, object]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": pending.subject["version"]},
        {"op": "test", "path": f"/spec/workerGroupSpecs/{index}/groupName", "value": group},
    ]
    for key, value in new.items():
        if value is not None:
            op = "replace" if key in spec else "add"
            patch.append({"op": op, "path": f"/spec/workerGroupSpecs/{index}/{key}", "value": value})
    try:
        await target.kube.patch_ray("rayclusters", target.cluster, patch)
    except RayMCPError as exc:
        raise type(exc)(
            f"{exc} Nothing was changed: the RayCluster is no longer at the resourceVersion read (someone else "
            "wrote it since); call scale_worker_group again to see it as it stands."
        ) from None
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
    """Delete a RayJob as `kubectl delete rayjob` does: KubeRay stops its Ray job and deletes the cluster it
    created. The user confirms, or a first call returns a token."""
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


# -- changes as a plan first ------------------------------------------------------------------------------------


async def apply_plan(
    ctx: Context,
    manifest: dict[str, Any] | str | None,
    kind: str | None,
    name: str | None,
    namespace: str | None,
    context: str | None,
    image: str | None,
    ray_version: str | None,
    group: str | None,
    replicas: int | None,
    min_replicas: int | None,
    max_replicas: int | None,
    autoscaling: bool | None,
    serve_config_v2: str | None,
) -> Pending:
    """The server-side dry run of the change, its diff, what KubeRay will do, and the lint, before anything."""
    app = app_of(ctx)
    given = changes.manifest_of(manifest)
    obj_kind, obj_name, obj_ns = changes.target_of(given, kind, name, namespace)
    fields = changes.NamedFields(
        image, ray_version, group, replicas, min_replicas, max_replicas, autoscaling, serve_config_v2
    )
    if given is not None and fields.given():
        raise InvalidArgument("Pass a manifest or named fields, not both.")
    if given is None and not fields.given():
        raise InvalidArgument("Nothing to change: pass a manifest, or fields such as image or max_replicas.")
    kube, obj_name = await object_at(ctx, obj_name or None, obj_ns, context)
    planned = await changes.plan(kube, kind=obj_kind, name=obj_name, manifest=given, fields=fields)
    obj_kind = planned.kind
    if planned.removes and not app.settings.allow_destructive:
        raise InvalidArgument(
            f"This change {'; '.join(planned.removes)}: that stops the pods in it (their tasks and actors die), so "
            "it needs --allow-destructive, which this server runs without; nothing changed."
        )
    what = f"{'create' if planned.current is None else 'apply to'} {obj_kind} {kube.namespace}/{obj_name}"
    shown = "; ".join(diff_lines(planned.diff, 3))
    description = (
        f"{what}: {len(planned.diff)} field change(s), diff {planned.digest}"
        + (f" ({shown}{'; ...' if len(planned.diff) > 3 else ''})" if shown else "")
        + (
            f", taking over {len(planned.takes_over)} field(s) from other managers"
            if planned.takes_over
            else ""
        )
    )
    return Pending(
        "kuberay_apply",
        f"{obj_kind} {kube.context or ''}/{kube.namespace}/{obj_name}",
        description,
        subject=planned,
        noop=f"Nothing to change: {obj_kind} {kube.namespace}/{obj_name} already is as asked."
        if not planned.diff
        else None,
        instance=planned.instance,
        cluster=await _cluster_ref(app),
        ttl_s=app.settings.confirm_token_ttl_s,
        change=planned.digest,
    )


async def _cluster_ref(app: Any) -> confirmation.ClusterRef | None:
    with contextlib.suppress(RayMCPError):  # a token is bound to the cluster when there is one to name
        return await app.cluster_ref()
    return None


def plan_text(planned: changes.Plan, head: str) -> str:
    lines = [head]
    lines += [f"  {line}" for line in diff_lines(planned.diff, KUBE_DIFF_SHOWN)]
    if len(planned.diff) > KUBE_DIFF_SHOWN:
        lines.append(
            f"  ({len(planned.diff) - KUBE_DIFF_SHOWN} more field change(s) in the structured answer)"
        )
    if planned.takes_over:
        lines.append("Takes over from other field managers: " + "; ".join(planned.takes_over))
    lines += [f"KubeRay will: {o.text}" for o in planned.outcome]
    lines += render_lint(planned.lint, KUBE_LINT_SHOWN)
    return "\n".join(lines)


def plan_model(planned: changes.Plan, *, done: bool, token: str | None, message: str) -> KubePlan:
    return KubePlan(
        object=f"{planned.kind} {planned.name}",
        namespace=planned.namespace,
        action="create" if planned.current is None else "update",
        done=done,
        diff=planned.diff,
        diff_total=len(planned.diff),
        diff_digest=planned.digest,
        takes_over=planned.takes_over,
        outcome=planned.outcome,
        lint=planned.lint,
        confirm_token=token,
        message=message,
    )


async def kuberay_apply(
    ctx: Context,
    pending: Annotated[Pending, Resolve(apply_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(apply_plan)],
    manifest: Manifest = None,
    kind: KindArg = None,
    name: ObjName = None,
    namespace: Namespace = None,
    context: KubeContext = None,
    image: Annotated[
        str | None, Field(description="The Ray image of the head and every worker group.")
    ] = None,
    ray_version: Annotated[str | None, Field(description="spec rayVersion (keep it the image's).")] = None,
    group: Annotated[str | None, Field(description="The worker group replicas/min/max apply to.")] = None,
    replicas: Annotated[int | None, Field(ge=0, description="The group's replicas.")] = None,
    min_replicas: Annotated[int | None, Field(ge=0, description="The group's minReplicas.")] = None,
    max_replicas: Annotated[int | None, Field(ge=0, description="The group's maxReplicas.")] = None,
    autoscaling: Annotated[bool | None, Field(description="enableInTreeAutoscaling on or off.")] = None,
    serve_config_v2: Annotated[str | None, Field(description="A RayService's serveConfigV2 (YAML).")] = None,
    confirm: Confirm = None,
) -> Annotated[CallToolResult, KubePlan]:
    """Create or change a RayCluster, RayJob or RayService from a manifest or a few named fields: the first call
    returns the plan (dry run, field diff, what KubeRay will do, the lint), and the confirmed call applies
    exactly that change by server-side apply."""
    planned: changes.Plan = pending.subject
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        head = decision.text  # "Not done yet ...": what it would do, and how to confirm it
        return tool_result(
            plan_model(planned, done=False, token=decision.token, message=decision.text),
            plan_text(planned, head),
        )
    note_audit(targets={planned.kind.lower(): f"{planned.namespace}/{planned.name}", "diff": planned.digest})
    kube = (await object_at(ctx, planned.name, planned.namespace, context))[0]
    await changes.apply(kube, planned)
    message = (
        f"Done: {pending.description}. KubeRay acts on it now; kuberay_status(name="
        f"{planned.namespace + '/' + planned.name!r}) shows it."
    )
    return tool_result(
        plan_model(planned, done=True, token=None, message=message), plan_text(planned, message)
    )


def serving(obj: dict[str, Any]) -> bool:
    """Does a RayService serve traffic now (KubeRay says Running, Ready, or counts serve endpoints)?"""
    status = obj.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return status.get("serviceStatus") == "Running" or ready or int(status.get("numServeEndpoints") or 0) > 0


async def kuberay_delete_plan(
    ctx: Context,
    kind: str,
    name: str,
    namespace: str | None,
    context: str | None,
    stop_serving: str | None,
) -> Pending:
    """What deleting the RayCluster or RayService takes with it; refused when protected, owned, or serving
    without the user's word."""
    app = app_of(ctx)
    kube, name = await object_at(ctx, name, namespace, context)
    obj = await kube.get_ray(KIND_PLURAL[kind], name)
    changes.refuse_protected(obj, kind, kube.namespace, name)
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    if owner is not None:
        raise InvalidArgument(
            f"{kind} {kube.namespace}/{name} belongs to {owner.get('kind')} {quoted(str(owner.get('name')))}, which "
            "would make it again: delete that instead (delete_ray_job, or kuberay_delete of the RayService). "
            "Nothing was deleted."
        )
    if kind == "RayService" and serving(obj) and stop_serving != name:
        raise InvalidArgument(
            f"RayService {kube.namespace}/{name} serves traffic now (service {status.get('serviceStatus') or '?'}, "
            f"{status.get('numServeEndpoints', '?')} serve endpoint(s)): deleting it stops that traffic. Ask the user; "
            f"only if they say so in their own words, call again with stop_serving={name!r}. Nothing was deleted."
        )
    if kind == "RayCluster":
        takes = f"its pods ({status.get('readyWorkerReplicas', '?')} ready worker(s) and the head), and every job, actor and object on it"
    else:
        clusters = [
            (status.get(k) or {}).get("rayClusterName")
            for k in ("activeServiceStatus", "pendingServiceStatus")
        ]
        takes = (
            f"its RayCluster(s) {', '.join(c for c in clusters if c) or 'none'} and its Serve applications"
        )
    return Pending(
        "kuberay_delete",
        f"{kind} {kube.context or ''}/{kube.namespace}/{name}",
        f"delete {kind} {kube.namespace}/{name} and with it {takes}",
        subject=(kube, obj),
        instance=f"{meta.get('uid')}@{meta.get('resourceVersion')}",
        cluster=await _cluster_ref(app),
        ttl_s=app.settings.confirm_token_ttl_s,
        change=change_digest({"delete": [kind, kube.namespace, name]}),
    )


async def kuberay_delete(
    kind: Annotated[
        Literal["RayCluster", "RayService"], Field(description="What to delete (RayJobs: delete_ray_job).")
    ],
    name: Annotated[
        str, Field(min_length=1, description="Its name, namespace/name, or a fleet row's k8s:// address.")
    ],
    pending: Annotated[Pending, Resolve(kuberay_delete_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(kuberay_delete_plan)],
    namespace: Namespace = None,
    context: KubeContext = None,
    stop_serving: Annotated[
        str | None,
        Field(
            description="A serving RayService's name, only when the user said to delete it although it serves."
        ),
    ] = None,
    confirm: Confirm = None,
) -> Annotated[CallToolResult, KubeChange]:
    """Delete a RayCluster or RayService with its clusters, confirmed; objects annotated protected or owned by
    another are refused. A RayService that serves traffic also needs the user's explicit word
    (stop_serving)."""
    kube, obj = pending.subject
    meta = obj.get("metadata") or {}
    name = str(meta.get("name"))
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        return not_done(f"{kind} {name}", kube.namespace, "delete", decision)
    note_audit(targets={kind.lower(): f"{kube.namespace}/{name}", "diff": pending.change})
    try:
        await kube.delete_ray(KIND_PLURAL[kind], name, str(meta.get("uid")), str(meta.get("resourceVersion")))
    except RayMCPError as exc:
        raise type(exc)(
            f"{exc} Nothing was deleted: it changed since the confirmation (a new version)."
        ) from None
    message = f"Done: {pending.description}."
    change = KubeChange(
        object=f"{kind} {name}", namespace=kube.namespace, action="delete", done=True, message=message
    )
    return tool_result(change, message)
