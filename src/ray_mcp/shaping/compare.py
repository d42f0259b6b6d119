"""compare_jobs, pure: two runs' records side by side, their differences weighed, the verdict and the text.

What explains the most, heaviest first: b failed where a did not; a function whose tasks failed more; a function
whose tasks got slower (by the share of the change in run time its summed task time accounts for); a changed
entrypoint, runtime_env (env_vars by name only: their values are secrets) or entrypoint resources; a function
called many more times; other nodes. The run time itself is the symptom, named with the verdict.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import byte_size, percent
from ray_mcp.limits import COMPARE_FUNCTIONS, FIELD_CHARS
from ray_mcp.text import quoted, truncate_text

Row = Mapping[str, Any]
RESOURCE_FIELDS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory")
SLOWER = 1.5  # a function's mean duration this many times a's is slower
MORE_CALLS = 1.5  # ... its count this many times a's (or fewer by the same factor) is a change


def final_attempts(tasks: Sequence[Row]) -> list[Row]:
    """Each task's last attempt (the State API lists one row per attempt)."""
    last: dict[str, Row] = {}
    for t in tasks:
        key = str(t.get("task_id"))
        if key not in last or int(t.get("attempt_number") or 0) >= int(last[key].get("attempt_number") or 0):
            last[key] = t
    return list(last.values())


def function_stats(tasks: Sequence[Row]) -> dict[str, models.FunctionStats]:
    """Per function (or actor method): tasks, failures and the durations Ray recorded (start to end)."""
    by: dict[str, list[Row]] = {}
    for t in final_attempts(tasks):
        if t.get("type") == "DRIVER_TASK":
            continue
        by.setdefault(str(t.get("func_or_class_name") or t.get("name") or "?"), []).append(t)
    out = {}
    for name, rows in by.items():
        took = [
            (float(t["end_time_ms"]) - float(t["start_time_ms"])) / 1000
            for t in rows
            if t.get("state") == "FINISHED" and t.get("start_time_ms") and t.get("end_time_ms")
        ]
        out[name] = models.FunctionStats(
            count=len(rows),
            failed=sum(1 for t in rows if t.get("state") == "FAILED"),
            mean_s=statistics.fmean(took) if took else None,
            p50_s=statistics.median(took) if took else None,
            total_s=sum(took),
        )
    return out


def side(
    job: str, details: Row, tasks: Sequence[Row], version: str | None, ips: Mapping[str, str], now_s: float
) -> models.RunSide:
    start, end = float(details.get("start_time") or 0) / 1000, float(details.get("end_time") or 0) / 1000
    nodes = {str(t.get("node_id")) for t in tasks if t.get("node_id")}
    nodes |= {str(details["driver_node_id"])} if details.get("driver_node_id") else set()
    resources = {k: float(details[k]) for k in RESOURCE_FIELDS if details.get(k) is not None}
    resources |= {k: float(v) for k, v in (details.get("entrypoint_resources") or {}).items()}
    final = final_attempts(tasks)
    return models.RunSide(
        job=job,
        submission_id=details.get("submission_id"),
        job_id=details.get("job_id"),
        status=str(details.get("status") or "UNKNOWN"),
        entrypoint=str(details.get("entrypoint") or ""),
        runtime_env=details.get("runtime_env") or None,
        resources=resources or None,
        start_time=datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if start else None,
        duration_s=round((end or now_s) - start, 3) if start else None,
        ray_version=version,
        nodes=sorted(ips.get(n, n) for n in nodes),
        tasks=len(final),
        failed=sum(1 for t in final if t.get("state") == "FAILED"),
    )


def env_changes(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[str]:
    """What differs between two runtime_envs: fields by name and value, env_vars by name only."""
    a, b = a or {}, b or {}
    out = []
    for key in sorted(set(a) | set(b)):
        if key == "env_vars":
            ea, eb = a.get(key) or {}, b.get(key) or {}
            out += [f"env_vars.{n}" for n in sorted(set(ea) | set(eb)) if ea.get(n) != eb.get(n)]
        elif a.get(key) != b.get(key):
            va, vb = (truncate_text(json.dumps(x.get(key)), FIELD_CHARS // 4) for x in (a, b))
            out.append(f"{key} {va} -> {vb}")
    return out


def differences(
    a: models.RunSide, b: models.RunSide, functions: Sequence[models.FunctionRow], details_b: Row
) -> list[models.Difference]:
    """What differs between two runs, the weightiest first: the outcome, each function, then the settings."""
    longer = (b.duration_s or 0) - (a.duration_s or 0)
    out = _outcome_differences(a, b, details_b)
    for row in functions:
        out += _function_differences(row, longer)
    out += _setting_differences(a, b)
    return sorted(out, key=lambda d: -d.weight)


def _outcome_differences(a: models.RunSide, b: models.RunSide, details_b: Row) -> list[models.Difference]:
    ended_well = ("SUCCEEDED", "RUNNING", "STOPPED")
    if b.status == "FAILED" and a.status in ended_well:
        why = details_b.get("error_type") or truncate_text(
            str(details_b.get("message") or ""), FIELD_CHARS // 2
        )
        return [models.Difference(kind="outcome", said=f"b FAILED ({why}) where a {a.status}", weight=100)]
    if a.status != b.status:
        return [models.Difference(kind="outcome", said=f"a {a.status}, b {b.status}", weight=40)]
    return []


def _function_differences(row: models.FunctionRow, longer: float) -> list[models.Difference]:
    """One function's changes: more failures, slower tasks (weighed by their share of the longer run), far
    more or fewer tasks."""
    out: list[models.Difference] = []
    fa, fb = row.a, row.b
    name = quoted(row.name)
    if fb is not None and fb.failed > (fa.failed if fa else 0):
        was = fa.failed if fa else 0
        out.append(
            models.Difference(
                kind="function_failures",
                said=f"{name} failed {fb.failed} time(s) in b, {was} in a",
                weight=70 + min(20, fb.failed - was),
            )
        )
    if fa and fb and fa.mean_s and fb.mean_s and fb.mean_s >= SLOWER * fa.mean_s:
        added = fb.total_s - fa.total_s
        share = min(1.0, added / longer) if longer > 0 else 0.0
        out.append(
            models.Difference(
                kind="function_slower",
                said=(
                    f"{name} got slower: {fa.mean_s:.3g} s -> {fb.mean_s:.3g} s a task on average "
                    f"(x{fb.mean_s / fa.mean_s:.1f}, {fa.count} -> {fb.count} tasks; +{added:.3g} s of task time)"
                ),
                weight=50 + 40 * share,
            )
        )
    ca, cb = (fa.count if fa else 0), (fb.count if fb else 0)
    if max(ca, cb) >= 2 and (cb >= MORE_CALLS * max(ca, 1) or ca >= MORE_CALLS * max(cb, 1)):
        out.append(
            models.Difference(
                kind="function_count", said=f"{name} ran {ca} task(s) in a, {cb} in b", weight=20
            )
        )
    return out


def _setting_differences(a: models.RunSide, b: models.RunSide) -> list[models.Difference]:
    """What the runs were given differently: the entrypoint, runtime_env, resources, Ray, the nodes."""
    out: list[models.Difference] = []
    if a.entrypoint != b.entrypoint:
        out.append(
            models.Difference(
                kind="entrypoint",
                said=f"the entrypoint changed: {quoted(a.entrypoint)} -> {quoted(b.entrypoint)}",
                weight=35,
            )
        )
    changed = env_changes(a.runtime_env, b.runtime_env)
    if changed:
        out.append(
            models.Difference(
                kind="runtime_env", said=f"runtime_env changed: {'; '.join(changed)}", weight=30
            )
        )
    if a.resources != b.resources:
        out.append(
            models.Difference(
                kind="resources",
                said=f"entrypoint resources {a.resources or {}} -> {b.resources or {}}",
                weight=25,
            )
        )
    if a.ray_version != b.ray_version:
        out.append(
            models.Difference(kind="ray_version", said=f"Ray {a.ray_version} -> {b.ray_version}", weight=30)
        )
    if set(a.nodes) != set(b.nodes):
        out.append(
            models.Difference(
                kind="nodes",
                said=f"ran on {', '.join(a.nodes) or 'no node known'} -> {', '.join(b.nodes) or 'none'}",
                weight=10,
            )
        )
    return out


def function_rows(
    a: Mapping[str, models.FunctionStats], b: Mapping[str, models.FunctionStats]
) -> list[models.FunctionRow]:
    """Every function of either run, the largest change in summed task time first."""
    rows = [models.FunctionRow(name=n, a=a.get(n), b=b.get(n)) for n in sorted(set(a) | set(b))]

    def change(row: models.FunctionRow) -> float:
        ta, tb = (row.a.total_s if row.a else 0.0), (row.b.total_s if row.b else 0.0)
        fa, fb = (row.a.failed if row.a else 0), (row.b.failed if row.b else 0)
        return abs(tb - ta) + 1e6 * abs(fb - fa)

    return sorted(rows, key=lambda r: -change(r))


def verdict(a: models.RunSide, b: models.RunSide, diffs: Sequence[models.Difference]) -> str:
    took = ""
    if a.duration_s is not None and b.duration_s is not None:
        delta = b.duration_s - a.duration_s
        took = (
            f"b took {b.duration_s:.3g} s, a {a.duration_s:.3g} s ({'+' if delta >= 0 else ''}{delta:.3g} s)"
        )
    if not diffs:
        return f"{took or 'No run time to compare'}; no difference found in what Ray records of the two runs"
    also = f"; also: {diffs[1].said}" if len(diffs) > 1 else ""
    return f"{took + ': ' if took else ''}{diffs[0].said}{also}"


def text(answer: models.JobComparison) -> str:
    lines = [answer.verdict, ""]
    for label, s in (("a", answer.a), ("b", answer.b)):
        lines.append(
            f"{label}: {s.submission_id or s.job_id} {s.status}, {s.duration_s if s.duration_s is not None else '?'} s, "
            f"{s.tasks} task(s) ({s.failed} failed), Ray {s.ray_version or '?'}, on {', '.join(s.nodes) or '?'}"
        )
        lines.append(f"   entrypoint: {quoted(s.entrypoint)}")
        if s.use is not None:
            u = s.use
            lines.append(
                f"   workers over its first {u.window_s:.0f} s: CPU {percent(u.cpu_mean_pct)} on average "
                f"(peak {percent(u.cpu_peak_pct)}), memory peak {byte_size(u.memory_peak_bytes)} {u.cpu_spark or ''}".rstrip()
            )
    if answer.differences:
        lines += ["", "Differences, heaviest first:"]
        lines += [f"- [{d.kind}] {d.said}" for d in answer.differences]
    if answer.functions:
        lines += ["", "Tasks per function (a | b): count, failed, mean duration"]
        for row in answer.functions:
            lines.append(f"- {quoted(row.name)}: {_stats(row.a)} | {_stats(row.b)}")
        if answer.functions_total > len(answer.functions):
            lines.append(f"  ({answer.functions_total - len(answer.functions)} more functions not shown)")
    lines += [f"Note: {n}" for n in answer.notes]
    lines += [f"Hint: {h}" for h in answer.hints]
    return "\n".join(lines)


def _stats(s: models.FunctionStats | None) -> str:
    if s is None:
        return "-"
    mean = f"{s.mean_s:.3g} s" if s.mean_s is not None else "?"
    return f"{s.count}, {s.failed} failed, {mean}"


def capped(rows: list[models.FunctionRow]) -> list[models.FunctionRow]:
    return rows[:COMPARE_FUNCTIONS]
