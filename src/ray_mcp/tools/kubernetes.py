"""KubeRay on Kubernetes: a RayCluster, RayJob or RayService with its pods and events, a pod's log, the fleet, a
spec linted; the arguments and addressing every Kubernetes tool shares. The changes (scale, apply, delete) are in
kube_changes.py; ``register`` adds both. Listed only when the address is k8s:// (or --kubernetes-tools)."""

import asyncio
import contextlib
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers import fleet as fleet_answers
from ray_mcp.answers import kube_changes as changes
from ray_mcp.answers.kuberay import describe, pod_log
from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.limits import (
    FLEET_CONTEXTS,
    FLEET_RAY_BUDGET_S,
    FLEET_RAY_CHECKS,
    FLEET_ROWS,
    KUBE_LINT_SHOWN,
    KUBE_LOG_LINES,
)
from ray_mcp.models.kuberay import Fleet, KubeLog, KubeStatus, LintReport
from ray_mcp.server.context import app_of
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.fleet import render_fleet
from ray_mcp.shaping.kube_lint import lint, render_lint
from ray_mcp.shaping.kuberay import render, render_kube_log
from ray_mcp.sources.history import kept_clusters
from ray_mcp.sources.kube_names import checked
from ray_mcp.sources.kube_target import RayTarget, parse_kube_address
from ray_mcp.sources.kubernetes import FLEET_KINDS, KIND_PLURAL, Kube
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, WRITE
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.KUBERNETES  # see ray_mcp/toolsets.py


async def current_target(ctx: Context) -> RayTarget:
    return await app_of(ctx).kube()


Target = Annotated[RayTarget, Resolve(current_target)]
Name = Annotated[
    str | None,
    Field(description="A RayCluster, RayJob or RayService of the namespace (default: the address's)."),
]


async def kuberay_status(
    ctx: Context,
    name: Annotated[
        str | None,
        Field(
            description="The object: a name in the address's namespace, namespace/name, or a fleet row's address "
            "k8s://[context/]namespace/name (default: the address's object)."
        ),
    ] = None,
    events: Annotated[bool, Field(description="Include the events of it and its pods.")] = True,
) -> Annotated[CallToolResult, KubeStatus]:
    """A KubeRay RayCluster, RayJob or RayService as Kubernetes sees it: state, worker groups, Pending, pulling,
    OOMKilled or crashing pods, a RayJob's status beside Ray's, a RayService's upgrade, events. Use it
    when the pods rather than Ray may be at fault."""
    app = app_of(ctx)
    kube, obj_name = await object_at(ctx, name)
    target = await app.kube_or_none()
    ray_job_status = None
    if target is not None and target.namespace == kube.namespace and target.kube.context == kube.context:
        api = await app.api()

        async def ray_job_status(job_id: str) -> str | None:
            return str((await api.jobs.details(job_id)).get("status") or "") or None

    status = await describe(kube, obj_name, ray_job_status=ray_job_status, events=events)
    return tool_result(status, render(status))


async def object_at(
    ctx: Context, name: str | None, namespace: str | None = None, context: str | None = None
) -> tuple[Kube, str]:
    """The connection (bound to its namespace) and the name of the object a call names: ``name`` alone is in
    the address's namespace; ``namespace/name`` and ``k8s://[context/]namespace/name`` say where."""
    if name is not None and name.startswith("k8s://"):
        named = parse_kube_address(name)
        context, namespace, name = named.context or context, named.namespace or namespace, named.name
    elif name is not None and "/" in name:
        namespace, _, name = name.partition("/")
        checked(namespace, "namespace")
        checked(name, "rayobject")
    if name is None and await app_of(ctx).kube_or_none() is None:  # the address's object, if not named
        raise InvalidArgument(
            "Name the object: this server's address is not a k8s://[context/]namespace/name address, so there is "
            "no default one. Pass name as namespace/name or as a row's address from kuberay_fleet."
        )
    kube, target = await kube_for(ctx, namespace, context)
    return kube, name or (target.name if target is not None else "")


async def kube_for(
    ctx: Context, namespace: str | None = None, context: str | None = None
) -> tuple[Kube, RayTarget | None]:
    """The connection for a namespace and context: the address's when they are its (with its object), else one
    from the kubeconfig."""
    app = app_of(ctx)
    target = None
    if context is None:
        with contextlib.suppress(
            RayMCPError
        ):  # the address's object may be gone: the kubeconfig still answers
            target = await app.kube_or_none()
    if target is not None and namespace in (None, target.namespace):
        return target.kube, target
    kube = await app.kube_at(context)
    return (kube.at(namespace) if namespace else kube), None


async def kuberay_logs(
    target: Target,
    pod: Annotated[str, Field(min_length=1, description="A pod name, or head, or submitter (a RayJob's).")],
    container: Annotated[
        str | None, Field(description="The container, e.g. autoscaler (default: the pod's first).")
    ] = None,
    previous: Annotated[
        bool, Field(description="The container before its last restart (an OOMKilled one).")
    ] = False,
    lines: Annotated[
        int, Field(ge=KUBE_LOG_LINES.low, le=KUBE_LOG_LINES.high, description="Most lines of the tail.")
    ] = KUBE_LOG_LINES.default,
) -> Annotated[CallToolResult, KubeLog]:
    """A pod container's log tail from Kubernetes, with the previous container's and the head's autoscaler, for
    this Ray cluster's pods only. tail_logs reads Ray's own log files."""
    result = await pod_log(target, pod, container=container, previous=previous, lines=lines)
    return tool_result(result, render_kube_log)


# -- the fleet ------------------------------------------------------------------------------------------------

KindName = Literal["RayCluster", "RayJob", "RayService", "RayCronJob"]


async def kuberay_fleet(
    ctx: Context,
    namespaces: Annotated[
        list[str] | None,
        Field(
            description="Namespaces to list (default: every one the account may list, else the context's)."
        ),
    ] = None,
    kinds: Annotated[list[KindName] | None, Field(description="Kinds to list (default: all four).")] = None,
    contexts: Annotated[
        list[str] | None, Field(description="Kubeconfig contexts to list in (default: the current one).")
    ] = None,
    all_contexts: Annotated[
        bool, Field(description=f"List in every context of the kubeconfig (at most {FLEET_CONTEXTS}).")
    ] = False,
    limit: Annotated[
        int,
        Field(
            ge=FLEET_ROWS.low, le=FLEET_ROWS.high, description="Objects per page (then next_page goes on)."
        ),
    ] = FLEET_ROWS.default,
    page: Annotated[
        str | None, Field(description="next_page of the previous answer (same arguments).")
    ] = None,
    ray_health_s: Annotated[
        float,
        Field(
            ge=FLEET_RAY_BUDGET_S.low,
            le=FLEET_RAY_BUDGET_S.high,
            description=f"Seconds to wait, in all, for the first {FLEET_RAY_CHECKS} clusters' dashboards to give "
            "cluster_health's verdict and the GPUs in use (0: do not ask).",
        ),
    ] = FLEET_RAY_BUDGET_S.default,
    history_server: Annotated[
        str | None,
        Field(
            description="A KubeRay History Server (http://host:port): list the terminated clusters it keeps."
        ),
    ] = None,
) -> Annotated[CallToolResult, Fleet]:
    """Every RayCluster, RayJob, RayService and RayCronJob across namespaces and kube contexts: which are
    unhealthy, where GPUs idle, which upgrades are stuck. Use it first when no address is known; each row
    gives the address for every other tool."""
    app = app_of(ctx)
    names: list[str | None] = list(await asyncio.to_thread(app.kube_contexts.names)) if all_contexts else []
    names = names or list(contexts or []) or [None]
    if len(names) > FLEET_CONTEXTS:
        raise InvalidArgument(f"{len(names)} contexts is more than {FLEET_CONTEXTS}: name the ones to list.")
    where: list[str | None] = [checked(n, "namespace") for n in namespaces] if namespaces else [None]
    scopes = [fleet_answers.Scope(c, n) for c in names for n in where]
    history = None
    if history_server is not None and page is None:
        kept = await kept_clusters(
            history_server, timeout_s=app.settings.request_timeout_s, verify=app.settings.dashboard_verify_tls
        )
        history = (history_server.removeprefix("history+"), kept)
    answer = await fleet_answers.fleet(
        app.kube_at,
        scopes,
        [str(k) for k in kinds] if kinds else [k for _p, k in FLEET_KINDS],
        limit=limit,
        cursor=page,
        ray_health=fleet_answers.ray_health_with(app.settings, await _credentials(app))
        if ray_health_s > 0
        else None,
        ray_budget_s=ray_health_s,
        history=history,
    )
    return tool_result(answer, render_fleet(answer))


async def _credentials(app: Any) -> Callable[[RayTarget], dict[str, str]]:
    """The dashboard headers each fleet cluster may get: the address's Ray credentials go to the address's own
    cluster only; every other cluster is asked without them (a refusal then says its verdict is unknown)."""
    own: RayTarget | None = None
    with contextlib.suppress(RayMCPError):
        own = await app.kube_or_none()

    def headers_for(target: RayTarget) -> dict[str, str]:
        mine = own is not None and (own.namespace, own.cluster, own.kube.context) == (
            target.namespace,
            target.cluster,
            target.kube.context,
        )
        return app.settings.dashboard_request_headers() if mine else {}

    return headers_for


# -- specs checked before they fail -----------------------------------------------------------------------------

Manifest = Annotated[
    dict[str, Any] | str | None,
    Field(description="A RayCluster, RayJob or RayService manifest, as an object or as YAML text."),
]
KindArg = Annotated[
    Literal["RayCluster", "RayJob", "RayService"] | None,
    Field(description="The object's kind (or the manifest's)."),
]
ObjName = Annotated[str | None, Field(description="The object's name (or the manifest's metadata.name).")]
Namespace = Annotated[
    str | None, Field(description="Its namespace (default: the address's or the context's).")
]
KubeContext = Annotated[str | None, Field(description="The kubeconfig context (default: the current one).")]


async def kuberay_lint(
    ctx: Context,
    manifest: Manifest = None,
    kind: KindArg = None,
    name: ObjName = None,
    namespace: Namespace = None,
    context: KubeContext = None,
    runtime_env: Annotated[
        dict[str, Any] | None,
        Field(description="A job's runtime_env to check (pip without egress, working_dir size)."),
    ] = None,
) -> Annotated[CallToolResult, LintReport]:
    """Check a RayCluster, RayJob or RayService spec (a manifest, or one that exists) or a job's runtime_env
    against the failures KubeRay users hit. Each finding names the field, why it fails and the fix."""
    app = app_of(ctx)
    given = changes.manifest_of(manifest)
    kube: Kube | None = None
    with contextlib.suppress(RayMCPError):  # without Kubernetes, the rules that need it say they are unknown
        kube = (
            (await object_at(ctx, name or "x", namespace, context))[0]
            if (given or name or namespace)
            else None
        )
        kube = kube or await app.kube_at(context)
    obj: dict[str, Any] = {"kind": "runtime_env", "metadata": {"name": "runtime_env"}}
    if given is not None:
        obj = given
    elif name is not None:
        kube, obj_name = await object_at(ctx, name, namespace, context)
        obj = await (kube.get_ray(KIND_PLURAL[kind], obj_name) if kind else kube.find_ray(obj_name))
    elif runtime_env is None:
        raise InvalidArgument("Give something to check: manifest, kind and name, or runtime_env.")
    size = await changes.local_working_dir_bytes(runtime_env, app.upload_roots)
    context_ = await changes.lint_context(kube, runtime_env=runtime_env, working_dir_bytes=size)
    report = lint(obj, context_)
    return tool_result(report, "\n".join(render_lint(report, KUBE_LINT_SHOWN)))


def register(server: MCPServer) -> None:
    """The read tools and the changes (tools/kube_changes.py), in the order tools/list lists them."""
    # Imported here: the changes import this module's arguments and addressing (object_at, Target).
    from ray_mcp.tools.kube_changes import delete_ray_job, kuberay_apply, kuberay_delete, scale_worker_group

    server.tool(annotations=READ_ONLY.model_copy(update={"title": "KubeRay status"}))(kuberay_status)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Kubernetes pod log"}))(kuberay_logs)
    server.tool(
        annotations=WRITE.model_copy(update={"title": "Scale a worker group", "idempotent_hint": True})
    )(scale_worker_group)
    server.tool(annotations=DESTRUCTIVE.model_copy(update={"title": "Delete a RayJob"}))(delete_ray_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "KubeRay fleet"}))(kuberay_fleet)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Lint a KubeRay spec"}))(kuberay_lint)
    server.tool(annotations=WRITE.model_copy(update={"title": "Apply a KubeRay change"}))(kuberay_apply)
    server.tool(annotations=DESTRUCTIVE.model_copy(update={"title": "Delete a RayCluster or RayService"}))(
        kuberay_delete
    )
