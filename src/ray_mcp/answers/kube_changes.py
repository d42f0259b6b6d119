"""Changes to KubeRay objects, a plan first: read the object, build what ray-mcp applies, dry-run it on the API
server (``dryRun=All``), diff, say what the operator will do, lint; then apply exactly that, or delete.

Every change is bound to the object's uid and resourceVersion (the applied object carries the version, a
delete its preconditions), so the API server refuses it if anything changed since the plan was shown.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError
from ray_mcp.guard.confirm import change_digest
from ray_mcp.limits import INPUT_ERROR_CHARS, KUBE_LINT_NEIGHBOURS
from ray_mcp.models.kuberay import FieldChange, LintReport, ServiceOutcome
from ray_mcp.shaping.kube_changes import (
    PROTECTED_ANNOTATION,
    apply_config,
    field_diff,
    is_protected,
    manifest_config,
    service_outcome,
)
from ray_mcp.shaping.kube_lint import LintContext, lint
from ray_mcp.sources.kube_names import checked
from ray_mcp.sources.kubernetes import FIELD_MANAGER, KIND_PLURAL, RAY_KINDS, ApplyConflict, Kube
from ray_mcp.text import quoted

CHANGEABLE = ("RayCluster", "RayJob", "RayService")


@dataclass
class NamedFields:
    """The few fields a change can name instead of a manifest (None: left as it is)."""

    image: str | None = None
    ray_version: str | None = None
    group: str | None = None
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    autoscaling: bool | None = None
    serve_config_v2: str | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}


@dataclass
class Plan:
    """A change found out before anything changes: the dry run's object, its diff and what it leads to."""

    kind: str
    namespace: str
    name: str
    current: dict[str, Any] | None
    config: dict[str, Any]
    after: dict[str, Any]
    diff: list[FieldChange]
    force: bool
    takes_over: list[str]
    outcome: list[ServiceOutcome]
    lint: LintReport
    removes: list[str] = field(default_factory=list)  # what it scales to 0 or removes (destructive)

    @property
    def digest(self) -> str:
        """What the confirmation binds: the exact diff, whether it takes fields over, and what is applied."""
        diff = sorted(
            (c.path, c.before, c.after) for c in self.diff
        )  # as a set: the order maps were written in is no change
        return change_digest({"diff": diff, "force": self.force, "config": self.config})

    @property
    def instance(self) -> str:
        meta = (self.current or {}).get("metadata") or {}
        return f"{meta.get('uid')}@{meta.get('resourceVersion')}" if self.current else "new"


async def read_or_none(kube: Kube, kind: str, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get_ray(KIND_PLURAL[kind], name)
    except NotFound:
        return None


def refuse_protected(obj: dict[str, Any] | None, kind: str, namespace: str, name: str) -> None:
    if obj is not None and is_protected(obj):
        raise InvalidArgument(
            f"{kind} {namespace}/{name} is annotated {PROTECTED_ANNOTATION}=true: ray-mcp changes and deletes "
            "nothing so marked. Nothing was changed; whoever owns it can remove the annotation with kubectl."
        )


def named_change(obj: dict[str, Any], fields: NamedFields) -> dict[str, Any]:
    """The apply fragment for a few named fields of ``obj`` (a RayCluster's spec, a RayJob's rayClusterSpec, a
    RayService's rayClusterConfig)."""
    kind = str(obj["kind"])
    key = {"RayCluster": None, "RayJob": "rayClusterSpec", "RayService": "rayClusterConfig"}[kind]
    spec = obj.get("spec") or {}
    cluster = dict((spec.get(key) if key else spec) or {})
    if not cluster and (fields.given().keys() - {"serve_config_v2"}):
        raise InvalidArgument(
            f"{kind} {obj['metadata']['name']} has no cluster spec of its own (it runs on a cluster it selects): "
            "change that RayCluster instead."
        )
    out: dict[str, Any] = {}
    if fields.ray_version is not None:
        out["rayVersion"] = fields.ray_version
    if fields.autoscaling is not None:
        out["enableInTreeAutoscaling"] = fields.autoscaling
    if fields.image is not None:
        head = ((cluster.get("headGroupSpec") or {}).get("template") or {}).get("spec") or {}
        first = (head.get("containers") or [{}])[0].get("name")
        out["headGroupSpec"] = {
            "template": {"spec": {"containers": [{"name": first, "image": fields.image}]}}
        }
    groups = [dict(g) for g in cluster.get("workerGroupSpecs") or []]
    if fields.image is not None or fields.group is not None:
        out["workerGroupSpecs"] = _groups_changed(groups, fields, str(obj["metadata"]["name"]))
    change: dict[str, Any] = {"spec": {key: out} if key else out} if out else {"spec": {}}
    if fields.serve_config_v2 is not None:
        if kind != "RayService":
            raise InvalidArgument(
                f"serve_config_v2 is a RayService's, and {obj['metadata']['name']} is a {kind}."
            )
        change["spec"]["serveConfigV2"] = fields.serve_config_v2
    return change


def _groups_changed(groups: list[dict[str, Any]], fields: NamedFields, owner: str) -> list[dict[str, Any]]:
    """The worker groups (an atomic list: applied whole) with the new image and the named group's counts."""
    import copy

    out = copy.deepcopy(groups)
    if fields.group is not None and not any(g.get("groupName") == fields.group for g in out):
        names = ", ".join(quoted(str(g.get("groupName"))) for g in out) or "none"
        raise InvalidArgument(f"{owner} has no worker group {quoted(fields.group)}; its groups: {names}.")
    for g in out:
        if fields.image is not None:
            containers = ((g.setdefault("template", {})).setdefault("spec", {})).setdefault(
                "containers", [{}]
            )
            containers[0]["image"] = fields.image
        if g.get("groupName") == fields.group:
            for key, value in (
                ("replicas", fields.replicas),
                ("minReplicas", fields.min_replicas),
                ("maxReplicas", fields.max_replicas),
            ):
                if value is not None:
                    g[key] = value
    return out


def removals(before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """What a change removes or scales to 0: worker groups gone, replicas or maxReplicas set to 0."""
    if before is None:
        return []
    from ray_mcp.shaping.kube_lint import cluster_spec

    old = {g.get("groupName"): g for g in (cluster_spec(before)[1] or {}).get("workerGroupSpecs") or []}
    new = {g.get("groupName"): g for g in (cluster_spec(after)[1] or {}).get("workerGroupSpecs") or []}
    out = [f"removes worker group {quoted(str(n))}" for n in old if n not in new]
    for name, g in new.items():
        for key in ("replicas", "maxReplicas"):
            if g.get(key) == 0 and (old.get(name) or {}).get(key) not in (0, None):
                out.append(f"scales worker group {quoted(str(name))} {key} to 0")
    return out


async def lint_context(
    kube: Kube | None, *, runtime_env: dict[str, Any] | None = None, working_dir_bytes: int | None = None
) -> LintContext:
    """What the lint rules read beyond the spec: the namespace's KubeRay objects and NetworkPolicies (unknown,
    with why, when they cannot be read)."""
    from ray_mcp.sources.uploads import UPLOAD_LIMIT_BYTES

    ctx = LintContext(
        runtime_env=runtime_env, working_dir_bytes=working_dir_bytes, upload_limit=UPLOAD_LIMIT_BYTES
    )
    if kube is None:
        ctx.unknown += [
            "head_service_names: no Kubernetes connection to read the namespace's objects",
            "pip_without_egress: no Kubernetes connection to read the namespace's NetworkPolicies",
        ]
        return ctx
    try:
        pages = await asyncio.gather(
            *(
                kube.list_page(plural, everywhere=False, limit=KUBE_LINT_NEIGHBOURS, token=None)
                for plural, _ in RAY_KINDS
            )
        )
        ctx.neighbours = [o for items, _token, _left in pages for o in items]
    except RayMCPError as exc:
        ctx.unknown.append(
            f"head_service_names: the namespace's objects could not be read ({type(exc).__name__})"
        )
    try:
        ctx.policies = await kube.network_policies()
    except RayMCPError as exc:
        ctx.unknown.append(
            f"pip_without_egress: the namespace's NetworkPolicies could not be read ({type(exc).__name__}; RBAC: "
            "list on networkpolicies.networking.k8s.io)"
        )
    return ctx


async def plan(
    kube: Kube,
    *,
    kind: str,
    name: str,
    manifest: dict[str, Any] | None,
    fields: NamedFields,
) -> Plan:
    """The change as the API server would make it (a dry run), its diff, what the operator does, the lint."""
    checked(name, "rayobject")
    if not kind:  # named without its kind: the RayCluster, RayJob or RayService of that name
        current: dict[str, Any] | None = await kube.find_ray(name)
        kind = str((current or {}).get("kind"))
    else:
        current = await read_or_none(kube, kind, name)
    refuse_protected(current, kind, kube.namespace, name)
    if manifest is not None:
        config = manifest_config(manifest, current, kube.namespace)
    elif current is None:
        raise NotFound(
            f"No {kind} {kube.namespace}/{name} to change: to create one, pass its manifest (kuberay_fleet lists "
            "what exists)."
        )
    else:
        config = apply_config(current, FIELD_MANAGER, named_change(current, fields))
    plural = KIND_PLURAL[kind]
    force, takes_over = False, []
    try:
        after = await kube.apply_ray(plural, name, config, dry_run=True, force=False)
    except ApplyConflict as conflict:
        force, takes_over = True, [f"{field_} (from {manager})" for field_, manager in conflict.conflicts]
        after = await kube.apply_ray(plural, name, config, dry_run=True, force=True)
    outcome = service_outcome(current, after) if kind == "RayService" else []
    return Plan(
        kind=kind,
        namespace=kube.namespace,
        name=name,
        current=current,
        config=config,
        after=after,
        diff=field_diff(current, after),
        force=force,
        takes_over=takes_over,
        outcome=outcome,
        lint=lint(after, await lint_context(kube)),
        removes=removals(current, after),
    )


async def apply(kube: Kube, planned: Plan) -> dict[str, Any]:
    """Apply exactly the planned config (its resourceVersion makes the API server refuse a changed object)."""
    return await kube.apply_ray(
        KIND_PLURAL[planned.kind], planned.name, planned.config, dry_run=False, force=planned.force
    )


def manifest_of(given: dict[str, Any] | str | None) -> dict[str, Any] | None:
    """A manifest given as an object or as YAML text (one document)."""
    if given is None or isinstance(given, dict):
        return given
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(given) if d]
    except yaml.YAMLError as exc:
        raise InvalidArgument(
            f"The manifest is not YAML: {str(exc)[:INPUT_ERROR_CHARS]}. Pass one KubeRay object."
        ) from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InvalidArgument(f"The manifest holds {len(docs)} documents; pass exactly one KubeRay object.")
    return dict(docs[0])


def target_of(
    manifest: dict[str, Any] | None, kind: str | None, name: str | None, namespace: str | None
) -> tuple[str, str, str | None]:
    """(kind, name, namespace) from the arguments, the manifest filling what they leave out; they must agree."""
    meta = (manifest or {}).get("metadata") or {}
    kind = kind or (manifest or {}).get("kind")
    name = name or meta.get("name")
    namespace = namespace or meta.get("namespace")
    if kind is None and manifest is None:
        return "", str(name or ""), namespace  # found by its name (plan looks it up)
    if kind not in CHANGEABLE:
        raise InvalidArgument(
            f"kind {quoted(str(kind))} is not one ray-mcp changes: pass kind RayCluster, RayJob or RayService (or a "
            "manifest of one)."
        )
    if manifest is not None and (manifest.get("kind") != kind or meta.get("name") not in (None, name)):
        raise InvalidArgument(
            "The manifest's kind and name differ from the kind and name given; pass one of them."
        )
    if manifest is not None and manifest.get("apiVersion") != "ray.io/v1":
        raise InvalidArgument(
            f"The manifest's apiVersion is {quoted(str(manifest.get('apiVersion')))}; KubeRay's is ray.io/v1."
        )
    if not name and manifest is not None:
        raise InvalidArgument("The manifest has no metadata.name: name the object.")
    return str(kind), str(name or ""), namespace


async def local_working_dir_bytes(runtime_env: dict[str, Any] | None, roots: list[Path]) -> int | None:
    """The size of a runtime_env's local working_dir (under the upload roots, as submit_job reads it)."""
    if not runtime_env or not isinstance(runtime_env.get("working_dir"), str):
        return None
    from ray_mcp.sources.uploads import confine_uploads, is_uri, tree_bytes

    if is_uri(runtime_env["working_dir"]):
        return None
    confined = await asyncio.to_thread(confine_uploads, runtime_env, roots)
    return await asyncio.to_thread(tree_bytes, Path(confined["working_dir"]), runtime_env.get("excludes"))
