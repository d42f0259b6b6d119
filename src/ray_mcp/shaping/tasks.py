"""Tasks: State API rows as Task models, the bounded list, the summary by name and error type."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.limits import LINE_CHARS, LIST_FIELD_CHARS, MAX_TASK_GROUPS, SAMPLE_ERROR_CHARS, TASK_ERROR_CHARS
from ray_mcp.shaping.common import source_cap_note, to_number
from ray_mcp.text import clean_text, exception_summary, head_text, quoted, tail_text


def task_error_message(message: str | None, max_chars: int = TASK_ERROR_CHARS) -> str | None:
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
    shown = tasks[:limit]  # the edge fits the answer to its byte budget (shaping.common.fit_page)
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
        parts = [t.task_id, quoted(t.name), t.state]
        parts += [f"attempt={t.attempt}"] if t.attempt else []
        parts += [f"actor={t.actor_id}"] if t.actor_id else []
        parts += [f"job={t.job_id}"] if t.job_id else []
        parts += [f"error={t.error_type}"] if t.error_type else []
        lines.append("  " + " ".join(parts))
        if t.error_message:
            lines.append(
                "    " + quoted(head_text(t.error_message.split("\n", 1)[0], LIST_FIELD_CHARS) or "")
            )
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


def error_groups(
    failed_counts: Mapping[str, int], samples: Mapping[str, Mapping[str, Any]]
) -> list[models.ErrorGroup]:
    """Failed tasks by error type, the most frequent first, each with a sample task and its message."""
    errors = []
    for error_type, count in sorted(failed_counts.items(), key=lambda kv: -kv[1]):
        sample = samples.get(error_type) or {}
        errors.append(
            models.ErrorGroup(
                error_type=error_type,
                count=count,
                sample_task_id=sample.get("task_id"),
                sample_name=sample.get("name"),
                sample_message=task_error_message(sample.get("error_message"), SAMPLE_ERROR_CHARS),
            )
        )
    return errors


def build_task_summary(
    *,
    summary: Mapping[str, Any],
    failed_counts: Mapping[str, int],
    samples: Mapping[str, Mapping[str, Any]],
    notes: list[str],
    in_cluster: int | None = None,
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
    errors = error_groups(failed_counts, samples)
    hints = []
    if len(groups) > MAX_TASK_GROUPS:
        hints.append(f"{len(groups) - MAX_TASK_GROUPS} more task names not shown; filter by name or job_id.")
    if errors:
        hints.append("list_tasks(state='FAILED', error_type=...) lists the failed tasks of one error type.")
    total = int(summary.get("num_filtered") or sum(by_state.values()))
    read = int(summary.get("num_after_truncation", 0) or 0)
    known = max(int(summary.get("total") or 0), in_cluster or 0)
    capped = source_cap_note("tasks", summary, in_cluster=in_cluster)
    return models.TaskSummary(
        total=total,
        in_cluster=known if capped and known > read else None,
        left_out=known - read if capped and known > read else None,
        capped=bool(capped),
        by_state=dict(sorted(by_state.items())),
        groups=groups[:MAX_TASK_GROUPS],
        groups_total=len(groups),
        failed_by_error=errors,
        notes=[*notes, capped] if capped else notes,
        hints=hints,
    )


def render_task_summary(s: models.TaskSummary) -> str:
    counts = ", ".join(f"{n:,} {st}" for st, n in s.by_state.items()) or "none"
    counted = f"{s.total:,}"
    if s.left_out:
        counted += f" counted of {s.in_cluster:,} ({s.left_out:,} not read)"
    elif s.capped:
        counted += " counted (Ray's cap; there may be more)"
    lines = [f"Tasks: {counted} ({counts}) in {s.groups_total} names."]
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
                lines.append("    " + (head_text(e.sample_message.split("\n", 1)[0], LINE_CHARS) or ""))
    lines += [f"Note: {n}" for n in s.notes] + [f"Hint: {h}" for h in s.hints]
    return "\n".join(lines)
