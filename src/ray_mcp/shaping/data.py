"""A job's Ray Data datasets: the dashboard's /api/data/datasets rows joined to the driver log's last progress
report, each dataset's bottleneck named first (pure).

The dashboard reports per operator its state, tasks done, estimated output blocks and rows, and queued input
blocks; rows output and spilled bytes only when it reaches Prometheus (otherwise it sends 0 as a number, which
we drop: Prometheus' values come as strings). Tasks running, backpressure and the resources each operator uses
are in no API: Ray Data logs them every 10 s to the driver's stdout when it is not a terminal (a Ray job),
as ``Tasks: 2 [backpressured:tasks(ResourceBudget)]; Actors: 0; Queued blocks: 38 (14.8KiB); Resources: ...``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import byte_size
from ray_mcp.limits import DATA_OPERATORS_SHOWN, DATASETS_SHOWN, FIELD_CHARS
from ray_mcp.text import quoted, truncate_text

RUNNING_DATASET = re.compile(r"=+ Running Dataset: (?P<id>\S+) =+")
OPERATOR_LINE = re.compile(r"^(?P<name>\S.*): (?P<done>\d+)/(?P<total>\d+|\?)$")
PROGRESS_LINE = re.compile(r"^\s+(?P<line>Tasks: .*)$")
RESOURCES_LINE = re.compile(r"Active & requested resources: (?P<line>.*)$")
LOG_PREFIX = re.compile(
    r"^.*?\bINFO \S+:\d+ -- "
)  # Ray Data's logger: "<time>\tINFO logging_progress.py:233 -- "


def progress_reports(lines: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The last progress report of each dataset in the driver log: {dataset: {"resources": str, "operators":
    [(name, progress line), ...]}} in the operators' order."""
    reports: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    name = None
    for raw in lines:
        line = LOG_PREFIX.sub("", raw.rstrip())
        start = RUNNING_DATASET.search(line)
        if start:
            current = reports[start["id"]] = {"resources": None, "operators": []}
            continue
        if current is None:
            continue
        if line.startswith("====="):
            current = None
        elif m := RESOURCES_LINE.search(line):
            current["resources"] = m["line"]
        elif m := OPERATOR_LINE.match(line):
            name = m["name"]
        elif (m := PROGRESS_LINE.match(line)) and name:
            current["operators"].append((name, m["line"]))
            name = None
    return reports


def _iso(seconds: Any) -> str | None:
    """The stats actor's times are epoch seconds (floats)."""
    if not isinstance(seconds, int | float) or not seconds:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _prometheus(row: Mapping[str, Any], metric: str) -> float | None:
    """A Prometheus value the dashboard joined in (a string), or None (it sends the number 0 without one)."""
    value = (row.get(metric) or {}).get("max")
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def bottleneck(ops: Sequence[models.DataOperator]) -> models.DataOperator | None:
    """The operator an unfinished pipeline waits on: the one with the most input queued at it, else (no queue) the
    first that has not finished (those after it starve)."""
    open_ops = [o for o in ops if o.state not in ("FINISHED", "FAILED") and not o.name.startswith("Input_")]
    if not open_ops:
        return None
    queued = max(open_ops, key=lambda o: o.queued_blocks or 0)
    return queued if (queued.queued_blocks or 0) > 0 else open_ops[0]


def dataset_info(row: Mapping[str, Any], report: Mapping[str, Any] | None) -> models.DatasetInfo:
    logged = list((report or {}).get("operators") or [])
    ops = []
    for op in row.get("operators") or []:
        name = str(op.get("name") or "")
        line = next((text for n, text in logged if n == name), None)
        if line is None and logged and name != "Input":  # a name Ray Data truncated in its log: by position
            line = logged.pop(0)[1]
        elif line is not None:
            logged = [x for x in logged if x[0] != name]
        ops.append(
            models.DataOperator(
                name=str(op.get("operator") or name),
                state=str(op.get("state") or "UNKNOWN"),
                tasks_done=_int(op.get("progress")),
                blocks_out_total=_int(op.get("total")),
                rows_out_total=_int(op.get("total_rows")),
                queued_blocks=_int(op.get("queued_blocks")),
                rows_out=_prometheus(op, "ray_data_output_rows"),
                spilled_bytes=_prometheus(op, "ray_data_spilled_bytes"),
                progress=line,
            )
        )
    neck = bottleneck(ops) if row.get("state") == "RUNNING" else None
    return models.DatasetInfo(
        dataset=str(row.get("dataset")),
        state=str(row.get("state") or "UNKNOWN"),
        start_time=_iso(row.get("start_time")),
        end_time=_iso(row.get("end_time")),
        rows_out_total=_int(row.get("total_rows")),
        spilled_bytes=_prometheus(row, "ray_data_spilled_bytes"),
        resources=(report or {}).get("resources"),
        bottleneck=neck.name if neck else None,
        operators=ops[:DATA_OPERATORS_SHOWN],
    )


def job_datasets(rows: Sequence[Mapping[str, Any]], driver_lines: Sequence[str] | None) -> models.JobDatasets:
    """The dashboard's dataset rows (newest first) with the driver log's progress joined in."""
    reports = progress_reports(driver_lines or [])
    datasets = [dataset_info(r, reports.get(str(r.get("dataset")))) for r in rows[:DATASETS_SHOWN]]
    notes = []
    if driver_lines is None:
        notes.append(
            "Tasks running, backpressure and resources per operator are unknown: the driver log was not read."
        )
    return models.JobDatasets(total=len(rows), datasets=datasets, notes=notes)


def operator_line(op: models.DataOperator) -> str:
    parts = [op.state]
    if op.tasks_done is not None:
        parts.append(f"{op.tasks_done} task(s) done")
    if op.blocks_out_total is not None:
        parts.append(f"~{op.blocks_out_total} block(s) out in all")
    if op.queued_blocks:
        parts.append(f"{op.queued_blocks} input block(s) queued")
    if op.rows_out is not None:
        parts.append(f"{op.rows_out:g} row(s) out")
    if op.spilled_bytes:
        parts.append(f"{byte_size(op.spilled_bytes)} spilled")
    text = f"{quoted(op.name, FIELD_CHARS)}: {', '.join(parts)}"
    return text + (f"; {quoted(op.progress, FIELD_CHARS)}" if op.progress else "")


def render_datasets(data: models.JobDatasets) -> list[str]:
    """The bottleneck first, then every operator in pipeline order."""
    lines = [f"Ray Data: {data.total} dataset(s), newest first."]
    for ds in data.datasets:
        head = f"- {ds.dataset} {ds.state}, started {ds.start_time or '?'}"
        neck = next((o for o in ds.operators if o.name == ds.bottleneck), None)
        if neck is not None:
            head += f"; bottleneck: {operator_line(neck)}"
        lines.append(head)
        if ds.resources:
            lines.append(f"  resources (active & requested): {truncate_text(ds.resources, FIELD_CHARS)}")
        lines += [f"  {operator_line(o)}" for o in ds.operators if o is not neck]
    lines += data.notes
    return lines
