"""Ray Data: a pipeline that does not move. The bottleneck operator of a RUNNING job's dataset, named with what
the dashboard and the driver's progress log say of it. Ray Data's own bookkeeping (its stats actor's updates)
keeps finishing tasks while the pipeline stands still, so the job's task activity alone would call it healthy."""

from __future__ import annotations

import re
from datetime import datetime

from ray_mcp import models
from ray_mcp.diagnosis import hang
from ray_mcp.diagnosis.facts import CONTEXT, STUCK, Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import Graph, num
from ray_mcp.diagnosis.hang import RUNNING_STATES
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.shaping.data import job_datasets
from ray_mcp.text import quoted

DATA_DOC = "ray-docs://reference/05-ray-data"
# What the driver's progress line says of the operator's tasks: "Tasks: 5 [backpressured:tasks(ResourceBudget)]".
TASKS_RUNNING = re.compile(r"Tasks: \d+(?: \[backpressured:[^\]]*\])?")


def _bottleneck_words(f: Link) -> str:
    facts = [f"{f['queued']} input block(s) queued", f"{f['done']} task(s) done"]
    facts.append(f"none finished for {f['idle']:.0f} s" if f["stalled"] else "its tasks are finishing")
    facts += [f["running"]] if f["running"] else []
    return (
        f"Ray Data dataset {f['dataset']} {'makes no progress' if f['stalled'] else 'runs'}: operator "
        f"{quoted(f['operator'])} is the bottleneck ({', '.join(facts)})"
    )


BOTTLENECK = Say("bottleneck", Edge.WAITS_ON, _bottleneck_words)
RESOURCES = Say("resources", Edge.WAITS_ON, lambda f: f"resources (active & requested): {f['usage']}")


@rule(
    On.JOB,
    Kind.DATA_STALL,
    order=90,
    severity=STUCK - 8,
    refs=(DATA_DOC,),
    next_steps=(
        "stack_traces job={sid} (where the operator's tasks are)",
        "get_job job={sid} datasets=true",
    ),
    reads=("datasets", "driver_lines", "tasks"),
    also=(Kind.DATA,),
)
def data_chains(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A RUNNING job's dataset, by its bottleneck operator (the most input queued at it, else the first
    unfinished) with the driver log's progress line for it: stalled when none of its tasks finished for 30 s
    (context while they finish)."""
    job = g.ev.job or {}
    if job.get("status") != "RUNNING" or not g.ev.datasets:
        return []
    data = job_datasets(g.ev.datasets, g.ev.driver_lines)
    sid = job.get("submission_id") or job.get("job_id")
    out = []
    for ds in data.datasets:
        neck = next((o for o in ds.operators if o.name == ds.bottleneck), None)
        if neck is None:
            continue
        idle_s = operator_idle_s(g, ds, neck)
        stalled = idle_s is not None and idle_s >= hang.NO_PROGRESS_S
        running = TASKS_RUNNING.search(neck.progress or "")
        link = BOTTLENECK(
            "",
            neck.progress or "",
            dataset=ds.dataset,
            operator=neck.name,
            queued=neck.queued_blocks or 0,
            done=neck.tasks_done or 0,
            stalled=stalled,
            idle=idle_s,
            running=running.group(0) if running else "",
        )
        out.append(
            Chain(
                STUCK - 8 if stalled else CONTEXT - 2,
                Kind.DATA_STALL if stalled else Kind.DATA,
                None,
                [link],
                [step.format(sid=sid) for step in data_chains.next_steps],
                str(job.get("job_id")),
                {f"dataset:{ds.dataset}"},
                [RESOURCES(usage=ds.resources)] if ds.resources else [],
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
