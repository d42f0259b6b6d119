"""Ray Train runs, the pure part: the dashboard's Train v2 runs (``/api/train/v2/runs/v1``) as short answers.

The schema is Ray's ``ray.train.v2._internal.state.schema.TrainRunsResponse`` (Ray 2.60): runs with their
attempts, each attempt with its workers by world rank, and a ``status_detail`` that carries the workers' errors
as ``[Rank 0,2 Error Snippet]:`` sections. Checkpoints are not in that API: they come from the run's
checkpoint manager snapshot (``checkpoint_manager_snapshot.json`` in the run's storage directory).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ray_mcp import limits
from ray_mcp.guard.redaction import redact
from ray_mcp.models import (
    TrainCheckpoint,
    TrainRankError,
    TrainRun,
    TrainRunList,
    TrainRunSummary,
    TrainWorker,
)
from ray_mcp.shaping.common import to_number
from ray_mcp.text import exception_summary, quoted, tail_text, truncate_text

TERMINAL = frozenset({"FINISHED", "ERRORED", "ABORTED"})
_RANK_SECTION = re.compile(r"^\[Rank (?P<ranks>[\d, ]+) Error Snippet\]:\s*$", re.MULTILINE)


def _utc(ns: Any) -> str | None:
    value = to_number(ns)
    if not isinstance(value, int) or value <= 0:
        return None
    return datetime.fromtimestamp(value / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(start_ns: Any, end_ns: Any, now_s: float) -> float | None:
    start, end = to_number(start_ns), to_number(end_ns)
    if not isinstance(start, int) or start <= 0:
        return None
    stop = end / 1e9 if isinstance(end, int) and end > 0 else now_s
    return round(max(0.0, stop - start / 1e9), 1)


def latest_attempt(run: Mapping[str, Any]) -> Mapping[str, Any] | None:
    attempts = list(run.get("attempts") or [])
    if not attempts:
        return None
    return max(attempts, key=lambda a: to_number(a.get("start_time_ns")) or 0)


def run_summary(run: Mapping[str, Any], now_s: float) -> TrainRunSummary:
    attempt = latest_attempt(run)
    job = run.get("job_details") or {}
    return TrainRunSummary(
        run_id=str(run.get("id", "")),
        name=str(run.get("name", "")),
        status=str(run.get("status", "")),
        status_detail=_short_detail(run.get("status_detail")),
        job_id=run.get("job_id") or None,
        submission_id=job.get("submission_id") or None,
        started=_utc(run.get("start_time_ns")),
        duration_s=_duration(run.get("start_time_ns"), run.get("end_time_ns"), now_s),
        attempts=len(run.get("attempts") or []),
        workers=len(attempt.get("workers") or []) if attempt else None,
    )


def _short_detail(detail: Any) -> str | None:
    if not detail:
        return None
    first = str(detail).strip().splitlines()[0]
    return truncate_text(first, limits.LINE_CHARS)


def build_run_list(
    runs: Sequence[Mapping[str, Any]], *, status: str | None, name: str | None, limit: int, now_s: float
) -> TrainRunList:
    summaries = [run_summary(r, now_s) for r in runs]
    by_status = dict(Counter(s.status for s in summaries))
    matched = [
        s for s in summaries if (status is None or s.status == status) and (name is None or s.name == name)
    ]
    matched.sort(key=lambda s: s.started or "", reverse=True)
    shown = matched[:limit]
    hints = []
    if len(shown) < len(matched):
        hints.append(f"{len(matched) - len(shown)} more runs: filter by status or name, or raise limit.")
    if shown:
        hints.append(
            "Call get_train_run with run=<run_id> for its worker group by rank, errors and checkpoint."
        )
    return TrainRunList(
        total=len(summaries),
        matched=len(matched),
        shown=len(shown),
        by_status=by_status,
        runs=shown,
        hints=hints,
    )


def find_run(runs: Sequence[Mapping[str, Any]], run: str) -> Mapping[str, Any] | None:
    """A run by id, or the newest run with that name."""
    by_id = [r for r in runs if r.get("id") == run]
    if by_id:
        return by_id[0]
    named = [r for r in runs if r.get("name") == run]
    return max(named, key=lambda r: to_number(r.get("start_time_ns")) or 0) if named else None


def rank_errors(detail: str | None) -> list[TrainRankError]:
    """Split Ray's worker-group error text into one entry per group of ranks that failed the same way."""
    if not detail:
        return []
    matches = list(_RANK_SECTION.finditer(detail))
    out = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(detail)
        body = detail[m.end() : end].strip()
        ranks = [int(r) for r in re.findall(r"\d+", m["ranks"])]
        error_type, summary = exception_summary(body)
        message = tail_text(body, limits.TRAIN_ERROR_CHARS) or ""
        out.append(
            TrainRankError(ranks=ranks, error_type=error_type or _first_type(summary), message=message)
        )
    return out


def _first_type(summary: str | None) -> str | None:
    if summary and (m := re.match(r"([A-Za-z_][\w.]*(?:Error|Exception))\b", summary)):
        return m.group(1)
    return None


def worker_group(attempt: Mapping[str, Any] | None, errors: Sequence[TrainRankError]) -> list[TrainWorker]:
    if not attempt:
        return []
    error_of = {rank: e for e in errors for rank in e.ranks}
    workers = []
    for w in attempt.get("workers") or []:
        rank = int(to_number(w.get("world_rank")) or 0)
        err = error_of.get(rank)
        workers.append(
            TrainWorker(
                world_rank=rank,
                local_rank=to_number(w.get("local_rank")),
                node_rank=to_number(w.get("node_rank")),
                actor_id=w.get("actor_id"),
                node_id=w.get("node_id"),
                node_ip=w.get("node_ip"),
                pid=to_number(w.get("pid")) or None,
                gpu_ids=[int(g) for g in w.get("gpu_ids") or []],
                status=w.get("status"),
                resources={
                    k: float(v) for k, v in ((w.get("resources") or {}).get("resources") or {}).items()
                },
                error=(f"{err.error_type or 'error'} (see errors)" if err else None),
            )
        )
    return sorted(workers, key=lambda w: w.world_rank)


def checkpoint_from_snapshot(snapshot: Mapping[str, Any], source: str) -> TrainCheckpoint:
    latest = snapshot.get("latest_checkpoint_result") or {}
    metrics = redact(dict(latest.get("metrics") or {}))
    if len(str(metrics)) > limits.FIELD_CHARS:
        metrics = dict(list(metrics.items())[: limits.TRAIN_METRICS_SHOWN])
    return TrainCheckpoint(
        source=source,
        checkpoint_dir=latest.get("checkpoint_dir_name") or None,
        metrics=metrics,
        checkpoints_kept=len(snapshot.get("checkpoint_results") or []),
        reports=to_number(snapshot.get("current_report_index")),
    )


def build_run(
    run: Mapping[str, Any], *, now_s: float, checkpoint: TrainCheckpoint | None, notes: list[str]
) -> TrainRun:
    summary = run_summary(run, now_s)
    attempt = latest_attempt(run)
    detail = str(run.get("status_detail") or (attempt or {}).get("status_detail") or "")
    errors = rank_errors(detail)
    group = worker_group(attempt, errors)
    settings = run.get("run_settings") or {}
    scaling_raw = settings.get("scaling_config") or {}
    scaling = {
        k: scaling_raw[k]
        for k in ("num_workers", "use_gpu", "resources_per_worker", "placement_strategy", "accelerator_type")
        if scaling_raw.get(k) is not None
    }
    run_config = settings.get("run_config") or {}
    storage = None
    if run_config.get("storage_path"):
        storage = (
            str(run_config["storage_path"]).rstrip("/") + "/" + str(run_config.get("name") or summary.name)
        )
    model = TrainRun(
        **summary.model_dump(),
        verdict="",
        controller_actor_id=run.get("controller_actor_id") or None,
        attempt_status=(attempt or {}).get("status"),
        attempt_status_detail=_short_detail((attempt or {}).get("status_detail")),
        scaling=scaling,
        storage=storage,
        worker_group=group,
        errors=errors,
        latest_checkpoint=checkpoint,
        framework_versions={str(k): str(v) for k, v in (run.get("framework_versions") or {}).items()},
        notes=notes,
    )
    if errors and not summary.status_detail:
        model.status_detail = _short_detail(detail)
    model.verdict = _verdict(model)
    if errors:
        model.hints.append(
            "Call tail_logs with actor_id=<a failed rank's actor_id> for its full output, or diagnose_job "
            f"with job={model.submission_id or model.job_id!r}."
        )
    return model


def _verdict(r: TrainRun) -> str:
    alive = sum(1 for w in r.worker_group if w.status == "ALIVE")
    text = f"Train run {quoted(r.name)} ({r.run_id}) {r.status}"
    if r.worker_group:
        text += f": {len(r.worker_group)} worker(s), {alive} alive"
    if r.errors:
        failed = sorted({rank for e in r.errors for rank in e.ranks})
        kinds = ", ".join(sorted({e.error_type or "error" for e in r.errors}))
        text += f"; rank(s) {','.join(map(str, failed))} failed ({kinds})"
    elif r.status not in TERMINAL and r.status_detail:
        text += f"; {r.status_detail.rstrip('.')}"
    if r.latest_checkpoint and r.latest_checkpoint.checkpoint_dir:
        text += f"; latest checkpoint {r.latest_checkpoint.checkpoint_dir}"
    return text + "."


def render_run_list(page: TrainRunList) -> str:
    if not page.known:
        return "\n".join(page.notes + [f"Hint: {h}" for h in page.hints])
    counts = ", ".join(f"{k} {v}" for k, v in sorted(page.by_status.items())) or "none"
    lines = [f"Train runs: {page.total} ({counts}); {page.matched} match, showing {page.shown}."]
    for r in page.runs:
        line = f"- {quoted(r.name)} {r.run_id} {r.status}, job {r.submission_id or r.job_id}, started {r.started}"
        line += f", {r.duration_s:g} s" if r.duration_s is not None else ""
        line += f", {r.attempts} attempt(s), {r.workers} worker(s)" if r.workers is not None else ""
        if r.status_detail:
            line += f": {r.status_detail}"
        lines.append(line)
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


def render_run(r: TrainRun) -> str:
    lines = [r.verdict]
    lines.append(
        f"Job {r.submission_id or r.job_id}; started {r.started}; {r.attempts} attempt(s)"
        + (f"; latest attempt {r.attempt_status}" if r.attempt_status else "")
    )
    if r.scaling:
        lines.append("Scaling: " + ", ".join(f"{k}={v}" for k, v in r.scaling.items()))
    if r.worker_group:
        lines.append("Worker group (latest attempt):")
        for w in r.worker_group:
            gpus = f" GPUs {','.join(map(str, w.gpu_ids))}" if w.gpu_ids else ""
            err = f" FAILED: {w.error}" if w.error else ""
            lines.append(
                f"  rank {w.world_rank} (local {w.local_rank}, node rank {w.node_rank}): {w.status or '?'} "
                f"actor {w.actor_id} pid {w.pid} on {w.node_id} {w.node_ip}{gpus}{err}"
            )
    for e in r.errors:
        lines.append(f"Error on rank(s) {','.join(map(str, e.ranks))}: {e.error_type or ''}")
        lines += ["  " + line for line in e.message.splitlines()[-limits.TRAIN_ERROR_LINES :]]
    if r.latest_checkpoint:
        c = r.latest_checkpoint
        metrics = ", ".join(f"{k}={v}" for k, v in list(c.metrics.items())[: limits.TRAIN_METRICS_SHOWN])
        lines.append(
            f"Latest checkpoint: {c.checkpoint_dir or 'none'}; {c.checkpoints_kept} kept; "
            f"{c.reports} report(s); metrics {metrics or '-'} (from {c.source})"
        )
    lines += [f"Note: {n}" for n in r.notes] + [f"Hint: {h}" for h in r.hints]
    return "\n".join(lines)
