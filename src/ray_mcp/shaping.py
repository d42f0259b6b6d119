"""Pure functions that shape what an agent sees: field choice, units, budgets, feasibility, results.

Nothing here talks to Ray or to MCP's transport; everything is unit-tested on plain data.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
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
    return datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc).isoformat(timespec="seconds")


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
