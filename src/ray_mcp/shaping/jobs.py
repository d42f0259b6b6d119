"""Jobs: Ray's JobDetails as our JobInfo, the job list, and their text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ray_mcp import models
from ray_mcp.limits import (
    FIELD_CHARS,
    JOB_MESSAGE_CHARS,
    JOB_MESSAGE_HEAD_CHARS,
    LINE_CHARS,
    LIST_FIELD_CHARS,
)
from ray_mcp.shaping.data import render_datasets
from ray_mcp.text import CARETS, clean_text, quoted, truncate_text

TRACEBACK_START = "Traceback (most recent call last):"


def iso_time(ms: Any) -> str | None:
    """Ray's job times are epoch milliseconds; render them as UTC ISO 8601."""
    if not ms:
        return None
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat(timespec="seconds")


def short_message(message: str, limit: int = JOB_MESSAGE_CHARS) -> str:
    """Ray puts up to 20,000 characters of driver log in a failed job's message: keep its head and its end.

    Without colour codes and ``^^^^`` markers; the end starts at a line's start, at a traceback's first line
    when one starts within it (not mid-frame)."""
    message = "\n".join(ln for ln in clean_text(message).splitlines() if not CARETS.fullmatch(ln))
    if len(message) <= limit:
        return message
    first = message.split("\n", 1)[0][:JOB_MESSAGE_HEAD_CHARS]
    window = len(message) - (limit - len(first))
    start = message.find(TRACEBACK_START, window)
    if start < 0:
        start = message.find("\n", window) + 1 or window
    tail = message[start:]
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
            entrypoint=truncate_text(str(j.get("entrypoint") or ""), LIST_FIELD_CHARS),
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


def render_job(job: models.JobInfo) -> str:
    ids = job.submission_id or job.job_id or "?"
    if job.submission_id and job.job_id:
        ids += f" (job id {job.job_id})"
    # The message's end holds the exception (Ray's is the driver log's last lines): cut it as short_message
    # does, not from its start, which would show only the frames above the error.
    message = short_message(job.message, FIELD_CHARS) if job.message else ""
    lines = [f"Job {ids}: {job.status}" + (f" — {quoted(message, len(message))}" if message else "")]
    if job.error_type or job.driver_exit_code is not None:
        lines.append(f"error_type: {job.error_type or 'none'}; driver exit code: {job.driver_exit_code}")
    lines.append(f"entrypoint: {quoted(job.entrypoint, FIELD_CHARS)}")
    when = f"started {job.start_time or 'not yet'}"
    if job.end_time:
        when += f", ended {job.end_time}"
    if job.duration_s is not None:
        when += f", duration {job.duration_s:g} s"
    lines.append(when)
    if job.metadata:
        lines.append(f"metadata: {truncate_text(json.dumps(job.metadata), FIELD_CHARS)}")
    if job.runtime_env:
        lines.append(f"runtime_env: {truncate_text(json.dumps(job.runtime_env), FIELD_CHARS)}")
    if job.data is not None:
        lines += render_datasets(job.data)
    if job.status == "FAILED":
        lines.append(f"Hint: tail_logs with job={job.submission_id or ids!r} shows the driver's traceback.")
    elif job.data is not None and any(d.bottleneck for d in job.data.datasets):
        lines.append(
            f"Hint: diagnose_job job={job.submission_id or ids!r} says whether the bottleneck moves."
        )
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
        lines.append(
            f"  {ident} {j.status}{extra} started {j.start_time or '-'}{dur}: {quoted(j.entrypoint, LIST_FIELD_CHARS)}"
        )
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
        lines.append(f"Last log line: {quoted(result.last_log_line, LINE_CHARS)}")
    lines += [f"Hint: {h}" for h in result.hints]
    return "\n".join(lines)


def entrypoint_resources(details: Mapping[str, Any]) -> dict[str, float]:
    """What a job's driver asks for: entrypoint_num_cpus/gpus/memory and entrypoint_resources."""
    out = {str(k): float(v) for k, v in (details.get("entrypoint_resources") or {}).items()}
    for key, name in (
        ("entrypoint_num_cpus", "CPU"),
        ("entrypoint_num_gpus", "GPU"),
        ("entrypoint_memory", "memory"),
    ):
        if details.get(key):
            out[name] = float(details[key])
    return out
