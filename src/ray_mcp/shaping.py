"""Pure functions that shape what an agent sees: field choice, units, budgets, feasibility, results.

Nothing here talks to Ray or to MCP's transport; everything is unit-tested on plain data.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from ray_mcp import models
from ray_mcp.errors import InvalidArgument

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


def node_identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every view of a node shares, from a State API node row; a DEAD node carries its reason."""
    alive = row.get("state") == "ALIVE"
    return {
        "node_id": str(row.get("node_id", "")),
        "ip": str(row.get("node_ip", "")),
        "state": "ALIVE" if alive else "DEAD",
        "is_head": bool(row.get("is_head_node")),
        "death_reason": None if alive else (row.get("state_message") or "no reason recorded"),
    }


def build_cluster_status(
    *,
    dashboard_url: str,
    source: str,
    version: Mapping[str, Any],
    nodes: list[Mapping[str, Any]],
    status: Mapping[str, Any],
    pending_placement_groups: int,
    max_nodes: int,
) -> models.ClusterStatus:
    """Join the node list and the autoscaler report into one ClusterStatus (pure, tested without Ray)."""
    cluster_status = status.get("clusterStatus") or {}
    load = cluster_status.get("loadMetricsReport") or {}
    known = {name for node in nodes for name in (node.get("resources_total") or {})}
    usage_by_node = {
        node_id: uncamel_resources(usage, known) for node_id, usage in (load.get("usageByNode") or {}).items()
    }

    node_models: list[models.NodeStatus] = []
    totals: dict[str, list[float]] = {}
    for node in nodes:
        alive = node.get("state") == "ALIVE"
        node_id = str(node.get("node_id", ""))
        used_total = usage_by_node.get(node_id, {})
        resources = node_resources(node.get("resources_total") or {}, used_total) if alive else {}
        if alive:
            for name, use in resources.items():
                acc = totals.setdefault(name, [0.0, 0.0])
                acc[0] += use.used
                acc[1] += use.total
        node_models.append(models.NodeStatus(**node_identity(node), resources=resources))
    node_models.sort(key=lambda n: (not n.is_head, n.state != "ALIVE", n.ip, n.node_id))

    alive_totals = [n.resources for n in node_models if n.state == "ALIVE"]
    node_types = [shape for shape, _count in (load.get("nodeTypes") or [])]
    demands = _demands(load, alive_totals, node_types)

    autoscaler = _autoscaler(cluster_status.get("autoscalerReport"), status.get("autoscalingError"))
    shown = node_models[:max_nodes]
    alive_count = sum(1 for n in node_models if n.state == "ALIVE")
    hints: list[str] = []
    if len(shown) < len(node_models):
        hints.append(
            f"{len(node_models) - len(shown)} more nodes not shown; call cluster_status with a larger max_nodes."
        )
    if pending_placement_groups:
        hints.append(
            f"{pending_placement_groups} placement groups are PENDING; pg_status explains why each waits."
        )
    if any(d.infeasible for d in demands):
        hints.append(
            "Some demands fit on no node: lower the request, or add a node with those resources "
            "(an autoscaler adds one only if a node type can hold it)."
        )
    return models.ClusterStatus(
        dashboard_url=dashboard_url,
        source=source,
        ray_version=str(version.get("ray_version", "unknown")),
        session_name=version.get("session_name"),
        nodes_alive=alive_count,
        nodes_dead=len(node_models) - alive_count,
        resources={name: models.ResourceUse(used=u, total=t) for name, (u, t) in sorted(totals.items())},
        nodes=shown,
        nodes_shown=len(shown),
        pending_demands=demands,
        pending_placement_groups=pending_placement_groups,
        autoscaler=autoscaler,
        hints=hints,
    )


def _demands(
    load: Mapping[str, Any],
    node_resources_list: list[dict[str, models.ResourceUse]],
    node_types: list[Mapping[str, float]],
) -> list[models.Demand]:
    shapes = [{k: v.total for k, v in res.items()} for res in node_resources_list] + [
        dict(t) for t in node_types
    ]
    out: list[models.Demand] = []
    for shape, count in load.get("resourceDemand") or []:
        out.append(
            models.Demand(
                kind="task_or_actor",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    for pg, count in load.get("pgDemand") or []:
        bundles = [_clean_shape(b) for b, n in pg.get("bundles") or [] for _ in range(int(n))]
        strategy = pg.get("strategy")
        out.append(
            models.Demand(
                kind="placement_group",
                bundles=bundles,
                strategy=strategy,
                count=int(count),
                infeasible=not demand_is_feasible(bundles, shapes, strategy=strategy),
            )
        )
    for shape, count in load.get("requestDemand") or []:
        out.append(
            models.Demand(
                kind="request_resources",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    return out


def _clean_shape(shape: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in shape.items() if not str(k).startswith("node:")}


def _autoscaler(report: Mapping[str, Any] | None, error: str | None) -> models.AutoscalerStatus | None:
    if not report and not error:
        return None
    report = report or {}
    pending_nodes = [
        " ".join(str(x) for x in (p if isinstance(p, list | tuple) else [p]))
        for p in report.get("pendingNodes") or []
    ]
    failed_nodes = [
        " ".join(str(x) for x in (f if isinstance(f, list | tuple) else [f]))
        for f in report.get("failedNodes") or []
    ]
    launches = {str(k): int(v) for k, v in (report.get("pendingLaunches") or {}).items()}
    return models.AutoscalerStatus(
        # A "legacy" report with no launches and no node types is what a fixed-size cluster (ray start) shows.
        kind="legacy" if report.get("legacy") else "v2",
        active_nodes=sum(int(v) for v in (report.get("activeNodes") or {}).values()),
        pending_nodes=pending_nodes,
        pending_launches=launches,
        failed_nodes=failed_nodes,
        error=error or None,
    )


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


def is_secret_key(key: object) -> bool:
    """A field whose value is a secret. Confirmation tokens are not: the agent must be able to send them back."""
    return isinstance(key, str) and not key.startswith("confirm") and SECRET_KEY.search(key) is not None


_SECRET_NAME = (
    r"[\w.-]*(?:secret|passw(?:or)?d)[\w.-]*|[\w.-]*(?:token|api[_-]?key|_key|credentials?|passphrase)\b"
)
_PLACEHOLDER = r"(?![<$*{.…])"  # <token>, $TOKEN, ${env:TOKEN}, ***, ...: documentation, not secrets
_SECRET_TEXT: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # NAME=value (env and shell style), any secret-looking name
    (re.compile(rf"""(?i)(\b(?:{_SECRET_NAME})\s*=\s*)(["']?){_PLACEHOLDER}([^\s"',}}]+)"""), r"\1\2***"),
    # "NAME": "value" (JSON, Python reprs)
    (re.compile(rf"""(?i)(["'](?:{_SECRET_NAME})["']\s*:\s*)(["']){_PLACEHOLDER}([^"']+)"""), r"\1\2***"),
    # NAME: value (YAML, logs) where NAME is an identifier such as HF_TOKEN or PASSWORD, not a prose word
    (
        re.compile(
            rf"""(\b(?=[\w.-]*[_A-Z])(?:[A-Z0-9_.-]*(?:SECRET|PASSWORD|PASSWD|TOKEN|KEY|CREDENTIALS?)[A-Z0-9_.-]*|[\w.-]+_(?:token|secret|password|passwd|key|api_key))\s*:\s*)(["']?){_PLACEHOLDER}([^\s"',}}]+)"""
        ),
        r"\1\2***",
    ),
    (
        re.compile(
            r"(?i)\b(authorization\s*[:=]\s*)(?!(?:(?:bearer|basic|token)\s+)?[<$*{.…])(?:(bearer|basic|token)\s+)?\S+"
        ),
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
            elif is_secret_key(key) and isinstance(value, str) and value:
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
            elif is_secret_key(key) and isinstance(value, str):
                out[key] = REDACTED
            else:
                out[key] = _redact(value, extra)
        return out
    if isinstance(obj, list):
        return [_redact(item, extra) for item in obj]
    return obj


# -- jobs ---------------------------------------------------------------------------------------------------

_RUNTIME_ENV_FIXES = {
    "working_dir": "a local directory path or a remote URI such as s3://bucket/code.zip",
    "py_modules": "a list of local directories or URIs",
    "excludes": 'a list of gitignore-style patterns, e.g. [".git", "*.ckpt"]',
    "pip": 'a list of requirement strings, e.g. ["requests==2.31"], a requirements.txt path, or a dict',
    "uv": "a list of requirement strings, a requirements.txt path, or a dict",
    "conda": "the name of a conda env, or an environment.yml as a dict",
    "env_vars": 'a mapping of names to STRING values, e.g. {"MODE": "fast", "N": "3"}',
    "config": '{"setup_timeout_seconds": 600, "eager_install": true}',
}
_RUNTIME_ENV_CONFIG_KEYS = {"setup_timeout_seconds", "eager_install", "log_files"}


def _is_uri(value: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", value))


def check_runtime_env(raw: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Validate a runtime_env before anything is submitted; return it (nulls dropped) and its local paths.

    Raises InvalidArgument naming the field and the fix: an unknown key, a wrong type, a local working_dir or
    py_module that does not exist.
    """
    if not raw:
        return {}, []
    if not isinstance(raw, Mapping):
        raise InvalidArgument(
            f"runtime_env must be an object such as {{'working_dir': '.', 'pip': ['requests']}}, not {raw!r}."
        )
    try:
        spec = models.RuntimeEnvSpec.model_validate(dict(raw))
    except ValidationError as exc:
        problems: dict[str, str] = {}  # one problem per field: a union type fails once per member
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "runtime_env"
            if err["type"] == "extra_forbidden":
                known = ", ".join(models.RuntimeEnvSpec.model_fields)
                problems[field] = f"unknown key runtime_env.{field}: use one of {known}"
            elif field not in problems:
                union_tags = ("list[", "dict[", "str")
                where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(union_tags))
                fix = _RUNTIME_ENV_FIXES.get(field, "see the field's description")
                got = truncate_text(repr(err.get("input")), 80)
                problems[field] = f"runtime_env.{where} has a wrong type or value (got {got}); use {fix}"
        detail = "; ".join(problems.values())
        raise InvalidArgument(f"Invalid runtime_env, nothing was submitted: {detail}.") from exc
    env = spec.model_dump(exclude_none=True)
    unknown_config = set(env.get("config") or {}) - _RUNTIME_ENV_CONFIG_KEYS
    if unknown_config:
        raise InvalidArgument(
            f"Invalid runtime_env, nothing was submitted: unknown key(s) {sorted(unknown_config)} in "
            f"runtime_env.config; use {sorted(_RUNTIME_ENV_CONFIG_KEYS)}."
        )
    local: list[str] = []
    paths = [("working_dir", env["working_dir"])] if "working_dir" in env else []
    paths += [("py_modules", p) for p in env.get("py_modules") or []]
    for field, value in paths:
        if _is_uri(value):
            continue
        path = Path(value).expanduser()
        if not path.exists():
            raise InvalidArgument(
                f"Invalid runtime_env, nothing was submitted: runtime_env.{field} {value!r} does not exist "
                f"on the machine running ray-mcp ({Path.cwd()} is the current directory). Give an existing "
                "local directory (it is zipped and uploaded) or a remote URI such as s3://bucket/code.zip."
            )
        if field == "working_dir" and not path.is_dir():
            raise InvalidArgument(
                f"Invalid runtime_env, nothing was submitted: runtime_env.working_dir {value!r} is a file; "
                "give a directory, or a .zip URI."
            )
        resolved = str(path.resolve())
        local.append(resolved)
        if field == "working_dir":
            env["working_dir"] = resolved
        else:
            env["py_modules"] = [resolved if p == value else p for p in env["py_modules"]]
    return env, local


def iso_time(ms: Any) -> str | None:
    """Ray's job times are epoch milliseconds; render them as UTC ISO 8601."""
    if not ms:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat(timespec="seconds")


def short_message(message: str, limit: int = 1200) -> str:
    """Ray puts up to 20,000 characters of driver log in a failed job's message: keep its head and its end."""
    if len(message) <= limit:
        return message
    first = message.split("\n", 1)[0][:300]
    tail = message[-(limit - 300) :]
    cut = len(message) - len(first) - len(tail)
    return f"{first}\n…[{cut} characters cut; tail_logs has the whole log]…\n{tail}"


def job_duration_s(start_ms: Any, end_ms: Any, now_s: float) -> float | None:
    if not start_ms:
        return None
    end_s = int(end_ms) / 1000 if end_ms else now_s
    return round(max(0.0, end_s - int(start_ms) / 1000), 3)


def job_info(details: Mapping[str, Any], now_s: float) -> models.JobInfo:
    """One Ray ``JobDetails`` (as a dict) as our JobInfo."""
    return models.JobInfo(
        submission_id=details.get("submission_id"),
        job_id=details.get("job_id"),
        type=str(details.get("type") or "SUBMISSION").upper(),
        status=str(details.get("status") or "PENDING"),
        entrypoint=str(details.get("entrypoint") or ""),
        message=short_message(str(details.get("message") or "")) or None,
        error_type=details.get("error_type") or None,
        driver_exit_code=details.get("driver_exit_code"),
        start_time=iso_time(details.get("start_time")),
        end_time=iso_time(details.get("end_time")),
        duration_s=job_duration_s(details.get("start_time"), details.get("end_time"), now_s),
        metadata=details.get("metadata") or None,
        runtime_env=details.get("runtime_env") or None,
        driver_node_id=details.get("driver_node_id") or None,
    )


def job_list(
    jobs: Sequence[Mapping[str, Any]],
    *,
    statuses: Iterable[str] | None,
    entrypoint_contains: str | None,
    limit: int,
    now_s: float,
) -> models.JobList:
    """Newest first, filtered by status and an entrypoint substring, cut to ``limit``."""
    wanted = {s.upper() for s in statuses or []}
    needle = (entrypoint_contains or "").lower()
    matching = [
        j
        for j in jobs
        if (not wanted or str(j.get("status")) in wanted) and needle in str(j.get("entrypoint") or "").lower()
    ]
    matching.sort(key=lambda j: int(j.get("start_time") or 0), reverse=True)
    shown = [
        models.JobSummary(
            submission_id=j.get("submission_id"),
            job_id=j.get("job_id"),
            type=str(j.get("type") or "SUBMISSION").upper(),
            status=str(j.get("status")),
            entrypoint=truncate_text(str(j.get("entrypoint") or ""), 200),
            start_time=iso_time(j.get("start_time")),
            duration_s=job_duration_s(j.get("start_time"), j.get("end_time"), now_s),
            error_type=j.get("error_type") or None,
        )
        for j in matching[:limit]
    ]
    hints = []
    if len(shown) < len(matching):
        hints.append(
            f"{len(matching) - len(shown)} older matching jobs not shown; raise limit or filter by status "
            "or entrypoint_contains."
        )
    return models.JobList(jobs=shown, total=len(jobs), matching=len(matching), shown=len(shown), hints=hints)


def truncate_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_job(job: models.JobInfo) -> str:
    ids = job.submission_id or job.job_id or "?"
    if job.submission_id and job.job_id:
        ids += f" (job id {job.job_id})"
    lines = [f"Job {ids}: {job.status}" + (f" — {job.message}" if job.message else "")]
    if job.error_type or job.driver_exit_code is not None:
        lines.append(f"error_type: {job.error_type or 'none'}; driver exit code: {job.driver_exit_code}")
    lines.append(f"entrypoint: {truncate_text(job.entrypoint, 500)}")
    when = f"started {job.start_time or 'not yet'}"
    if job.end_time:
        when += f", ended {job.end_time}"
    if job.duration_s is not None:
        when += f", duration {job.duration_s:g} s"
    lines.append(when)
    if job.metadata:
        lines.append(f"metadata: {truncate_text(json.dumps(job.metadata), 500)}")
    if job.runtime_env:
        lines.append(f"runtime_env: {truncate_text(json.dumps(job.runtime_env), 500)}")
    if job.status == "FAILED":
        lines.append(f"Hint: tail_logs with job={job.submission_id or ids!r} shows the driver's traceback.")
    return "\n".join(lines)


def render_job_list(result: models.JobList) -> str:
    lines = [
        f"Jobs: {result.shown} shown of {result.matching} matching ({result.total} in the cluster), "
        "newest first."
    ]
    for j in result.jobs:
        ident = j.submission_id or j.job_id or "?"
        extra = f" {j.error_type}" if j.error_type else ""
        dur = f" {j.duration_s:g}s" if j.duration_s is not None else ""
        lines.append(f"  {ident} {j.status}{extra} started {j.start_time or '-'}{dur}: {j.entrypoint}")
    lines += [f"Hint: {h}" for h in result.hints]
    return "\n".join(lines)


def render_wait(result: models.JobWait) -> str:
    job = result.job
    ident = job.submission_id or job.job_id
    if result.finished:
        head = f"Job {ident} finished after waiting {result.waited_s:g} s."
    else:
        head = f"Timed out after {result.waited_s:g} s: job {ident} is still {job.status} (not an error)."
    lines = [head, render_job(job)]
    if result.last_log_line:
        lines.append(f"Last log line: {result.last_log_line}")
    lines += [f"Hint: {h}" for h in result.hints]
    return "\n".join(lines)


# -- logs ---------------------------------------------------------------------------------------------------


def cut_to_budget(raw_lines: list[str], *, max_bytes: int) -> tuple[list[str], int, int]:
    """Keep the newest lines that fit ``max_bytes`` (UTF-8, newline included).

    A single line longer than the whole budget is cut to fit, keeping its start, and counted as truncated.
    Returns (lines kept, bytes left out, lines truncated).
    """
    kept: list[str] = []
    used = 0
    left_out = 0
    truncated = 0
    for index in range(len(raw_lines) - 1, -1, -1):
        text = raw_lines[index]
        size = len(text.encode()) + 1
        if used + size <= max_bytes:
            kept.append(text)
            used += size
            continue
        if not kept:  # the newest line alone is over budget: show its start
            room = max(0, max_bytes - 40)
            head = text.encode()[:room].decode("utf-8", errors="ignore")
            cut = size - 1 - len(head.encode())
            kept.append(f"{head}…[{cut} bytes cut]")
            left_out += cut
            truncated += 1
            used = max_bytes
            continue
        left_out += sum(len(t.encode()) + 1 for t in raw_lines[: index + 1])
        break
    kept.reverse()
    return kept, left_out, truncated


def count_lines(data: bytes) -> int:
    """Lines in ``data``, counting a last line without a newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def tail_section(
    data: bytes,
    *,
    lines: int,
    max_bytes: int,
    complete: bool,
    dropped: int = 0,
    base: models.LogSection,
    followed_s: float | None = None,
) -> models.LogSection:
    """Shape the end of a log into a section within the line and byte budgets, keeping the newest lines.

    ``complete`` says ``data`` starts at the beginning of the file (so counts are exact); ``dropped`` is how
    many bytes before ``data`` were read and thrown away (its first line is then partial and is dropped too).
    """
    raw = decode_log(data).split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    if dropped and raw:
        dropped += len(raw.pop(0).encode()) + 1
    fetched = len(raw)
    if len(raw) > lines:
        dropped += sum(len(t.encode()) + 1 for t in raw[:-lines])
        raw = raw[-lines:]
    kept, cut, truncated = cut_to_budget(raw, max_bytes=max_bytes)
    left_lines = fetched - len(kept)
    return base.model_copy(
        update={
            "lines": kept,
            "lines_shown": len(kept),
            "lines_left_out": left_lines if complete else None,
            "more_before": left_lines > 0 or not complete,
            "bytes_left_out": cut + dropped,
            "truncated_lines": truncated,
            "followed_s": followed_s,
        }
    )


def log_target_kind(
    *,
    job: str | None,
    actor_id: str | None,
    task_id: str | None,
    pid: int | None,
    node: str | None,
    filename: str | None,
) -> str:
    """Which log the caller means; InvalidArgument unless exactly one target is given (+ node if needed)."""
    given = [
        name
        for name, value in (("job", job), ("actor_id", actor_id), ("task_id", task_id), ("pid", pid),
                            ("filename", filename))
        if value is not None
    ]  # fmt: skip
    usage = (
        "Give exactly one of: job (a submission id), actor_id, task_id (+ attempt), pid + node, or "
        "node + filename (e.g. raylet.out, gcs_server.out, dashboard.log)."
    )
    if len(given) != 1:
        what = ", ".join(given) if given else "none"
        raise InvalidArgument(f"tail_logs needs one log target, got {what}. {usage}")
    kind = given[0]
    if kind in ("pid", "filename") and not node:
        raise InvalidArgument(
            f"{kind} needs node (a node id or IP) too. Call cluster_status to see the nodes. {usage}"
        )
    if kind not in ("pid", "filename") and node:
        raise InvalidArgument(f"node goes with pid or filename only, not with {kind}. {usage}")
    return kind


def decode_log(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class GrepScanner:
    """Scan a log streamed in chunks for a regex, keeping the last ``keep`` output lines (matches + context).

    Chunks without a match are skipped with one regex search and a newline count, so a large log is scanned
    at close to the speed it arrives.
    """

    def __init__(self, pattern: re.Pattern[str], *, context: int, keep: int) -> None:
        self.pattern = pattern
        self.context = context
        self.out: deque[tuple[int, str, bool]] = deque(maxlen=keep)
        self.before: deque[tuple[int, str]] = deque(maxlen=context or 1)
        self.after = 0
        self.line_no = 0
        self.matches = 0
        self.first_match: int | None = None
        self.bytes = 0
        self._partial = b""
        self._last_out = 0  # the last line number put in ``out``

    def feed(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            return
        self._partial = data[cut + 1 :]
        self._scan(decode_log(data[: cut + 1]))

    def finish(self) -> None:
        if self._partial:
            self._scan(decode_log(self._partial) + "\n")
            self._partial = b""

    def _scan(self, text: str) -> None:
        if self.after == 0 and not self.pattern.search(text):
            count = text.count("\n")
            if self.context:
                tail = text[:-1].rsplit("\n", self.context)[-self.context :]
                start = self.line_no + count - len(tail) + 1
                self.before.extend(zip(range(start, start + len(tail)), tail, strict=True))
            self.line_no += count
            return
        for line in text[:-1].split("\n"):
            self.line_no += 1
            if self.pattern.search(line):
                self.matches += 1
                if self.first_match is None:
                    self.first_match = self.line_no
                if self.context:
                    for number, before in self.before:
                        if number > self._last_out:
                            self._emit(number, before, False)
                self._emit(self.line_no, line, True)
                self.after = self.context
            elif self.after:
                self.after -= 1
                self._emit(self.line_no, line, False)
            if self.context:
                self.before.append((self.line_no, line))

    def _emit(self, number: int, line: str, is_match: bool) -> None:
        self.out.append((number, line, is_match))
        self._last_out = number


def grep_section(
    scanner: GrepScanner, *, max_bytes: int, complete: bool, grep: str, base: models.LogSection
) -> models.LogSection:
    entries = list(scanner.out)
    kept, _cut, truncated = cut_to_budget([t for _, t, _ in entries], max_bytes=max_bytes)
    offset = len(entries) - len(kept)
    numbers = [number for number, _, _ in entries[offset:]]
    return base.model_copy(
        update={
            "lines": kept,
            "line_numbers": numbers,
            "match_numbers": [number for number, _, is_match in entries[offset:] if is_match],
            "lines_shown": len(kept),
            "lines_left_out": scanner.line_no - len(kept),
            "more_before": bool(numbers) and numbers[0] > 1,
            "bytes_left_out": max(0, scanner.bytes - sum(len(x.encode()) + 1 for x in kept)),
            "truncated_lines": truncated,
            "grep": grep,
            "matches": scanner.matches,
            "scanned_bytes": scanner.bytes,
            "scanned_lines": scanner.line_no,
            "scan_complete": complete,
        }
    )


def format_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    if n < GIB:
        return f"{n / 1024**2:.1f} MiB"
    return f"{n / GIB:.2f} GiB"


def render_log_section(section: models.LogSection) -> str:
    where = f"{section.filename or '?'} on node {section.node_id or '?'}"
    head = f"== {section.source}: {where}"
    if section.grep is not None:
        scope = "whole file" if section.scan_complete else "stopped at max_scan_mb, the rest was not searched"
        head += (
            f"\ngrep /{section.grep}/: {section.matches} matching line(s) in {section.scanned_lines} lines "
            f"({format_bytes(section.scanned_bytes or 0)} scanned, {scope})"
            + (f"; showing the last {section.lines_shown} output lines" if section.lines_shown else "")
        )
    else:
        head += f"\nlast {section.lines_shown} line(s)"
    left = []
    if section.grep is None:
        if section.lines_left_out is None and section.more_before:
            left.append("earlier lines left out (not counted: the tail is read from the end of the file)")
        elif section.lines_left_out:
            left.append(f"{section.lines_left_out} earlier line(s) left out")
        elif not section.more_before:
            left.append("this is the whole file")
    elif section.lines_left_out:
        left.append(f"{section.lines_left_out} line(s) not shown")
    if section.bytes_left_out:
        left.append(f"{format_bytes(section.bytes_left_out)} not shown")
    if section.truncated_lines:
        left.append(f"{section.truncated_lines} over-long line(s) cut")
    if section.followed_s is not None:
        left.append(f"followed {section.followed_s:g} s: {section.new_lines} new line(s)")
    if left:
        head += " — " + "; ".join(left)
    body = list(section.lines)
    if section.line_numbers is not None:
        matches = set(section.match_numbers or [])
        numbered = zip(section.line_numbers, body, strict=True)
        body = [f"{n}{':' if n in matches else '-'} {t}" for n, t in numbered]
    return head + ":\n" + ("\n".join(body) if body else "(no lines)")


def render_log_tail(tail: models.LogTail) -> str:
    parts = [render_log_section(s) for s in tail.sections]
    parts += [f"Hint: {h}" for h in tail.hints]
    return "\n".join(parts)


def log_hints(sections: list[models.LogSection], *, lines: int, max_bytes: int, max_lines: int) -> list[str]:
    hints = []
    budget_cut = [s for s in sections if s.grep is None and s.more_before and s.lines_shown < lines]
    if budget_cut or any(s.truncated_lines for s in sections):
        hints.append(f"The {max_bytes}-byte budget cut lines: raise max_bytes, or narrow with grep.")
    elif any(s.more_before and s.grep is None for s in sections) and lines < max_lines:
        hints.append(f"For more, raise lines (max {max_lines}) or search the whole file with grep.")
    if any(s.grep is not None and s.scan_complete is False for s in sections):
        hints.append(
            "grep stopped at max_scan_mb before the end of the file: raise max_scan_mb to search it all."
        )
    if any(s.grep is not None and (s.matches or 0) > s.lines_shown for s in sections):
        hints.append("More matches than shown: only the last ones are kept; make the regex more specific.")
    return hints


# -- cluster state: actors, placement groups, nodes, tasks, serve ----------------------------------------------
# Every list answer stays under RESPONSE_BUDGET_BYTES (text and structured content each): exact totals come from
# Ray, the items are capped by ``limit`` and then by LIST_BUDGET_BYTES, and a hint says how to narrow the list.

RESPONSE_BUDGET_BYTES = 8 * 1024
LIST_BUDGET_BYTES = 5 * 1024
MAX_LIMIT = 1000
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXCEPTION_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Died)\w*): ?(.*)$"
)

CARETS = re.compile(r"\s*[\^~]+\s*")
ACTOR_STATES = ("DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD")
TASK_STATES_FAILED = "FAILED"


def clamp_limit(limit: int, *, maximum: int = MAX_LIMIT, what: str = "items") -> tuple[int, str | None]:
    """Clamp a caller's ``limit`` to [0, maximum]; 0 means "counts only". Returns the limit and a note, if any."""
    if limit > maximum:
        return (
            maximum,
            f"limit={limit:,} was clamped to {maximum:,}; narrow with filters to see other {what}.",
        )
    if limit == 0:
        return 0, f"limit=0: counts only, no {what} listed."
    return limit, None


def clean_text(text: str | None) -> str:
    return ANSI.sub("", text or "").strip()


def tail_text(text: str | None, max_chars: int) -> str | None:
    """The end of a long text (tracebacks end with what matters), marked when cut."""
    text = "\n".join(ln for ln in clean_text(text).splitlines() if ln.strip() and not CARETS.fullmatch(ln))
    if not text:
        return None
    if len(text) <= max_chars:
        return text
    return "…" + text[-(max_chars - 1) :]


def head_text(text: str | None, max_chars: int) -> str | None:
    text = re.sub(r"\s+", " ", clean_text(text))
    if not text:
        return None
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def exception_summary(text: str | None) -> tuple[str | None, str | None]:
    """The exception class and message from a Python traceback: its last ``SomeError: message`` line."""
    for line in reversed(clean_text(text).splitlines()):
        match = EXCEPTION_LINE.match(line.strip() if line.startswith(("ray.", "builtins.")) else line)
        if match:
            return match.group(1).rsplit(".", 1)[-1], match.group(2).strip() or None
    return None, None


def user_traceback(text: str | None) -> str:
    """Ray wraps the user's exception in its own; keep the user's part (before "During handling ...")."""
    text = clean_text(text).split("During handling of the above exception", 1)[0]
    # Python's ^^^^ markers under each frame cost bytes and tell an agent nothing.
    return "\n".join(line for line in text.splitlines() if not CARETS.fullmatch(line)).strip()


def death_cause(raw: Mapping[str, Any] | None, *, exception_chars: int) -> models.DeathCause | None:
    """Flatten Ray's ``death_cause`` (one ``*_context`` key) into reason, error type, message and exception."""
    if not raw:
        return None
    if ctx := raw.get("creation_task_failure_context"):
        traceback = user_traceback(ctx.get("formatted_exception_string"))
        error_type, message = exception_summary(traceback)
        return models.DeathCause(
            reason="CREATION_TASK_ERROR",
            error_type=error_type,
            message=head_text(message, 500),
            exception=tail_text(traceback, exception_chars),
        )
    for key, ctx in raw.items():
        if not isinstance(ctx, Mapping):
            continue
        reason = ctx.get("reason") or key.removesuffix("_context").upper()
        message = ctx.get("error_message") or ctx.get("message")
        error_type, _ = exception_summary(message)
        return models.DeathCause(
            reason=str(reason),
            error_type=error_type,
            message=head_text(message, max(200, exception_chars)),
        )
    return None


ACTOR_FIELD_CHARS = 800


def actor_from_state(raw: Mapping[str, Any], *, detail: bool) -> models.Actor:
    """One row of /api/v0/actors (detail=1) as an Actor: basic fields, plus the rest when ``detail``."""
    state = str(raw.get("state", ""))
    actor = models.Actor(
        actor_id=str(raw.get("actor_id", "")),
        class_name=str(raw.get("class_name", "")),
        state=state,
        name=raw.get("name") or None,
        pid=to_number(raw.get("pid")) or None,
        node_id=raw.get("node_id") or None,
        restarts=to_number(raw.get("num_restarts")),
        death_cause=death_cause(raw.get("death_cause"), exception_chars=2000 if detail else 300)
        if state == "DEAD"
        else None,
    )
    if detail:
        actor.job_id = raw.get("job_id") or None
        actor.namespace = raw.get("ray_namespace") or None
        actor.is_detached = raw.get("is_detached")
        actor.placement_group_id = raw.get("placement_group_id") or None
        actor.repr_name = raw.get("repr_name") or None
        actor.required_resources = {
            k: float(v) for k, v in (raw.get("required_resources") or {}).items()
        } or None
        env = raw.get("serialized_runtime_env")
        # Bounded so that get_actor, a follow-up of every diagnosis, stays under 6 KB.
        actor.runtime_env = env if env and env != "{}" else None  # whole: a cut could split a secret
        actor.call_site = tail_text(raw.get("call_site"), ACTOR_FIELD_CHARS) or None
        actor.label_selector = dict(raw.get("label_selector") or {}) or None
    return actor


def fit_budget(items: list[BaseModel], budget: int = LIST_BUDGET_BYTES) -> int:
    """How many of ``items`` (in order) fit in ``budget`` bytes of JSON (at least one, if there is one)."""
    used = 0
    for n, item in enumerate(items):
        used += len(item.model_dump_json(exclude_none=True)) + 1
        if used > budget and n > 0:
            return n
    return len(items)


def cap_items(items: list[Any], limit: int, matched: int, notes: list[str], what: str) -> list[Any]:
    """Keep what fits in the byte budget; note how many more the limit asked for."""
    items = items[:limit]
    keep = fit_budget(items)
    if keep < len(items):
        notes.append(
            f"Showing {keep} of the {len(items)} {what} requested, to keep the answer under "
            f"{RESPONSE_BUDGET_BYTES // 1024} KB; narrow with filters (or use detail=false)."
        )
    return items[:keep]


def narrowing_hint(remaining: int, by: Mapping[str, int], noun: str, filters: str) -> str | None:
    """'1,942 more DEAD actors; filter by class_name or job_id' (names the biggest group left)."""
    if remaining <= 0:
        return None
    if by:
        top, count = max(by.items(), key=lambda kv: kv[1])
        return (
            f"{remaining:,} more {noun} not shown (the largest group: {count:,} {top}); filter by {filters}."
        )
    return f"{remaining:,} more {noun} not shown; filter by {filters}."


def actor_summary_from_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The State API's actor summary (``{"summary": {class: {"state_counts": {...}}}}``), counted from rows:
    exact when the rows are every matching actor, which spares the summary request."""
    summary: dict[str, dict[str, dict[str, int]]] = {}
    for row in rows:
        counts = summary.setdefault(str(row.get("class_name") or ""), {"state_counts": {}})["state_counts"]
        state = str(row.get("state") or "UNKNOWN")
        counts[state] = counts.get(state, 0) + 1
    return {"summary": summary}


def build_actor_list(
    *,
    total: int,
    matched: int,
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None,
    limit: int,
    detail: bool,
    notes: list[str],
) -> models.ActorList:
    by_state: dict[str, int] = {}
    by_class: dict[str, int] = {}
    for cls, entry in ((summary or {}).get("summary") or {}).items():
        for state, count in (entry.get("state_counts") or {}).items():
            by_state[state] = by_state.get(state, 0) + int(count)
            by_class[f"{cls} {state}"] = by_class.get(f"{cls} {state}", 0) + int(count)
    actors = [actor_from_state(row, detail=detail) for row in rows]
    # Alive and failing actors first: they are what an agent usually looks for.
    order = {
        s: i
        for i, s in enumerate(("ALIVE", "RESTARTING", "PENDING_CREATION", "DEPENDENCIES_UNREADY", "DEAD"))
    }
    actors.sort(key=lambda a: (order.get(a.state, 9), a.class_name, a.actor_id))
    shown = cap_items(actors, limit, matched, notes, "actors")
    hints = []
    hint = narrowing_hint(matched - len(shown), by_class, "actors", "state, class_name, job_id or name")
    if hint:
        hints.append(hint)
    if shown and not detail:
        hints.append("get_actor(actor_id) shows one actor in full (resources, namespace, full death cause).")
    return models.ActorList(
        total=total,
        matched=matched,
        shown=len(shown),
        by_state=dict(sorted(by_state.items())),
        actors=shown,
        notes=notes,
        hints=hints,
    )


def _actor_line(a: models.Actor) -> str:
    parts = [a.actor_id, a.class_name]
    if a.name:
        parts.append(f"name={a.name}")
    parts.append(a.state)
    if a.pid:
        parts.append(f"pid={a.pid}")
    if a.node_id:
        parts.append(f"node={a.node_id}")
    if a.restarts:
        parts.append(f"restarts={a.restarts}")
    line = "  " + " ".join(parts)
    if a.death_cause:
        d = a.death_cause
        cause = f"{d.error_type}: {d.message}" if d.error_type else (d.message or "")
        line += f"\n    died: {d.reason}" + (f" — {head_text(cause, 300)}" if cause else "")
    return line


def render_actor_list(page: models.ActorList) -> str:
    counts = ", ".join(f"{n:,} {s}" for s, n in page.by_state.items()) or "none"
    lines = [
        f"Actors: {page.matched:,} match of {page.total:,} in the cluster ({counts}); showing {page.shown}."
    ]
    lines += [_actor_line(a) for a in page.actors]
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


def render_actor(actor: models.Actor) -> str:
    lines = [_actor_line(actor).strip().split("\n")[0]]
    for key in ("job_id", "namespace", "is_detached", "placement_group_id", "repr_name", "call_site"):
        value = getattr(actor, key)
        if value not in (None, ""):
            lines.append(f"{key}: {value}")
    if actor.required_resources:
        lines.append(f"required_resources: {format_shape(actor.required_resources)}")
    if actor.runtime_env:
        lines.append(f"runtime_env: {head_text(actor.runtime_env, 500)}")
    if actor.death_cause:
        d = actor.death_cause
        lines.append(f"death cause: {d.reason}" + (f" ({d.error_type})" if d.error_type else ""))
        if d.message:
            lines.append(f"message: {d.message}")
        if d.exception:
            lines.append("exception:\n" + d.exception)
    return "\n".join(lines)


# -- placement groups ---------------------------------------------------------------------------------------


class NodeCapacity(BaseModel):
    node_id: str
    total: dict[str, float]
    available: dict[str, float]


def _plural(name: str, amount: float) -> str:
    if name in BYTE_RESOURCES:
        return f"{format_amount(name, amount)} of {name}"
    return f"{amount:g} {name}{'s' if name.isupper() and amount != 1 else ''}"


def _merge(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    merged: dict[str, float] = {}
    for bundle in bundles:
        for name, amount in bundle.items():
            merged[name] = merged.get(name, 0.0) + float(amount)
    return merged


def _missing(bundle: Mapping[str, float], nodes: Sequence[Mapping[str, float]]) -> tuple[str, float] | None:
    """The first resource of ``bundle`` that no node has enough of, with the largest amount any node has."""
    if any(fits(bundle, node) for node in nodes):
        return None
    for name, amount in bundle.items():
        best = max((float(node.get(name, 0.0)) for node in nodes), default=0.0)
        if float(amount) > best + 1e-9:
            return name, best
    # Each resource fits somewhere, but no single node has them all.
    return "", 0.0


def _no_node_text(label: str, bundle: Mapping[str, float], missing: tuple[str, float], free: bool) -> str:
    name, best = missing
    what = "free now" if free else ""
    if not name:
        return f"{label} wants {format_shape(bundle)} and no node has all of it {what}".rstrip()
    if best <= 0:
        return f"{label} wants {format_shape(bundle)} and no node has any {name} {what}".rstrip()
    more = f"more than {_plural(name, best)}" + (" free" if free else "")
    return f"{label} wants {format_shape(bundle)} and no node has {more}"


def explain_pending_pg(
    bundles: Sequence[Mapping[str, float]],
    strategy: str | None,
    scheduling_state: str | None,
    nodes: list[NodeCapacity],
) -> tuple[str, bool]:
    """Why a PENDING placement group waits: the failing constraint, and whether it can ever be placed."""
    ray_says = f" (Ray's scheduling state: {scheduling_state})" if scheduling_state else ""
    if not nodes:
        return "no node is alive to hold it" + ray_says, True
    totals = [n.total for n in nodes]
    frees = [n.available for n in nodes]
    # 1. Can it ever fit, by node totals?
    for i, bundle in enumerate(bundles):
        missing = _missing(bundle, totals)
        if missing:
            return _no_node_text(f"bundle {i}", bundle, missing, free=False) + ray_says, True
    if strategy == "STRICT_SPREAD" and len(bundles) > len(nodes):
        return (
            f"STRICT_SPREAD puts each of its {len(bundles)} bundles on a different node and only "
            f"{len(nodes)} node(s) are alive" + ray_says,
            True,
        )
    if strategy == "STRICT_PACK":
        merged = _merge(bundles)
        missing = _missing(merged, totals)
        if missing:
            return (
                _no_node_text(
                    f"STRICT_PACK puts all {len(bundles)} bundles on one node:", merged, missing, free=False
                )
                + ray_says,
                True,
            )
    # 2. It fits the cluster's shape; what is in use now?
    if strategy == "STRICT_PACK":
        merged = _merge(bundles)
        missing = _missing(merged, frees)
        if missing:
            return (
                _no_node_text(
                    f"STRICT_PACK (all {len(bundles)} bundles on one node):", merged, missing, free=True
                )
                + "; it waits for resources held by other tasks, actors or placement groups"
                + ray_says,
                False,
            )
    elif strategy == "STRICT_SPREAD":
        for i, bundle in enumerate(bundles):
            room = sum(1 for free in frees if fits(bundle, free))
            if room < len(bundles):
                return (
                    f"STRICT_SPREAD needs {len(bundles)} nodes with {format_shape(bundle)} free (bundle {i}) and "
                    f"only {room} have it now; it waits for resources held by others" + ray_says,
                    False,
                )
    else:
        for i, bundle in enumerate(bundles):
            missing = _missing(bundle, frees)
            if missing:
                return (
                    _no_node_text(f"bundle {i}", bundle, missing, free=True)
                    + "; it waits for resources held by other tasks, actors or placement groups"
                    + ray_says,
                    False,
                )
        need = _merge(bundles)
        have = _merge(frees)
        for name, amount in need.items():
            if amount > have.get(name, 0.0) + 1e-9:
                return (
                    f"its bundles want {_plural(name, amount)} in all and the cluster has "
                    f"{_plural(name, have.get(name, 0.0))} free; it waits for resources held by others"
                    + ray_says,
                    False,
                )
    if scheduling_state == "INFEASIBLE":
        return (
            "Ray marks it INFEASIBLE though its resources fit a node: check its bundles' label selectors "
            "and the nodes' labels (list_nodes)",
            True,
        )
    return "it fits the free resources now; Ray has not placed it yet" + ray_says, False


def placement_group_from_state(
    raw: Mapping[str, Any], *, strategy: str | None, nodes: list[NodeCapacity]
) -> models.PlacementGroup:
    stats = raw.get("stats") or {}
    bundles = []
    for i, b in enumerate(raw.get("bundles") or []):
        index = to_number((b.get("bundle_id") or {}).get("bundle_index", i))
        resources = {str(k): float(v) for k, v in (b.get("unit_resources") or {}).items()}
        bundles.append(models.Bundle(index=int(index), resources=resources, node_id=b.get("node_id") or None))
    pg = models.PlacementGroup(
        placement_group_id=str(raw.get("placement_group_id", "")),
        name=raw.get("name") or None,
        state=str(raw.get("state", "")),
        strategy=strategy,
        creator_job_id=raw.get("creator_job_id") or None,
        is_detached=raw.get("is_detached"),
        scheduling_state=stats.get("scheduling_state") or None,
        bundles=bundles,
    )
    if pg.state == "PENDING":
        why, infeasible = explain_pending_pg(
            [b.resources for b in bundles], strategy, pg.scheduling_state, nodes
        )
        if strategy is None:
            why += " (its strategy is unknown: the GCS was not reachable)"
        pg.why_pending, pg.infeasible = why, infeasible
    return pg


def pg_state_counts(
    table: Sequence[Mapping[str, str]], filters: Sequence[tuple[str, str, str]]
) -> dict[str, int]:
    """Count the GCS's placement group rows per state, keeping those that pass the State API style ``=``
    filters (placement_group_id, name, state, creator_job_id)."""
    counts: dict[str, int] = {}
    for row in table:
        if all(str(row.get(key, "")) == value for key, _predicate, value in filters):
            counts[row["state"]] = counts.get(row["state"], 0) + 1
    return counts


def build_pg_list(
    *,
    total: int,
    matched: int,
    groups: list[models.PlacementGroup],
    by_state: dict[str, int],
    limit: int,
    notes: list[str],
) -> models.PlacementGroupList:
    order = {"PENDING": 0, "RESCHEDULING": 1, "PREPARED": 2, "CREATED": 3, "REMOVED": 4}
    groups = sorted(groups, key=lambda g: (order.get(g.state, 9), g.name or "", g.placement_group_id))
    shown = cap_items(groups, limit, matched, notes, "placement groups")
    hints = []
    hint = narrowing_hint(matched - len(shown), by_state, "placement groups", "state, job_id or name")
    if hint:
        hints.append(hint)
    return models.PlacementGroupList(
        total=total,
        matched=matched,
        shown=len(shown),
        by_state=by_state,
        placement_groups=shown,
        notes=notes,
        hints=hints,
    )


def render_pg_list(page: models.PlacementGroupList) -> str:
    counts = ", ".join(f"{n:,} {s}" for s, n in page.by_state.items()) or "none"
    lines = [f"Placement groups: {page.matched:,} match of {page.total:,} ({counts}); showing {page.shown}."]
    for g in page.placement_groups:
        head = f"  {g.placement_group_id}" + (f" name={g.name}" if g.name else "") + f" {g.state}"
        head += f" {g.strategy or 'strategy?'}" + (f" job={g.creator_job_id}" if g.creator_job_id else "")
        head += " detached" if g.is_detached else ""
        lines.append(head)
        placed = [
            f"{b.index}:{format_shape(b.resources)}@{b.node_id}"
            if b.node_id
            else f"{b.index}:{format_shape(b.resources)}"
            for b in g.bundles
        ]
        if placed:
            lines.append(
                "    bundles "
                + "; ".join(placed[:8])
                + (f"; … {len(placed) - 8} more" if len(placed) > 8 else "")
            )
        if g.why_pending:
            verdict = "INFEASIBLE" if g.infeasible else "waiting"
            lines.append(f"    why pending ({verdict}): {g.why_pending}")
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


# -- nodes --------------------------------------------------------------------------------------------------


def node_capacities(
    nodes: Sequence[Mapping[str, Any]], usage_by_node: Mapping[str, Mapping[str, tuple[float, float]]]
) -> list[NodeCapacity]:
    """Total and available resources of each ALIVE node (available = total - used from the autoscaler report)."""
    out = []
    for node in nodes:
        if node.get("state") != "ALIVE":
            continue
        node_id = str(node.get("node_id", ""))
        totals = {
            k: float(v) for k, v in (node.get("resources_total") or {}).items() if not is_internal_resource(k)
        }
        usage = usage_by_node.get(node_id, {})
        available = {k: max(0.0, v - usage.get(k, (0.0, v))[0]) for k, v in totals.items()}
        out.append(NodeCapacity(node_id=node_id, total=totals, available=available))
    return out


def build_node_list(
    *, rows: Sequence[Mapping[str, Any]], capacities: list[NodeCapacity], limit: int, notes: list[str]
) -> models.NodeList:
    by_id = {c.node_id: c for c in capacities}
    nodes = []
    for row in rows:
        alive = row.get("state") == "ALIVE"
        node_id = str(row.get("node_id", ""))
        cap = by_id.get(node_id)
        totals = {
            k: float(v) for k, v in (row.get("resources_total") or {}).items() if not is_internal_resource(k)
        }
        nodes.append(
            models.Node(
                **node_identity(row),
                name=row.get("node_name") if row.get("node_name") != row.get("node_ip") else None,
                resources_total=dict(sorted(totals.items())),
                resources_available=dict(sorted(cap.available.items())) if cap and alive else {},
                labels={
                    str(k): str(v) for k, v in (row.get("labels") or {}).items() if k != "ray.io/node-id"
                },
            )
        )
    nodes.sort(key=lambda n: (not n.is_head, n.state != "ALIVE", n.ip, n.node_id))
    alive = sum(1 for n in nodes if n.state == "ALIVE")
    shown = cap_items(nodes, limit, len(nodes), notes, "nodes")
    hints = []
    if len(shown) < len(nodes):
        hints.append(f"{len(nodes) - len(shown):,} more nodes not shown; filter by state (ALIVE or DEAD).")
    return models.NodeList(
        total=len(nodes), matched=len(nodes), shown=len(shown), alive=alive, dead=len(nodes) - alive,
        nodes=shown, notes=notes, hints=hints,
    )  # fmt: skip


def render_node_list(page: models.NodeList) -> str:
    lines = [f"Nodes: {page.alive} alive, {page.dead} dead; showing {page.shown}."]
    for n in page.nodes:
        role = "head" if n.is_head else "worker"
        line = f"  {n.node_id} {n.ip} {role} {n.state}"
        if n.state == "ALIVE":
            res = ", ".join(
                f"{k} {format_amount(k, n.resources_available.get(k, 0.0))}/{format_amount(k, v)} free"
                for k, v in n.resources_total.items()
            )
            line += f" {res}"
        else:
            line += f": {n.death_reason}"
        if n.labels:
            line += " labels " + json.dumps(n.labels)
        lines.append(line)
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


# -- tasks --------------------------------------------------------------------------------------------------


def task_error_message(message: str | None, max_chars: int = 400) -> str | None:
    """A task's error in a few lines: the exception line first, then the end of the traceback."""
    text = clean_text(message)
    if not text:
        return None
    error_type, summary = exception_summary(text)
    tail = tail_text(text, max_chars) or ""
    if error_type:
        first = head_text(f"{error_type}: {summary or ''}", max_chars // 3) or ""
        return first + "\n" + (tail_text(text, max_chars - len(first)) or "")
    return tail


def task_from_state(raw: Mapping[str, Any]) -> models.Task:
    return models.Task(
        task_id=str(raw.get("task_id", "")),
        name=str(raw.get("name", "")),
        state=str(raw.get("state", "")),
        attempt=to_number(raw.get("attempt_number")) or None,
        type=raw.get("type") if raw.get("type") != "NORMAL_TASK" else None,
        job_id=raw.get("job_id") or None,
        actor_id=raw.get("actor_id") or None,
        node_id=raw.get("node_id") or None,
        worker_pid=to_number(raw.get("worker_pid")) or None,
        error_type=raw.get("error_type") or None,
        error_message=task_error_message(raw.get("error_message")),
    )


def build_task_list(
    *, total: int, matched: int, rows: Sequence[Mapping[str, Any]], limit: int, notes: list[str]
) -> models.TaskList:
    tasks = [task_from_state(r) for r in rows]
    shown = cap_items(tasks, limit, matched, notes, "tasks")
    hints = []
    if matched > len(shown):
        hints.append(
            f"{matched - len(shown):,} more tasks not shown; summarize_tasks counts them all by name and state, "
            "or filter by state, name, job_id, actor_id or error_type."
        )
    return models.TaskList(
        total=total, matched=matched, shown=len(shown), tasks=shown, notes=notes, hints=hints
    )


def render_task_list(page: models.TaskList) -> str:
    lines = [f"Tasks: {page.matched:,} match of {page.total:,} recorded; showing {page.shown}."]
    for t in page.tasks:
        parts = [t.task_id, t.name, t.state]
        parts += [f"attempt={t.attempt}"] if t.attempt else []
        parts += [f"actor={t.actor_id}"] if t.actor_id else []
        parts += [f"job={t.job_id}"] if t.job_id else []
        parts += [f"error={t.error_type}"] if t.error_type else []
        lines.append("  " + " ".join(parts))
        if t.error_message:
            lines.append("    " + (head_text(t.error_message.split("\n", 1)[0], 200) or ""))
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


MAX_TASK_GROUPS = 40


def build_task_summary(
    *,
    summary: Mapping[str, Any],
    failed_counts: Mapping[str, int],
    samples: Mapping[str, Mapping[str, Any]],
    notes: list[str],
) -> models.TaskSummary:
    cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster") or {}
    groups: list[models.TaskGroup] = []
    by_state: dict[str, int] = {}
    for name, entry in (cluster.get("summary") or {}).items():
        counts = {str(k): int(v) for k, v in (entry.get("state_counts") or {}).items()}
        for state, n in counts.items():
            by_state[state] = by_state.get(state, 0) + n
        groups.append(models.TaskGroup(name=str(name), type=entry.get("type"), state_counts=counts))
    # Groups with failures first, then the biggest.
    groups.sort(key=lambda g: (-g.state_counts.get("FAILED", 0), -sum(g.state_counts.values()), g.name))
    errors = []
    for error_type, count in sorted(failed_counts.items(), key=lambda kv: -kv[1]):
        sample = samples.get(error_type) or {}
        errors.append(
            models.ErrorGroup(
                error_type=error_type,
                count=count,
                sample_task_id=sample.get("task_id"),
                sample_name=sample.get("name"),
                sample_message=task_error_message(sample.get("error_message"), 600),
            )
        )
    hints = []
    if len(groups) > MAX_TASK_GROUPS:
        hints.append(f"{len(groups) - MAX_TASK_GROUPS} more task names not shown; filter by name or job_id.")
    if errors:
        hints.append("list_tasks(state='FAILED', error_type=...) lists the failed tasks of one error type.")
    total = int(summary.get("num_filtered") or sum(by_state.values()))
    return models.TaskSummary(
        total=total,
        by_state=dict(sorted(by_state.items())),
        groups=groups[:MAX_TASK_GROUPS],
        groups_total=len(groups),
        failed_by_error=errors,
        notes=notes,
        hints=hints,
    )


def render_task_summary(s: models.TaskSummary) -> str:
    counts = ", ".join(f"{n:,} {st}" for st, n in s.by_state.items()) or "none"
    lines = [f"Tasks: {s.total:,} ({counts}) in {s.groups_total} names."]
    for g in s.groups:
        c = ", ".join(f"{n:,} {st}" for st, n in sorted(g.state_counts.items()))
        lines.append(
            f"  {g.name}" + (f" [{g.type}]" if g.type and g.type != "NORMAL_TASK" else "") + f": {c}"
        )
    if s.failed_by_error:
        lines.append("Failed tasks by error type:")
        for e in s.failed_by_error:
            lines.append(
                f"  {e.error_type}: {e.count:,}"
                + (f" (e.g. {e.sample_name} {e.sample_task_id})" if e.sample_task_id else "")
            )
            if e.sample_message:
                lines.append("    " + (head_text(e.sample_message.split("\n", 1)[0], 300) or ""))
    lines += [f"Note: {n}" for n in s.notes] + [f"Hint: {h}" for h in s.hints]
    return "\n".join(lines)


# -- serve --------------------------------------------------------------------------------------------------

SERVE_FAILING = frozenset({"UNHEALTHY", "DEPLOY_FAILED"})
MAX_REPLICAS_PER_DEPLOYMENT = 10


def serve_is_running(details: Mapping[str, Any]) -> bool:
    """An empty ``controller_info`` is what the dashboard returns when Serve was never started (or shut down)."""
    return bool(details.get("controller_info")) or bool(details.get("applications"))


def _utc(ts: Any) -> str | None:
    import datetime

    try:
        value = float(ts)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    return datetime.datetime.fromtimestamp(value, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def serve_deployment(raw: Mapping[str, Any]) -> models.ServeDeployment:
    config = raw.get("deployment_config") or {}
    replicas = [
        models.ServeReplica(
            replica_id=r.get("replica_id"),
            state=str(r.get("state", "")),
            actor_name=r.get("actor_name"),
            actor_id=r.get("actor_id"),
            pid=to_number(r.get("pid")) or None,
            node_id=r.get("node_id") or None,
            node_ip=r.get("node_ip") or None,
        )
        for r in raw.get("replicas") or []
    ]
    # Replicas that are not RUNNING are the interesting ones.
    replicas.sort(key=lambda r: (r.state == "RUNNING", r.replica_id or ""))
    status = str(raw.get("status", ""))
    target = raw.get("target_num_replicas", config.get("num_replicas"))
    return models.ServeDeployment(
        name=str(raw.get("name", "")),
        status=status,
        status_trigger=raw.get("status_trigger") or None,
        message=head_text(raw.get("message"), 300) if status not in SERVE_FAILING else None,
        target_replicas=to_number(target) if target is not None else None,
        running_replicas=sum(1 for r in replicas if r.state == "RUNNING"),
        autoscaling_config={
            k: v for k, v in (config.get("autoscaling_config") or {}).items() if v is not None
        }
        or None,
        replicas=replicas[:MAX_REPLICAS_PER_DEPLOYMENT],
        replicas_total=len(replicas),
        error=tail_text(raw.get("message"), 1500) if status in SERVE_FAILING else None,
    )


def build_serve_status(details: Mapping[str, Any], *, app: str | None) -> models.ServeStatus:
    if not serve_is_running(details):
        return models.ServeStatus(
            running=False,
            notes=["Serve is not running on this cluster: no Serve controller, no applications."],
            hints=["serve_deploy starts Serve and deploys applications from a config."],
        )
    controller = details.get("controller_info") or {}
    http = details.get("http_options") or {}
    apps_raw = details.get("applications") or {}
    apps = []
    for name, raw in sorted(apps_raw.items()):
        if app is not None and name != app:
            continue
        deployments = [serve_deployment(d) for _n, d in sorted((raw.get("deployments") or {}).items())]
        config = raw.get("deployed_app_config") or {}
        status = str(raw.get("status", ""))
        apps.append(
            models.ServeApp(
                name=name,
                status=status,
                message=(tail_text if status in SERVE_FAILING else head_text)(raw.get("message"), 1500)
                or None,
                route_prefix=raw.get("route_prefix"),
                last_deployed=_utc(raw.get("last_deployed_time_s")),
                import_path=config.get("import_path"),
                deployments=deployments,
            )
        )
    hints = []
    if app is None and any(a.status != "RUNNING" for a in apps):
        hints.append("serve_status(app=...) focuses on one application.")
    return models.ServeStatus(
        running=True,
        controller_node_id=controller.get("node_id"),
        proxies={str(k): str((v or {}).get("status", "")) for k, v in (details.get("proxies") or {}).items()},
        http=f"{http.get('host')}:{http.get('port')}" if http.get("port") else None,
        apps_total=len(apps_raw),
        apps=apps,
        hints=hints,
    )


def failing_deployments(
    status: models.ServeStatus, limit: int = 3
) -> list[tuple[models.ServeApp, models.ServeDeployment]]:
    out = [(a, d) for a in status.apps for d in a.deployments if d.status in SERVE_FAILING]
    return out[:limit]


def render_serve_status(s: models.ServeStatus) -> str:
    if not s.running:
        return "\n".join([*s.notes, *(f"Hint: {h}" for h in s.hints)])
    lines = [
        f"Serve is running: {s.apps_total} application(s)" + (f"; HTTP on {s.http}" if s.http else "") + "."
    ]
    if s.proxies:
        lines.append("Proxies: " + ", ".join(f"{node} {st}" for node, st in s.proxies.items()))
    for a in s.apps:
        head = f"App {a.name!r}: {a.status}" + (f" route {a.route_prefix}" if a.route_prefix else "")
        head += f" import {a.import_path}" if a.import_path else ""
        head += f", last deployed {a.last_deployed}" if a.last_deployed else ""
        lines.append(head)
        if a.message and a.status not in SERVE_FAILING:
            lines.append(f"  message: {head_text(a.message, 300)}")
        for d in a.deployments:
            target = "?" if d.target_replicas is None else str(d.target_replicas)
            line = f"  deployment {d.name}: {d.status}" + (
                f" ({d.status_trigger})" if d.status_trigger else ""
            )
            line += f", replicas {d.running_replicas}/{target} running"
            if d.autoscaling_config:
                auto = {
                    k: d.autoscaling_config[k]
                    for k in ("min_replicas", "max_replicas")
                    if k in d.autoscaling_config
                }
                line += f", autoscaling {json.dumps(auto)}"
            lines.append(line)
            if d.message:
                lines.append(f"    message: {d.message}")
            for r in d.replicas:
                where = f" node={r.node_id}" if r.node_id else ""
                lines.append(f"    replica {r.replica_id} {r.state} actor={r.actor_name} pid={r.pid}{where}")
            if d.replicas_total > len(d.replicas):
                lines.append(f"    … {d.replicas_total - len(d.replicas)} more replicas")
            if d.error:
                lines.append("    error:\n      " + d.error.replace("\n", "\n      "))
            if d.log_tail:
                lines.append(f"    last log lines ({d.log_source}):")
                lines += [f"      {line}" for line in d.log_tail]
    lines += [f"Note: {n}" for n in s.notes] + [f"Hint: {h}" for h in s.hints]
    return "\n".join(lines)


def merge_serve_config(
    current_apps: Sequence[Mapping[str, Any]], new_config: Mapping[str, Any], *, replace: bool
) -> dict[str, Any]:
    """The full config to PUT: the apps already declared (unless ``replace``) with the new ones replacing
    those of the same name. The PUT replaces Serve's whole declared state, so leaving an app out deletes it."""
    new_apps = list(new_config.get("applications") or [])
    names = {a.get("name", "default") for a in new_apps}
    kept = [] if replace else [dict(a) for a in current_apps if a.get("name", "default") not in names]
    merged = {k: v for k, v in new_config.items() if k != "applications"}
    merged["applications"] = kept + new_apps
    return merged


def config_without_app(current_apps: Sequence[Mapping[str, Any]], app: str) -> dict[str, Any]:
    return {"applications": [dict(a) for a in current_apps if a.get("name", "default") != app]}


def declared_serve_apps(details: Mapping[str, Any], *, dropping: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The config each app was declared with (``deployed_app_config``), to re-send in a merged PUT.

    ``dropping`` names the apps the caller replaces or deletes (their config is not needed). Any other app
    without a config (deployed from Python with serve.run, or one Ray kept no config for) would be removed by
    the PUT, so refuse and say how to proceed.
    """
    out = []
    skip = set(dropping)
    for name, app in (details.get("applications") or {}).items():
        config = app.get("deployed_app_config")
        if name in skip or app.get("status") == "DELETING":  # a DELETING app is already out of the config
            continue
        if not config:
            how = (
                "was deployed from Python (serve.run)"
                if app.get("source") == "imperative"
                else "has no recorded config"
            )
            raise InvalidArgument(
                f"Serve application {name!r} {how}, so a config deploy would remove it; nothing was changed. "
                "Include it in the config, delete it first with serve_delete_app, or pass replace=true to replace "
                "every application on purpose."
            )
        out.append(dict(config))
    return out


def kill_preflight(actor: models.Actor, *, no_restart: bool, force: bool) -> str:
    """What kill_actor would do to this actor, or why it refuses (a detached actor needs force=true)."""
    who = (
        f"actor {actor.actor_id} ({actor.class_name}"
        + (f" {actor.name!r}" if actor.name else "")
        + (f", job {actor.job_id}" if actor.job_id else "")
        + f", {actor.state})"
    )
    if actor.state == "DEAD":
        return f"The {who} is already DEAD; nothing to kill."
    if actor.is_detached and not force:
        raise InvalidArgument(
            f"The {who} is detached: it outlives its job and others may rely on it. Nothing was changed. "
            "Call kill_actor again with force=true if you really mean to kill it."
        )
    after = (
        "and keep it dead (no_restart)" if no_restart else "and let Ray restart it if its max_restarts allows"
    )
    where = f" pid {actor.pid} on node {actor.node_id}" if actor.pid else ""
    return f"kill the {who}{where} {after}"


# -- diagnosis ------------------------------------------------------------------------------------------------


def _fit_findings(
    header: list[str], findings: list[models.Finding], max_bytes: int
) -> tuple[str, list[models.Finding]]:
    """Render the findings that fit in ``max_bytes`` of text; the structured answer carries the same ones."""
    from ray_mcp.diagnosis import render_findings

    text = render_findings(header, findings, max_bytes)
    shown = [f for i, f in enumerate(findings, 1) if f"\n{i}. {f.title}" in "\n" + text]
    return text, shown


def job_diagnosis(
    job: str, info: models.JobInfo, findings: list[models.Finding], notes: list[str], *, max_bytes: int
) -> tuple[models.JobDiagnosis, str]:
    verdict = findings[0].title if findings else "No finding."
    header = [
        f"Job {info.submission_id or job} ({info.job_id or 'no job id yet'}): {info.status}"
        + (f", error_type {info.error_type}" if info.error_type else "")
        + (f", driver exit code {info.driver_exit_code}" if info.driver_exit_code is not None else ""),
        f"Verdict: {verdict}",
        "",
    ]
    footer = [f"Note: {n}" for n in notes[:4]]
    text, shown = _fit_findings(header, findings, max_bytes - len("\n".join(footer).encode()) - 1)
    model = models.JobDiagnosis(
        job=job, submission_id=info.submission_id, job_id=info.job_id, status=info.status,
        error_type=info.error_type, driver_exit_code=info.driver_exit_code, verdict=verdict,
        findings=shown, notes=notes[:4],
    )  # fmt: skip
    return model, "\n".join([text, *footer]) if footer else text


def cluster_health(
    dashboard_url: str,
    findings: list[models.Finding],
    checked: list[str],
    notes: list[str],
    *,
    max_bytes: int,
) -> tuple[models.ClusterHealth, str]:
    serious = [f for f in findings if f.severity >= 40]
    healthy = not serious
    verdict = (
        "Healthy: nothing wrong found in " + ", ".join(checked) + "."
        if healthy
        else f"{len(serious)} problem(s); the most severe: {serious[0].title}"
    )
    header = [
        f"Cluster {dashboard_url}: {'HEALTHY' if healthy else 'PROBLEMS FOUND'}",
        f"Verdict: {verdict}",
        "",
    ]
    footer = [f"Note: {n}" for n in notes[:4]]
    text, shown = _fit_findings(header, findings, max_bytes - len("\n".join(footer).encode()) - 1)
    model = models.ClusterHealth(
        healthy=healthy,
        verdict=verdict,
        dashboard_url=dashboard_url,
        findings=shown,
        checked=checked,
        notes=notes[:4],
    )
    return model, "\n".join([text, *footer]) if footer else text
