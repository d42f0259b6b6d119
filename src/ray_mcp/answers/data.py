"""Ray Data: a job's datasets as the dashboard serves them (/api/data/datasets/{job_id}), with the driver log's
last progress report (tasks running, backpressure, resources per operator: in no API)."""

from __future__ import annotations

import asyncio
from typing import Any

from ray_mcp import models
from ray_mcp.answers.libraries import DATA_STATS, actor_alive
from ray_mcp.answers.logs import Logs
from ray_mcp.answers.targets import LogTarget
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import DATA_LOG_BYTES, DATA_LOG_LINES, DATASETS_READ
from ray_mcp.shaping.data import job_datasets
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.text import first_sentence


class Data:
    def __init__(self, sources: ClusterSources, logs: Logs) -> None:
        self.sources = sources
        self.logs = logs

    async def _present(self) -> bool:
        """Whether Ray Data's stats actor is alive. The dashboard's datasets route creates that detached actor
        when it does not exist, so a read must not call the route before some driver ran Ray Data."""
        return await actor_alive(self.sources, DATA_STATS)

    async def datasets(self, job_id: str) -> list[dict[str, Any]] | None:
        """The job's datasets as Ray returns them, newest first; None when Ray Data never ran on this cluster."""
        if not await self._present():
            return None
        return (await self.sources.routes.datasets(job_id))[:DATASETS_READ]

    async def of_job(self, job_id: str, submission_id: str | None) -> models.JobDatasets:
        """get_job(datasets=true): the datasets with the driver log's progress. A read that fails is a note,
        never the job's error."""
        log_target = LogTarget(job=submission_id or job_id)
        rows, tail = await asyncio.gather(
            self.datasets(job_id),
            self.logs.tail(log_target, lines=DATA_LOG_LINES, max_bytes=DATA_LOG_BYTES),
            return_exceptions=True,
        )
        if isinstance(rows, RayMCPError):
            return models.JobDatasets(
                total=0, notes=[f"Ray Data's datasets could not be read: {first_sentence(str(rows))}"]
            )
        if isinstance(rows, BaseException):
            raise rows
        if not rows:
            return models.JobDatasets(
                total=0, notes=["The job ran no Ray Data dataset that Ray still keeps."]
            )
        if isinstance(tail, BaseException) and not isinstance(tail, RayMCPError):
            raise tail
        lines = None if isinstance(tail, BaseException) else [ln for s in tail.sections for ln in s.lines]
        return job_datasets(rows, lines)
