"""Ray Jobs: get, list, wait, stop, delete and submit (the Jobs API: sources/jobs.py). A submission's
runtime_env is checked first, its local uploads confined to the upload roots."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ray_mcp import models
from ray_mcp.answers.secrets import JobSecrets
from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError
from ray_mcp.limits import JOB_LAST_LINE_LINES, JOB_LAST_LINE_READ_BYTES, LINE_CHARS
from ray_mcp.shaping.jobs import job_info, job_list
from ray_mcp.shaping.logs import decode_log
from ray_mcp.sources import scope
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import ProgressFn
from ray_mcp.sources.ids import check_job_ref
from ray_mcp.sources.jobs import job_log_file
from ray_mcp.sources.records import Job
from ray_mcp.sources.runtime_env import check_runtime_env, validate_with_ray
from ray_mcp.sources.uploads import confine_uploads
from ray_mcp.text import clean_text, truncate_text


class Jobs:
    """The Jobs API of one cluster. A job's details carry its env_vars: every read of them teaches the redactor
    (``secrets``) before anything of the job is shown."""

    def __init__(self, sources: ClusterSources, secrets: JobSecrets) -> None:
        self.sources = sources
        self.api = sources.jobs
        self.secrets = secrets

    async def details(self, job: str) -> Job:
        """Ray's JobDetails of a job, by submission id or job id (GET /api/jobs/<id>), as a JSON dict."""
        if not job.strip():
            raise InvalidArgument("The job id is empty. Call list_jobs to see the submission ids that exist.")
        details = await self.api.job(check_job_ref(job.strip()))
        self.secrets.hold_job(details)  # its env_vars are secrets wherever they show up (logs, errors)
        return details

    async def id_of(self, job: str | None) -> str | None:
        """The hex job id of a job given by job id or submission id, to filter actors, tasks and groups by."""
        if job is None or not job.strip():
            return None
        job = job.strip()
        if re.fullmatch(r"[0-9a-fA-F]{8}", job):
            return job.lower()
        details = await self.details(job)
        if not details.get("job_id"):
            raise NotFound(
                f"Job {job} has no job id yet (status {details.get('status')}): its driver has not started, so "
                "nothing of it runs in the cluster. Call wait_for_job, then ask again."
            )
        return str(details["job_id"])

    async def get(self, job: str) -> models.JobInfo:
        return job_info(await self.details(job), time.time())

    async def submit(
        self,
        *,
        entrypoint: str,
        submission_id: str | None = None,
        metadata: dict[str, str] | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        entrypoint_num_cpus: float | None = None,
        entrypoint_num_gpus: float | None = None,
        entrypoint_memory: int | None = None,
        entrypoint_resources: dict[str, float] | None = None,
        upload_roots: list[Path],
    ) -> models.JobSubmitted:
        """Validate the runtime_env, upload local directories, submit, and read back the first status.

        Local paths Ray would read (working_dir, py_modules, pip/uv/conda files) must lie under
        ``upload_roots`` (uploads.confine_uploads), checked before anything else sees the runtime_env.
        """
        if not entrypoint.strip():
            raise InvalidArgument(
                "The entrypoint is empty: give the shell command to run, e.g. 'python train.py'."
            )
        if submission_id is not None:
            check_job_ref(submission_id, what="submission_id")
        if isinstance(runtime_env, Mapping) and runtime_env:
            runtime_env = await anyio.to_thread.run_sync(confine_uploads, runtime_env, upload_roots)
        env, uploaded = check_runtime_env(runtime_env)
        timeout_s = self.sources.dashboard.timeout_s
        await self.api.in_thread(
            functools.partial(validate_with_ray, env),
            what="runtime_env validation",
            timeout_s=max(30.0, 3 * timeout_s),  # local work, no request
        )
        sid = await self.api.submit(
            timeout_s=max(300.0, timeout_s),
            entrypoint=entrypoint,
            submission_id=submission_id,
            metadata=metadata,
            runtime_env=env or None,
            entrypoint_num_cpus=entrypoint_num_cpus,
            entrypoint_num_gpus=entrypoint_num_gpus,
            entrypoint_memory=entrypoint_memory,
            entrypoint_resources=entrypoint_resources,
        )
        info = await self.get(sid)
        hints = [
            f"Call wait_for_job with job={sid!r} to follow it, and tail_logs with job={sid!r} for its output."
        ]
        return models.JobSubmitted(
            submission_id=str(sid), status=info.status, entrypoint=entrypoint, uploaded=uploaded, hints=hints
        )

    async def rows(self) -> list[Job]:
        """Every job's JobDetails (GET /api/jobs/), once per call, their env_vars learnt as secrets."""
        listed = await self.api.job_list()
        self.secrets.hold_listed(listed)
        return listed.jobs

    async def wait(
        self, job: str, *, timeout_s: float, on_progress: ProgressFn | None = None, poll_s: float = 1.0
    ) -> models.JobWait:
        """Poll until the job ends or ``timeout_s`` passes, reporting status and newest log line meanwhile."""
        started = time.monotonic()
        details = await self.details(job)
        last_line: str | None = None
        with anyio.move_on_after(timeout_s):
            while True:
                last_line = await self._newest_log_line(details) or last_line
                if on_progress is not None:
                    elapsed = round(time.monotonic() - started, 1)
                    note = f"{details.get('status')}" + (f": {last_line}" if last_line else "")
                    await on_progress(elapsed, timeout_s, truncate_text(note, LINE_CHARS))
                if details.get("status") in models.TERMINAL_JOB_STATUSES:
                    break
                await anyio.sleep(poll_s if time.monotonic() - started < 30 else 2 * poll_s)
                scope.fresh()  # each round reads the job and its log again
                details = await self.details(job)
        info = job_info(details, time.time())
        finished = info.status in models.TERMINAL_JOB_STATUSES
        if finished:
            last_line = await self._newest_log_line(details) or last_line
        hints = [] if finished else [f"Call wait_for_job again to keep waiting, or stop_job to stop {job!r}."]
        return models.JobWait(
            job=info,
            finished=finished,
            timed_out=not finished,
            waited_s=round(time.monotonic() - started, 1),
            last_log_line=last_line,
            hints=hints,
        )

    async def _newest_log_line(self, details: Mapping[str, Any]) -> str | None:
        """The last non-empty line of a submitted job's driver log, or None if there is none (yet)."""
        sid, node_id = details.get("submission_id"), details.get("driver_node_id")
        if not sid or not node_id:
            return None
        params = {"node_id": str(node_id), "filename": job_log_file(str(sid))}
        try:
            data, _total = await self.sources.logs.tail(
                params,
                lines=JOB_LAST_LINE_LINES,
                keep=JOB_LAST_LINE_READ_BYTES,
                what=f"the log of job {sid}",
                hint="",
            )
        except RayMCPError:
            return None
        lines = [line for line in clean_text(decode_log(data)).splitlines() if line.strip()]
        return truncate_text(lines[-1], LINE_CHARS) if lines else None

    async def stop(self, job: str) -> models.JobChange:
        scope.fresh()  # the job as it is now (a confirmation may have waited)
        info = await self.get(job)
        ident = info.submission_id or job
        if info.status in models.TERMINAL_JOB_STATUSES:
            return models.JobChange(
                job=ident,
                action="stop",
                done=False,
                status=info.status,
                message=f"Nothing to do: job {ident} already ended ({info.status}). Nothing was changed.",
            )
        stopped = await self.api.stop(ident)
        after = await self.get(ident)
        if stopped:
            message = (
                f"Stop requested for job {ident} (was {info.status}, now {after.status}): Ray terminates the "
                "driver (SIGTERM, then SIGKILL after a grace period). Call wait_for_job to see it reach "
                "STOPPED."
            )
        else:
            message = f"Job {ident} was not running (now {after.status}); nothing was stopped."
        return models.JobChange(
            job=ident, action="stop", done=bool(stopped), status=after.status, message=message
        )

    async def deletable(self, job: str) -> tuple[models.JobInfo, str]:
        """The job, if it may be deleted (it has ended), with its instance key; else InvalidArgument saying what
        to do first. The key (start time in ms, job id) tells a new job that reuses a submission id apart."""
        details = await self.details(job)
        info = job_info(details, time.time())
        instance = f"start_ms={details.get('start_time')} job_id={details.get('job_id')}"
        if info.status not in models.TERMINAL_JOB_STATUSES:
            raise InvalidArgument(
                f"Job {info.submission_id or job} is {info.status}; only ended jobs (STOPPED, SUCCEEDED, "
                "FAILED) can be deleted. Call stop_job first, then wait_for_job, then delete_job. Nothing "
                "was changed."
            )
        if not info.submission_id:
            raise InvalidArgument(
                f"Job {job} was not submitted through the Jobs API (type {info.type}), so it has no "
                "submission record to delete."
            )
        return info, instance

    async def delete(self, job: str, *, instance: str | None = None) -> models.JobChange:
        """Delete an ended job; with ``instance``, only if it is still that instance (the one confirmed)."""
        scope.fresh()  # the job as it is now, not as the confirmation read it
        info, now = await self.deletable(job)
        sid = str(info.submission_id)
        if instance is not None and now != instance:
            raise InvalidArgument(
                f"Not done (nothing changed): job {sid} is not the job that was confirmed ({instance}; now "
                f"{now}): the submission id was reused by a new job. Call delete_job again without confirm to "
                "see the job as it stands."
            )
        deleted = await self.api.delete(sid)
        message = (
            f"Deleted job {sid} ({info.status}): its record and runtime-env data are gone; log files stay "
            "on disk."
            if deleted
            else f"Ray did not delete job {sid}; call get_job to see its state."
        )
        return models.JobChange(job=sid, action="delete", done=bool(deleted), status=None, message=message)

    async def page(
        self, *, statuses: list[str] | None, entrypoint_contains: str | None, limit: int
    ) -> models.JobList:
        return job_list(
            await self.rows(),
            statuses=statuses,
            entrypoint_contains=entrypoint_contains,
            limit=limit,
            now_s=time.time(),
        )
