"""Trends for the diagnosis: what a RUNNING job's workers, its nodes, the object store, Serve and the tasks did
over the last minutes, read from the cluster's Prometheus (the named questions of answers/metrics.py) within
TRENDS_TIMEOUT_S in all.

The record (``GraphInputs.trends``) holds each question's panels as JSON (first, last, slope, change point...),
so a recorded diagnosis replays; rules/trends.py reads it. With no Prometheus known the record says "missing"
and why (a note says history was not available); a Prometheus that is down, wrong or slow leaves it "unknown"
(the check is unchecked: the answer says UNKNOWN for it, never healthy).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ray_mcp.amounts import duration
from ray_mcp.diagnosis.graph import GraphInputs, num
from ray_mcp.diagnosis.recognise import monitor_threshold
from ray_mcp.diagnosis.trends import held
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import (
    MEMORY_USAGE_THRESHOLD,
    TREND_MIN_SPAN_S,
    TREND_SERIES,
    TREND_WINDOW_S,
    TRENDS_TIMEOUT_S,
)
from ray_mcp.sources.promql import Window, between
from ray_mcp.text import first_sentence

if TYPE_CHECKING:
    from ray_mcp.answers import RayAPI

# What each diagnosis asks of the Prometheus (answers/metric_questions.py's names).
JOB_QUESTIONS = ("worker_memory", "worker_cpu", "tasks", "node_memory", "object_store")
CLUSTER_QUESTIONS = ("worker_memory", "node_memory", "object_store", "tasks", "serve")
log = logging.getLogger("ray_mcp.diagnosis")
CHECK = "trends over time"  # the check's name where it could not run (GraphInputs.unchecked)


async def job_trends(api: RayAPI, ev: GraphInputs) -> None:
    """A RUNNING job's trends, from its start (or TREND_WINDOW_S ago) to now, narrowed to its workers by the
    names of its tasks and actors (Ray labels worker series by name, not by job)."""
    job = ev.job or {}
    now = ev.now_ms / 1000 or time.time()
    started = num(job.get("start_time")) / 1000 or now
    start = max(started, now - TREND_WINDOW_S)
    if now - start < TREND_MIN_SPAN_S:
        ev.trends = {"missing": f"the job has run for {duration(now - start)}, too short for a trend"}
        return
    gpus = held(ev, "GPU")[0] > 0  # then the GPUs it holds are judged too (are they busy?)
    questions = (*JOB_QUESTIONS, "node_gpu") if gpus else JOB_QUESTIONS
    await read(api, ev, questions, between(start, now), job_names(ev))


async def cluster_trends(api: RayAPI, ev: GraphInputs) -> None:
    """The whole cluster's trends over the last TREND_WINDOW_S."""
    now = ev.now_ms / 1000 or time.time()
    await read(api, ev, CLUSTER_QUESTIONS, between(now - TREND_WINDOW_S, now), None)


def job_names(ev: GraphInputs) -> list[str]:
    """The names the job's worker and task series carry: its tasks' functions and its actors' classes."""
    names = {str(t.get("func_or_class_name") or t.get("name") or "") for t in ev.tasks or []}
    names |= {str(a.get("class_name") or "") for a in ev.actors or []}
    return sorted({part for n in names if n for part in (n, n.split(".")[0])})


async def read(
    api: RayAPI, ev: GraphInputs, questions: Sequence[str], win: Window, names: list[str] | None
) -> None:
    """Every question's panels into ``ev.trends``, all within TRENDS_TIMEOUT_S."""
    if names is not None and not names:
        ev.trends = {"missing": "the job has no task or actor yet, so no worker series is named after it"}
        return
    try:
        async with asyncio.timeout(TRENDS_TIMEOUT_S):
            prom = await api.metrics.prometheus()
            if prom is None:
                why = api.metrics.locator.why_missing or "none is configured"
                ev.trends = {"missing": f"no Prometheus is known ({why})"}
                return
            panels = await asyncio.gather(
                *(api.metrics.history(prom, q, win, job_names=names, limit=TREND_SERIES) for q in questions)
            )
    except TimeoutError:
        unknown(ev, f"its Prometheus did not answer within {TRENDS_TIMEOUT_S:g} s")
        return
    except RayMCPError as exc:
        unknown(ev, first_sentence(str(exc)))
        return
    except (
        Exception
    ) as exc:  # a bug here must not cost the rest of the diagnosis; its traceback goes to stderr
        log.error("ray-mcp: reading trends failed with an unexpected %s", type(exc).__name__, exc_info=exc)
        unknown(ev, f"unexpected {type(exc).__name__} in ray-mcp (see its log)")
        return
    ev.trends = {
        "prometheus": prom.url,
        "window": {"start": win.start, "end": win.end, "step_s": win.step_s},
        "threshold": threshold(api, ev),
        "panels": {
            q: [p.model_dump(mode="json", exclude_none=True) for p in found]
            for q, found in zip(questions, panels, strict=True)
        },
    }


def unknown(ev: GraphInputs, why: str) -> None:
    ev.trends = {"unknown": why}
    ev.unchecked.append(CHECK)
    ev.notes.append(
        f"Could not check {CHECK}: {why}. A leak, a throughput drop or a slower Serve is UNKNOWN, not ruled out."
    )


def threshold(api: RayAPI, ev: GraphInputs) -> dict[str, Any]:
    """The memory monitor's threshold: as its own kill messages state it, else as configured (Ray's default)."""
    said = monitor_threshold(
        [str(e.get("message") or "") for e in ev.events or []]
        + [str(t.get("error_message") or "") for t in ev.tasks or []]
    )
    if said is not None:
        return {"fraction": said, "source": "stated by the memory monitor"}
    default = api.memory_threshold == MEMORY_USAGE_THRESHOLD
    return {"fraction": api.memory_threshold, "source": "Ray's default" if default else "configured"}
