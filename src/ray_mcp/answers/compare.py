"""compare_jobs: two runs of a job side by side ("why is b slower, or failing, where a was not").

Reads, concurrently: each job's details (the Jobs API: teaches the redactor its env_vars before anything shows),
each job's task attempts (the State API, with their start and end times), the nodes (their IPs), the cluster's
Ray version, and with a Prometheus each run's workers' CPU and memory over a window of the same length from its
own start (answers/metrics.py's worker_cpu and worker_memory, narrowed to the job's function and class names).
Shaping is pure (shaping/compare.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ray_mcp import models
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.metrics import Metrics
from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.limits import COMPARE_DIFFERENCES, TASKS_READ, TREND_SERIES, TRENDS_TIMEOUT_S
from ray_mcp.shaping import compare as shape
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.promql import between
from ray_mcp.text import first_sentence


class Comparisons:
    def __init__(self, sources: ClusterSources, jobs: Jobs, metrics: Metrics) -> None:
        self.state = sources.state
        self.routes = sources.routes
        self.jobs = jobs
        self.metrics = metrics

    async def compare(self, a: str, b: str) -> tuple[models.JobComparison, str]:
        if a.strip() == b.strip():
            raise InvalidArgument(
                f"a and b are the same job ({a}); give two runs. Call list_jobs to see the submission ids."
            )
        details_a, details_b = await gather(self.jobs.details(a), self.jobs.details(b))
        notes: list[str] = []
        tasks_a, tasks_b, nodes, version = await gather(
            self._tasks(details_a, notes),
            self._tasks(details_b, notes),
            self.state.nodes(),
            self.routes.version(),
        )
        ips = {str(n.get("node_id")): str(n.get("node_ip")) for n in nodes["result"]}
        ray_version = str((version or {}).get("ray_version") or "") or None
        now = time.time()
        side_a = shape.side(a, details_a, tasks_a, ray_version, ips, now)
        side_b = shape.side(b, details_b, tasks_b, ray_version, ips, now)
        side_a.use, side_b.use = await self._use(side_a, side_b, tasks_a, tasks_b, notes)
        rows = shape.function_rows(shape.function_stats(tasks_a), shape.function_stats(tasks_b))
        diffs = shape.differences(side_a, side_b, rows, details_b)
        if len(diffs) > COMPARE_DIFFERENCES:
            notes.append(f"{len(diffs) - COMPARE_DIFFERENCES} lighter differences not listed.")
        answer = models.JobComparison(
            verdict=shape.verdict(side_a, side_b, diffs),
            a=side_a,
            b=side_b,
            differences=diffs[:COMPARE_DIFFERENCES],
            functions=shape.capped(rows),
            functions_total=len(rows),
            notes=notes,
            hints=[
                f"diagnose_job job={b} for why b failed or stalls",
                f"list_tasks job={b} to see b's tasks one by one",
            ],
        )
        return answer, shape.text(answer)

    async def _tasks(self, details: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
        job_id = details.get("job_id")
        if not job_id:
            notes.append(f"Job {details.get('submission_id')} has no job id yet: it ran no task.")
            return []
        found = await self.state.page(
            "tasks", filters=[("job_id", "=", str(job_id))], limit=TASKS_READ, detail=True
        )
        rows = [dict(r) for r in found.get("result") or []]
        matched = int(found.get("num_filtered") or len(rows))
        if matched > len(rows):
            notes.append(
                f"Job {job_id}: {len(rows)} of {matched} task attempts read; the counts cover those."
            )
        return rows

    async def _use(
        self,
        a: models.RunSide,
        b: models.RunSide,
        tasks_a: list[dict[str, Any]],
        tasks_b: list[dict[str, Any]],
        notes: list[str],
    ) -> tuple[models.RunUse | None, models.RunUse | None]:
        """Each run's workers' CPU and memory over the same length of time from its own start."""
        if a.start_time is None or b.start_time is None or a.duration_s is None or b.duration_s is None:
            return None, None
        length = max(a.duration_s, b.duration_s, 60.0)
        try:
            async with asyncio.timeout(TRENDS_TIMEOUT_S):
                prom = await self.metrics.prometheus()
                if prom is None:
                    notes.append(
                        "Resource use over each run is not shown: no Prometheus is known "
                        f"({self.metrics.locator.why_missing}); see docs/metrics.md."
                    )
                    return None, None
                use_a, use_b = await gather(
                    self._run_use(prom, a, tasks_a, length), self._run_use(prom, b, tasks_b, length)
                )
                return use_a, use_b
        except TimeoutError:
            notes.append(
                f"Resource use over each run is unknown: Prometheus did not answer within {TRENDS_TIMEOUT_S:g} s."
            )
        except RayMCPError as exc:
            notes.append(f"Resource use over each run is unknown: {first_sentence(str(exc))}")
        return None, None

    async def _run_use(
        self, prom: Any, run: models.RunSide, tasks: list[dict[str, Any]], length: float
    ) -> models.RunUse | None:
        names = sorted(
            {
                part
                for t in tasks
                for n in [str(t.get("func_or_class_name") or "")]
                if n
                for part in (n, n.split(".")[0])
            }
        )
        if not names:
            return None
        start = _epoch(run.start_time)
        win = between(start, min(start + length, time.time()))
        cpu, memory = await gather(
            self.metrics.history(prom, "worker_cpu", win, job_names=names, limit=TREND_SERIES),
            self.metrics.history(prom, "worker_memory", win, job_names=names, limit=TREND_SERIES),
        )
        cpu_series = cpu[0].series if cpu else []
        memory_series = memory[0].series if memory else []
        if not cpu_series and not memory_series:
            return None
        busiest = max(cpu_series, key=lambda s: s.mean or 0.0, default=None)
        return models.RunUse(
            window_s=win.span_s,
            cpu_mean_pct=sum(s.mean or 0.0 for s in cpu_series) if cpu_series else None,
            cpu_peak_pct=sum(s.max or 0.0 for s in cpu_series) if cpu_series else None,
            memory_peak_bytes=sum(s.max or 0.0 for s in memory_series) if memory_series else None,
            cpu_spark=busiest.spark if busiest is not None else None,
        )


def _epoch(iso: str | None) -> float:
    from datetime import datetime

    return datetime.fromisoformat((iso or "").replace("Z", "+00:00")).timestamp()
