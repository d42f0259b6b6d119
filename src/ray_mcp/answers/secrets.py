"""Secret learning, as an explicit step: before an answer shows text a job may have written (its logs, its
tasks' errors, its actors' death causes), the redactor must hold that job's env_vars.

Ray reports a job's env_vars in its JobDetails (the Jobs API's job list). ``JobSecrets.learn`` reads that list
through the call's read scope, so it costs no request when the call reads the jobs anyway, and only when a job
is new to the redactor (or, for a log any job may have written to, once per JOB_SECRETS_TTL_S). The answers
that read jobs hand what they read to the redactor themselves (``hold_job``, ``hold_listed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any

from ray_mcp.errors import RayMCPError
from ray_mcp.guard.redaction import SECRETS, hold_job, job_owner, secret_values
from ray_mcp.sources.jobs import JobList, JobsAPI
from ray_mcp.sources.records import Job

JOB_SECRETS_TTL_S = 30.0  # how often a log of no known job re-reads every job's env_vars
# How long a job that the Jobs API did not list is not looked for again. A row names a job only once the job
# exists, and the Jobs API lists every job but the drivers in `_ray_internal_` namespaces: the dashboard's own,
# whose actors are the job supervisors (one per submitted job). Such a job stays unlisted, so a list of actors
# that shows supervisors must not re-read every job (at 300 jobs, 90 ms and every job's env_vars) each time.
UNLISTED_RECHECK_S = 600.0


class JobSecrets:
    """What the redactor knows of one cluster's jobs' env_vars, and the step that teaches it."""

    def __init__(self, jobs: JobsAPI, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.jobs = jobs
        self.cluster = jobs.dashboard.dashboard_url
        self._clock = clock  # time.monotonic; tests pass their own to step past the periods above
        self._lock = asyncio.Lock()
        self._learned_at = -1e9  # when every job's env_vars were last read
        self._look_again: dict[str, float] = {}  # job id -> when it may be looked for in the list again

    def hold_job(self, job: Job) -> None:
        """A job read by id: its env_vars are secrets wherever they show up (logs, errors)."""
        hold_job(self.cluster, job)

    def hold_listed(self, listed: JobList) -> None:
        """Every listed job's env_vars held; a job the list no longer has was deleted, and its logs with it."""
        for job in listed.jobs:
            hold_job(self.cluster, job)
        alive = {
            job_owner(self.cluster, str(job.get(k)))
            for job in listed.jobs
            for k in ("submission_id", "job_id")
            if job.get(k)
        }
        SECRETS.drop_owners_except(job_owner(self.cluster, ""), alive, listed.began)
        self._learned_at = self._clock()

    def hold_serve(self, details: Any) -> None:
        """Serve apps' runtime_env env_vars, which their replicas' logs may print (kept: the logs outlive the apps)."""
        SECRETS.hold(f"serve:{self.cluster}", secret_values(details))

    async def learn(self, job_ids: Iterable[Any] | None = None) -> None:
        """Make sure the redactor holds the env_vars of these jobs (by job id or submission id; None: of every
        job, at most once per JOB_SECRETS_TTL_S). Best effort: a job list that cannot be read teaches nothing."""
        now = self._clock()
        wanted: set[str] | None = None
        if job_ids is None:
            if now - self._learned_at < JOB_SECRETS_TTL_S:
                return
        else:
            wanted = {
                str(j)
                for j in job_ids
                if j
                and not SECRETS.holds(job_owner(self.cluster, str(j)))
                and self._look_again.get(str(j), now) <= now
            }
            if not wanted:
                return
        async with self._lock:
            if wanted is None and self._clock() - self._learned_at < JOB_SECRETS_TTL_S:
                return
            wait = JOB_SECRETS_TTL_S  # a list that could not be read: asked again soon
            with contextlib.suppress(RayMCPError):
                self.hold_listed(await self.jobs.job_list())
                wait = UNLISTED_RECHECK_S  # read, and these were not in it (or are held now)
            for job in wanted or ():
                self._look_again[job] = now + wait


def job_ids_of(rows: Iterable[Any]) -> set[str]:
    """The jobs a list of State API rows belongs to (actors, tasks, placement groups): whose text they may show."""
    return {str(r[k]) for r in rows if isinstance(r, dict) for k in ("job_id", "creator_job_id") if r.get(k)}
