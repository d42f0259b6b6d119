"""Changes to KubeRay objects as a plan (pure functions): what ray-mcp applies, the field diff of the dry run, and
what the KubeRay operator will do with a RayService's new spec.

What ray-mcp applies (server-side apply, field manager ``ray-mcp``) is the full intent of its manager: the
fields it owns now (projected from ``managedFields``, at their current values) with the change merged in. An
apply that left out a field ray-mcp owned would delete it, so a second change never undoes the first.

What a RayService's operator does is read from KubeRay's controller (ray-operator/controllers/ray/
rayservice_controller.go at the commit of tests/schemas/kuberay/SOURCE): it hashes ``rayClusterConfig``
without each worker group's replicas, minReplicas, maxReplicas and workersToDelete, the pod templates'
tolerations and schedulingGates, ``upgradeStrategy`` and ``suspend`` (``GenerateHashWithoutReplicasAndWorkersToDelete``,
``rayClusterSpecForHashing``). Same hash: the cluster stays as it is. Differs only by worker groups added at
the end: the running cluster is updated in place (``shouldUpdateCluster``). Else, unless the upgrade strategy is
``None`` (or the operator runs with ENABLE_ZERO_DOWNTIME=false and no strategy is set), a new cluster is
prepared (``shouldPrepareNewCluster``): all at once for ``NewCluster``, by steps for
``NewClusterWithIncrementalUpgrade`` (behind the operator's RayServiceIncrementalUpgrade feature gate). A new
``serveConfigV2`` is submitted to the cluster that serves (``checkIfNeedSubmitServeApplications``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ray_mcp.models.kuberay import FieldChange, ServiceOutcome
from ray_mcp.text import quoted

# The annotation that makes ray-mcp refuse every change to an object, and its value.
PROTECTED_ANNOTATION = "ray-mcp.io/protected"
# Fields of a KubeRay object a diff shows (status, and the server's own metadata, are not changes of ours).
DIFFED = ("spec", "labels", "annotations")
# List items are matched by these keys, when every item has one (groupName: worker groups; name: containers).
ITEM_KEYS = ("groupName", "name")


def is_protected(obj: dict[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(PROTECTED_ANNOTATION, "")).lower() == "true"


# -- what ray-mcp applies ----------------------------------------------------------------------------------


def owned_fields(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    """The FieldsV1 of ``manager``'s apply in ``managedFields`` (empty: it owns nothing)."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("operation") == "Apply":
            return dict(entry.get("fieldsV1") or {})
    return {}


def project(value: Any, fields: dict[str, Any]) -> Any:
    """``value`` cut to the fields FieldsV1 names (``f:`` a field, ``k:`` a list item by its keys; an empty
    node: the whole value)."""
    children = {k: v for k, v in fields.items() if k != "."}
    if not children:
        return copy.deepcopy(value)
    if isinstance(value, dict):
        out = {}
        for key, child in children.items():
            kind, _, name = key.partition(":")
            if kind == "f" and name in value:
                out[name] = project(value[name], child)
        return out
    if isinstance(value, list):
        items = []
        for key, child in children.items():
            kind, _, name = key.partition(":")
            if kind != "k":
                continue
            want = json.loads(name)
            item = next((i for i in value if isinstance(i, dict) and _has(i, want)), None)
            if item is not None:
                items.append({**{k: v for k, v in want.items() if v is not None}, **project(item, child)})
        return items
    return copy.deepcopy(value)


def _has(item: dict[str, Any], want: dict[str, Any]) -> bool:
    return all(item.get(k) == v for k, v in want.items() if v is not None)


def merge(base: Any, change: Any) -> Any:
    """``change`` over ``base``: maps field by field; lists of items that all carry a name (containers) item by
    item; anything else (an atomic list such as workerGroupSpecs) replaced whole."""
    if isinstance(base, dict) and isinstance(change, dict):
        out = dict(base)
        for key, value in change.items():
            out[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    key = _item_key(base, change)
    if key == "name":
        out_list = [copy.deepcopy(i) for i in base]
        for item in change:
            at = next((n for n, i in enumerate(out_list) if i.get("name") == item["name"]), None)
            if at is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[at] = merge(out_list[at], item)
        return out_list
    return copy.deepcopy(change)


def _item_key(*lists: Any) -> str | None:
    if not all(isinstance(v, list) and all(isinstance(i, dict) for i in v) for v in lists):
        return None
    return next((k for k in ITEM_KEYS if all(k in i for v in lists for i in v)), None)


def apply_config(obj: dict[str, Any], manager: str, change: dict[str, Any]) -> dict[str, Any]:
    """What ``manager`` applies for ``change`` to ``obj``: its owned fields at their current values, with the
    change merged in, and ``obj``'s resourceVersion (the API server then refuses it if the object changed)."""
    meta = obj.get("metadata") or {}
    fields = owned_fields(obj, manager)
    owned = project({k: obj.get(k) for k in ("spec", "metadata")}, fields) if fields else {}
    config = merge(owned if isinstance(owned, dict) else {}, change)
    config["metadata"] = {
        **(config.get("metadata") or {}),
        "name": meta["name"],
        "namespace": meta.get("namespace"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], **config}


def manifest_config(
    manifest: dict[str, Any], current: dict[str, Any] | None, namespace: str
) -> dict[str, Any]:
    """A manifest as ray-mcp's whole intent, bound to the version read (none for a new object)."""
    config = copy.deepcopy(manifest)
    config.pop("status", None)
    meta = config.setdefault("metadata", {})
    for server_set in ("uid", "managedFields", "creationTimestamp", "generation", "resourceVersion"):
        meta.pop(server_set, None)
    meta["namespace"] = namespace
    if current is not None:
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
    return config


# -- the field diff ----------------------------------------------------------------------------------------


def field_diff(before: dict[str, Any] | None, after: dict[str, Any]) -> list[FieldChange]:
    """Every field that differs between the object now and as it would be (spec, labels, annotations), as
    ``path: before -> after``; list items matched by groupName or name."""
    changes: list[FieldChange] = []
    old, new = _diffed(before or {}), _diffed(after)
    _walk(old, new, "", changes)
    return changes


def _diffed(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out = {"spec": obj.get("spec")}
    for key in ("labels", "annotations"):
        if meta.get(key):
            out[f"metadata.{key}"] = meta[key]
    return {k: v for k, v in out.items() if v is not None}


def _walk(old: Any, new: Any, path: str, out: list[FieldChange]) -> None:
    if old == new:
        return
    if isinstance(old, dict) and new is None:  # a map removed, or added: field by field
        new = {}
    if isinstance(new, dict) and old is None:
        old = {}
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            _walk(old.get(key), new.get(key), f"{path}.{key}" if path else key, out)
        return
    key = _item_key(old, new)
    if key is not None:
        olds, news = {i[key]: i for i in old}, {i[key]: i for i in new}
        for name in [*olds, *(n for n in news if n not in olds)]:
            _walk(olds.get(name), news.get(name), f"{path}[{key}={name}]", out)
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for n, (a, b) in enumerate(zip(old, new, strict=True)):
            _walk(a, b, f"{path}[{n}]", out)
        return
    out.append(FieldChange(path=path, before=_shown(old), after=_shown(new)))


def _shown(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text


def diff_lines(changes: list[FieldChange], limit: int) -> list[str]:
    return [
        f"{c.path}: {quoted(c.before) if c.before is not None else '(none)'} -> "
        f"{quoted(c.after) if c.after is not None else '(removed)'}"
        for c in changes[:limit]
    ]


# -- what the operator will do with a RayService -------------------------------------------------------------

_MUTED_GROUP = ("replicas", "minReplicas", "maxReplicas")


def _hashed(spec: dict[str, Any] | None) -> dict[str, Any]:
    """rayClusterConfig as KubeRay hashes it: without what its hash leaves out."""
    out = copy.deepcopy(spec or {})
    out.pop("suspend", None)
    out.pop("upgradeStrategy", None)
    head = ((out.get("headGroupSpec") or {}).get("template") or {}).get("spec")
    for template in [
        head,
        *(((g.get("template") or {}).get("spec")) for g in out.get("workerGroupSpecs") or []),
    ]:
        if isinstance(template, dict):
            template.pop("tolerations", None)
            template.pop("schedulingGates", None)
    for group in out.get("workerGroupSpecs") or []:
        for key in _MUTED_GROUP:
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
        if group.get("scaleStrategy") == {}:
            group.pop("scaleStrategy")
    return out


def service_outcome(before: dict[str, Any] | None, after: dict[str, Any]) -> list[ServiceOutcome]:
    """What KubeRay will do when the RayService ``before`` becomes ``after`` (None: it is created)."""
    new_spec = after.get("spec") or {}
    if before is None:
        return [
            ServiceOutcome(
                kind="new_cluster",
                text="KubeRay creates the RayService's first RayCluster, then deploys serveConfigV2 on it.",
            )
        ]
    old_spec = before.get("spec") or {}
    status = before.get("status") or {}
    upgrading = any(
        c.get("type") == "UpgradeInProgress" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    old_rc, new_rc = _hashed(old_spec.get("rayClusterConfig")), _hashed(new_spec.get("rayClusterConfig"))
    outcomes: list[ServiceOutcome] = []
    replaced = False
    if old_rc != new_rc:
        old_groups = old_rc.get("workerGroupSpecs") or []
        appended = {**new_rc, "workerGroupSpecs": (new_rc.get("workerGroupSpecs") or [])[: len(old_groups)]}
        if appended == old_rc and not upgrading:
            added = [
                str(g.get("groupName")) for g in (new_rc.get("workerGroupSpecs") or [])[len(old_groups) :]
            ]
            outcomes.append(
                ServiceOutcome(
                    kind="cluster_in_place",
                    text=f"KubeRay updates the running RayCluster in place, adding worker group(s) {', '.join(added)} "
                    "(only groups added at the end are updated in place; no new cluster, no downtime).",
                )
            )
        else:
            outcomes.append(_upgrade(new_spec, upgrading))
            replaced = outcomes[-1].kind in ("new_cluster", "incremental_upgrade")
    elif _replicas(old_spec) != _replicas(new_spec):
        outcomes.append(
            ServiceOutcome(
                kind="replicas_only",
                text="Only worker group replicas, minReplicas or maxReplicas change: KubeRay's hash of the cluster "
                "spec leaves them out, so it neither replaces nor updates the running RayCluster; the new values take "
                "effect with the next new cluster. To resize the running one, scale its RayCluster "
                "(scale_worker_group on its address).",
            )
        )
    if old_spec.get("serveConfigV2") != new_spec.get("serveConfigV2"):
        where = "to the new cluster once it is ready" if replaced else "to the running cluster"
        outcomes.append(
            ServiceOutcome(
                kind="serve_in_place",
                text=f"KubeRay submits the new serveConfigV2 {where} (an in-place Serve update: Serve redeploys "
                "the applications and deployments whose config changed; the others keep serving).",
            )
        )
    return outcomes or [
        ServiceOutcome(kind="nothing", text="KubeRay has nothing to do: no field it acts on changes.")
    ]


def _upgrade(spec: dict[str, Any], upgrading: bool) -> ServiceOutcome:
    strategy = str(((spec.get("upgradeStrategy") or {}).get("type")) or "")
    pending = (
        " An upgrade is in progress: KubeRay compares the new spec with the pending cluster, which it replaces."
        if upgrading
        else ""
    )
    if strategy == "None":
        return ServiceOutcome(
            kind="held",
            text="upgradeStrategy is None: KubeRay neither updates nor replaces the running RayCluster, so the new "
            "cluster spec waits (set upgradeStrategy.type NewCluster to roll it out)." + pending,
        )
    if strategy == "NewClusterWithIncrementalUpgrade":
        return ServiceOutcome(
            kind="incremental_upgrade",
            text="An incremental upgrade: KubeRay creates a new RayCluster and shifts traffic to it step by step "
            "(clusterUpgradeOptions: stepSizePercent every intervalSeconds, through the Gateway API), then deletes "
            "the old one. It needs the operator's RayServiceIncrementalUpgrade feature gate: without it, KubeRay "
            "does not upgrade at all." + pending,
        )
    unset = (
        ""
        if strategy
        else " (no upgradeStrategy: KubeRay's default, unless the operator runs with ENABLE_ZERO_DOWNTIME=false, when it does nothing)"
    )
    return ServiceOutcome(
        kind="new_cluster",
        text=f"A zero-downtime upgrade{unset}: KubeRay creates a new RayCluster, deploys serveConfigV2 on it, "
        "switches traffic when its Serve applications are ready, then deletes the old cluster; for a while both "
        "run, so the namespace needs room for two." + pending,
    )


def _replicas(spec: dict[str, Any]) -> list[tuple[Any, ...]]:
    groups = (spec.get("rayClusterConfig") or {}).get("workerGroupSpecs") or []
    return [tuple(g.get(k) for k in ("groupName", *_MUTED_GROUP)) for g in groups]
