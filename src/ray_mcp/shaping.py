"""Pure functions that shape what an agent sees: field choice, units, budgets, feasibility, results.

Nothing here talks to Ray or to MCP's transport; everything is unit-tested on plain data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from ray_mcp import models

# Ray reports these resources in bytes.
BYTE_RESOURCES = frozenset({"memory", "object_store_memory"})
GIB = 1024**3


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """A tool answer: the concise text for the model, and the structured data with nulls dropped."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json", exclude_none=True),
    )


def to_number(value: Any) -> Any:
    """Ray's REST layer sends int64 values as strings ("num_restarts": "0"): turn them back into numbers."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def uncamel_resources(usage: Mapping[str, Any], known: Iterable[str]) -> dict[str, tuple[float, float]]:
    """Undo the dashboard's camelCasing of resource names (``objectStoreMemory``) using the names Ray knows.

    The autoscaler report converts dict keys to camelCase; the node list keeps them as they are.
    """
    reverse = {_camel(name): name for name in known}
    reverse.update({_camel(name): name for name in BYTE_RESOURCES})
    out: dict[str, tuple[float, float]] = {}
    for key, pair in usage.items():
        name = reverse.get(key, key)
        try:
            used, total = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError):
            continue
        out[name] = (used, total)
    return out


def is_internal_resource(name: str) -> bool:
    """Ray's implicit per-node resources (``node:<ip>``, ``node:__internal_head__``) are noise for an agent."""
    return name.startswith("node:") or name.startswith("accelerator_type:")


def node_resources(
    totals: Mapping[str, Any], usage: Mapping[str, tuple[float, float]]
) -> dict[str, models.ResourceUse]:
    out: dict[str, models.ResourceUse] = {}
    for name, total in totals.items():
        if is_internal_resource(name):
            continue
        used = usage.get(name, (0.0, float(total)))[0]
        out[name] = models.ResourceUse(used=used, total=float(total))
    return dict(sorted(out.items()))


def fits(bundle: Mapping[str, float], capacity: Mapping[str, float]) -> bool:
    return all(
        float(amount) <= float(capacity.get(name, 0.0)) + 1e-9 for name, amount in bundle.items() if amount
    )


def demand_is_feasible(
    bundles: Sequence[Mapping[str, float]],
    node_shapes: Sequence[Mapping[str, float]],
    *,
    strategy: str | None,
) -> bool:
    """Could this demand ever be placed on nodes of these shapes (ignoring what is in use now)?"""
    if not bundles:
        return True
    if not node_shapes:
        return False
    if strategy == "STRICT_PACK":
        merged: dict[str, float] = {}
        for bundle in bundles:
            for name, amount in bundle.items():
                merged[name] = merged.get(name, 0.0) + float(amount)
        return any(fits(merged, shape) for shape in node_shapes)
    if strategy == "STRICT_SPREAD" and len(bundles) > len(node_shapes):
        return False
    return all(any(fits(bundle, shape) for shape in node_shapes) for bundle in bundles)


# -- text rendering -----------------------------------------------------------------------------------------


def format_amount(name: str, value: float) -> str:
    if name in BYTE_RESOURCES:
        return f"{value / GIB:.3g} GiB" if value >= GIB / 10 else f"{value / 1024**2:.3g} MiB"
    return f"{value:g}"


def format_use(name: str, use: models.ResourceUse) -> str:
    if name in BYTE_RESOURCES:
        return f"{name} {format_amount(name, use.used).split()[0]}/{format_amount(name, use.total)}"
    return f"{name} {use.used:g}/{use.total:g}"


def format_shape(shape: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {format_amount(k, v)}" for k, v in shape.items()) + "}"


def render_cluster_status(status: models.ClusterStatus) -> str:
    lines = [
        f"Ray {status.ray_version} cluster at {status.dashboard_url} ({status.source}): "
        f"{status.nodes_alive} node(s) alive, {status.nodes_dead} dead.",
        "Resources used/total: "
        + (", ".join(format_use(k, v) for k, v in status.resources.items()) or "none"),
        f"Nodes ({status.nodes_shown} of {status.nodes_alive + status.nodes_dead}):",
    ]
    for node in status.nodes:
        role = "head" if node.is_head else "worker"
        if node.state == "ALIVE":
            use = ", ".join(format_use(k, v) for k, v in node.resources.items())
            lines.append(f"  {node.node_id} {node.ip} {role} ALIVE {use}")
        else:
            lines.append(f"  {node.node_id} {node.ip} {role} DEAD: {node.death_reason}")
    if status.pending_demands:
        lines.append("Pending demands:")
        for demand in status.pending_demands:
            shape = " + ".join(format_shape(b) for b in demand.bundles)
            strategy = f" {demand.strategy}" if demand.strategy else ""
            verdict = "INFEASIBLE (fits no node)" if demand.infeasible else "waiting for free resources"
            lines.append(f"  {demand.kind}{strategy} {shape} x{demand.count}: {verdict}")
    else:
        lines.append("Pending demands: none.")
    lines.append(f"Pending placement groups: {status.pending_placement_groups}.")
    if status.autoscaler is None:
        lines.append("Autoscaler: no report.")
    else:
        a = status.autoscaler
        parts = [f"{a.active_nodes} active node(s)"]
        if a.pending_nodes or a.pending_launches:
            parts.append(f"pending: {', '.join(a.pending_nodes) or json.dumps(a.pending_launches)}")
        if a.failed_nodes:
            parts.append(f"failed: {', '.join(a.failed_nodes[:5])}")
        if a.error:
            parts.append(f"error: {a.error}")
        lines.append(f"Autoscaler ({a.kind}): " + "; ".join(parts) + ".")
    lines += [f"Hint: {hint}" for hint in status.hints]
    return "\n".join(lines)


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown file into its YAML front matter (between ``---`` fences) and its body."""
    if not text.startswith("---"):
        return {}, text
    _, _, rest = text.partition("\n")
    header, sep, body = rest.partition("\n---")
    if not sep:
        return {}, text
    import yaml  # ships with Ray; only needed when docs are loaded

    meta = yaml.safe_load(header) or {}
    return (meta if isinstance(meta, dict) else {}), body.partition("\n")[2]


# -- redaction -----------------------------------------------------------------------------------------------

REDACTED = "***"
# Names of fields and variables whose values are secrets: *SECRET*, *PASSWORD*, and *_TOKEN, *_KEY, ...
SECRET_KEY = re.compile(
    r"(?i)(secret|passw(or)?d|passphrase|credential|authorization|cookie|(^|[_.-])(token|api[_-]?key|key|auth)$)"
)
_SECRET_NAME = (
    r"[\w.-]*(?:secret|passw(?:or)?d)[\w.-]*|[\w.-]*(?:token|api[_-]?key|_key|credentials?|passphrase)\b"
)
_SECRET_TEXT: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # NAME=value, NAME: value, "NAME": "value" where NAME looks like a secret's name
    (re.compile(rf"""(?i)(["']?\b(?:{_SECRET_NAME})["']?\s*[=:]\s*)(["']?)([^\s"',}}]+)"""), r"\1\2***"),
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?\S+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}***",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer ***"),
    (re.compile(r"\b(?:hf|sk|ghp|gho|ghs|ghu|github_pat|xox[abp]|glpat)[-_][A-Za-z0-9_-]{16,}\b"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
]


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Mask what looks like a token, password or key in free text (log lines, messages, rendered answers)."""
    for secret in sorted({s for s in extra_secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def secret_values(obj: Any) -> set[str]:
    """Values that must never be shown: every ``env_vars`` value and every value under a secret-looking key."""
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                found.update(str(v) for v in value.values() if isinstance(v, str | int | float) and str(v))
            elif isinstance(key, str) and SECRET_KEY.search(key) and isinstance(value, str) and value:
                found.add(value)
            else:
                found |= secret_values(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            found |= secret_values(item)
    return found


def redact(obj: Any, extra_secrets: Iterable[str] = ()) -> Any:
    """Redact a JSON-like structure: env_vars values, secret-named fields, and secrets inside strings."""
    extra = set(extra_secrets) | secret_values(obj)
    return _redact(obj, extra)


def _redact(obj: Any, extra: set[str]) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, extra)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                out[key] = {k: REDACTED for k in value}
            elif isinstance(key, str) and SECRET_KEY.search(key) and isinstance(value, str):
                out[key] = REDACTED
            else:
                out[key] = _redact(value, extra)
        return out
    if isinstance(obj, list):
        return [_redact(item, extra) for item in obj]
    return obj
