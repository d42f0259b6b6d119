"""A Ray Data pipeline that does not move: the bottleneck operator of a RUNNING job's dataset, named with what
the dashboard and the driver's progress log say of it. Ray Data's own bookkeeping (its stats actor's updates)
keeps finishing tasks while the pipeline stands still, so the job's task activity alone would call it healthy."""

from __future__ import annotations

import re
from datetime import datetime

from ray_mcp import models
from ray_mcp.diagnosis.chains.links import CONTEXT, STUCK, Chain, Link
from ray_mcp.diagnosis.graph import Graph, num
from ray_mcp.diagnosis.hang import NO_PROGRESS_S, RUNNING_STATES
from ray_mcp.shaping.data import job_datasets
from ray_mcp.text import quoted

# What the driver's progress line says of the operator's tasks: "Tasks: 5 [backpressured:tasks(ResourceBudget)]".
TASKS_RUNNING = re.compile(r"Tasks: \d+(?: \[backpressured:[^\]]*\])?")


def data_chains(g: Graph) -> list[Chain]:
    """Each RUNNING dataset's bottleneck: STUCK when none of its tasks finished for NO_PROGRESS_S, else context."""
    job = g.ev.job or {}
    if job.get("status") != "RUNNING" or not g.ev.datasets:
        return []
    data = job_datasets(g.ev.datasets, g.ev.driver_lines)
    out = []
    for ds in data.datasets:
        neck = next((o for o in ds.operators if o.name == ds.bottleneck), None)
        if neck is None:
            continue
        idle_s = operator_idle_s(g, ds, neck)
        stalled = idle_s is not None and idle_s >= NO_PROGRESS_S
        facts = [f"{neck.queued_blocks or 0} input block(s) queued", f"{neck.tasks_done or 0} task(s) done"]
        facts.append(f"none finished for {idle_s:.0f} s" if stalled else "its tasks are finishing")
        running = TASKS_RUNNING.search(neck.progress or "")
        facts += [running.group(0)] if running else []
        text = (
            f"Ray Data dataset {ds.dataset} {'makes no progress' if stalled else 'runs'}: operator "
            f"{quoted(neck.name)} is the bottleneck ({', '.join(facts)})"
        )
        sid = job.get("submission_id") or job.get("job_id")
        out.append(
            Chain(
                STUCK - 8 if stalled else CONTEXT - 2,
                "data_stall" if stalled else "data",
                "",
                [Link("waits_on", text, neck.progress or "")],
                [
                    f"stack_traces job={sid} (where the operator's tasks are)",
                    f"get_job job={sid} datasets=true",
                ],
                str(job.get("job_id")),
                {f"dataset:{ds.dataset}"},
                [f"resources (active & requested): {ds.resources}"] if ds.resources else [],
            )
        )
    return out


def operator_idle_s(g: Graph, ds: models.DatasetInfo, op: models.DataOperator) -> float | None:
    """Seconds since a task of the operator last finished (its Ray tasks carry the operator's name), else since
    the first of its running tasks started, else since the dataset started."""
    name = op.name.rsplit("_", 1)[0]
    rows = [t for t in g.ev.tasks or [] if str(t.get("name") or "") == name]
    ends = [num(t.get("end_time_ms")) for t in rows if t.get("state") == "FINISHED" and t.get("end_time_ms")]
    starts = [
        num(t.get("start_time_ms"))
        for t in rows
        if t.get("state") in RUNNING_STATES and t.get("start_time_ms")
    ]
    since = max(ends) if ends else min(starts) if starts else None
    if since is None and ds.start_time:
        since = datetime.fromisoformat(ds.start_time).timestamp() * 1000
    return None if since is None or not g.ev.now_ms else max(0.0, (g.ev.now_ms - since) / 1000)
