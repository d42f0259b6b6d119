"""Server-side apply as the Kubernetes API documents it, for the loopback API server (no real one runs here).

What it follows (kubernetes.io/docs/reference/using-api/server-side-apply/, and structured-merge-diff's field
sets): every field is owned by the field managers that set it; an apply sets the fields of its configuration,
takes ownership of them, and removes the fields its manager owned before and no longer applies (unless another
manager owns them too); applying a value that differs from one another manager owns is a conflict (409, one
cause per field naming the manager) unless ``force``, which takes the field over. Lists are atomic unless the
schema says ``x-kubernetes-list-type: map`` (then an item is keyed by ``x-kubernetes-list-map-keys``), maps
are granular. ``managedFields`` are written as FieldsV1 (``f:<field>``, ``k:<key json>``). A non-apply write
(a JSON patch) gives its manager the fields it changed.

What it leaves out: sets (``v:``), associative lists keyed by more than the schema says, ownership of the
``.`` of a list item, defaulting and conversion. The schemas are KubeRay's CRDs (tests/schemas/kuberay/).
"""

from __future__ import annotations

import copy
import json
from typing import Any

Path = tuple[tuple[str, str], ...]  # ("f", field) or ("k", key json) steps
OWNED_META = ("labels", "annotations")  # of metadata, the fields apply tracks


class Conflict(Exception):
    def __init__(self, conflicts: list[tuple[Path, str]]) -> None:
        self.conflicts = conflicts


def _child(schema: dict[str, Any] | None, field: str) -> dict[str, Any] | None:
    if not schema:
        return None
    props = schema.get("properties") or {}
    if field in props:
        return dict(props[field])
    extra = schema.get("additionalProperties")
    return dict(extra) if isinstance(extra, dict) else None


def _map_keys(schema: dict[str, Any] | None) -> list[str] | None:
    if schema and schema.get("x-kubernetes-list-type") == "map":
        return list(schema.get("x-kubernetes-list-map-keys") or [])
    return None


def _key(item: dict[str, Any], keys: list[str]) -> str:
    return json.dumps({k: item.get(k) for k in keys}, sort_keys=True, separators=(",", ":"))


def leaves(value: Any, schema: dict[str, Any] | None, prefix: Path = ()) -> list[Path]:
    """The fields ``value`` sets, as paths in its own order: a scalar or an atomic list is one field; a map's
    keys and a map list's items (by their keys) are walked into."""
    if isinstance(value, dict) and value:
        out: list[Path] = []
        for field, child in value.items():
            out += leaves(child, _child(schema, field), (*prefix, ("f", field)))
        return out
    keys = _map_keys(schema)
    if isinstance(value, list) and keys:
        out = []
        for item in value:
            out += leaves(item, (schema or {}).get("items"), (*prefix, ("k", _key(item, keys))))
        return out
    return [prefix]


def managed_leaves(obj: dict[str, Any], schema: dict[str, Any]) -> list[Path]:
    """The fields an object sets that apply tracks, in the object's order (a list keeps its items' order)."""
    meta = obj.get("metadata") or {}
    found = leaves(obj.get("spec") or {}, _child(schema, "spec"), (("f", "spec"),)) if obj.get("spec") else []
    for field in OWNED_META:
        if meta.get(field):
            found += leaves(meta[field], None, (("f", "metadata"), ("f", field)))
    return list(dict.fromkeys(found))


def _step(node: Any, step: tuple[str, str]) -> Any:
    kind, name = step
    if kind == "f":
        return node.get(name) if isinstance(node, dict) else None
    key = json.loads(name)
    if isinstance(node, list):
        return next(
            (i for i in node if isinstance(i, dict) and all(i.get(k) == v for k, v in key.items())), None
        )
    return None


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for step in path:
        node = _step(node, step)
        if node is None:
            return None
    return node


def set_at(obj: dict[str, Any], path: Path, value: Any) -> None:
    node: Any = obj
    for i, (kind, name) in enumerate(path):
        last = i == len(path) - 1
        if kind == "f":
            if last:
                node[name] = copy.deepcopy(value)
                return
            nxt = node.get(name)
            if nxt is None:
                nxt = [] if path[i + 1][0] == "k" else {}
                node[name] = nxt
            node = nxt
        else:
            key = json.loads(name)
            item = _step(node, (kind, name))
            if item is None:
                item = {k: v for k, v in key.items() if v is not None}
                node.append(item)
            if last:
                item.clear()
                item.update(copy.deepcopy(value))
                return
            node = item


def remove_at(obj: dict[str, Any], path: Path) -> None:
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    kind, name = path[-1]
    if kind == "f" and isinstance(parent, dict):
        parent.pop(name, None)
    elif kind == "k" and isinstance(parent, list):
        item = _step(parent, path[-1])
        if item is not None:
            parent.remove(item)


def fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Paths as FieldsV1 (what managedFields hold)."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for kind, name in path:
            node = node.setdefault(f"{kind}:{name}", {})
    return root


def paths_of(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    """FieldsV1 back to paths (its leaves)."""
    out: set[Path] = set()
    for key, child in fields.items():
        if key == ".":
            continue
        kind, _, name = key.partition(":")
        path = (*prefix, (kind, name))
        out |= paths_of(child, path) if child else {path}
    return out


def dotted(path: Path) -> str:
    """A path as Kubernetes names it in a conflict: .spec.workerGroupSpecs, .x[name="a"].image."""
    out = ""
    for kind, name in path:
        if kind == "f":
            out += f".{name}"
        else:
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(name).items()) + "]"
    return out


def managers(obj: dict[str, Any]) -> dict[str, set[Path]]:
    out: dict[str, set[Path]] = {}
    for entry in (obj.get("metadata") or {}).get("managedFields") or []:
        out.setdefault(entry["manager"], set()).update(paths_of(entry.get("fieldsV1") or {}))
    return out


def _write_managers(
    obj: dict[str, Any], owned: dict[str, set[Path]], operations: dict[str, str], now: str
) -> None:
    obj.setdefault("metadata", {})["managedFields"] = [
        {
            "manager": manager,
            "operation": operations.get(manager, "Update"),
            "apiVersion": obj.get("apiVersion"),
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields_v1(paths),
        }
        for manager, paths in sorted(owned.items())
        if paths
    ]


def _operations(obj: dict[str, Any]) -> dict[str, str]:
    return {
        e["manager"]: e.get("operation", "Update")
        for e in (obj.get("metadata") or {}).get("managedFields") or []
    }


def apply(
    current: dict[str, Any] | None,
    config: dict[str, Any],
    *,
    manager: str,
    force: bool,
    schema: dict[str, Any],
    now: str,
) -> dict[str, Any]:
    """The object after ``manager`` applies ``config`` (raises Conflict without ``force``)."""
    result = (
        copy.deepcopy(current)
        if current is not None
        else {
            "apiVersion": config["apiVersion"],
            "kind": config["kind"],
            "metadata": {k: config["metadata"][k] for k in ("name", "namespace") if k in config["metadata"]},
        }
    )
    owned = managers(result)
    order = managed_leaves(config, schema)  # set in this order: a list's items land as the config lists them
    applied = set(order)
    conflicts = [
        (path, other)
        for path in sorted(applied)
        for other, paths in owned.items()
        if other != manager and path in paths and value_at(result, path) != value_at(_sections(config), path)
    ]
    if conflicts and not force:
        raise Conflict(conflicts)
    for path, other in conflicts:
        owned[other].discard(path)
    before = owned.get(manager, set())
    for path in order:
        set_at(result, path, value_at(_sections(config), path))
    for path in sorted(before - applied, key=len, reverse=True):
        if not any(path in paths for other, paths in owned.items() if other != manager):
            remove_at(result, path)
    owned[manager] = applied
    operations = _operations(result) | {manager: "Apply"}
    _write_managers(result, owned, operations, now)
    return result


def _sections(config: dict[str, Any]) -> dict[str, Any]:
    return {
        "spec": config.get("spec"),
        "metadata": {k: (config.get("metadata") or {}).get(k) for k in OWNED_META},
    }


def record_update(
    before: dict[str, Any], after: dict[str, Any], *, manager: str, schema: dict[str, Any], now: str
) -> None:
    """A non-apply write (JSON patch, put): ``manager`` owns the fields it changed (others lose them)."""
    owned = managers(before)
    changed = {p for p in managed_leaves(after, schema) if value_at(after, p) != value_at(before, p)}
    for paths in owned.values():
        paths -= changed
    owned.setdefault(manager, set()).update(changed)
    _write_managers(
        after, owned, _operations(before) | {manager: _operations(before).get(manager, "Update")}, now
    )


def own_everything(obj: dict[str, Any], *, manager: str, schema: dict[str, Any], now: str) -> None:
    """An object as created by ``manager`` (a client-side ``kubectl apply``: operation Update)."""
    _write_managers(obj, {manager: set(managed_leaves(obj, schema))}, {manager: "Update"}, now)
