"""Ray Jobs: get, list, wait, stop and delete through the Jobs REST API (/api/jobs/); submit through Ray's
JobSubmissionClient, which zips and uploads a local working_dir. Its requests ride the cluster's one HTTP
client (``Dashboard.http``): the same headers, TLS and transport as every other call (a Kubernetes API
server's service proxy with the kubeconfig's credentials, or a test's injected fault)."""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
import httpx

from ray_mcp import models, sdk_private
from ray_mcp.errors import (
    DashboardTimeout,
    InvalidArgument,
    NotFound,
    RayMCPError,
    RayRequestFailed,
    dashboard_errors,
    job_sdk_errors,
)
from ray_mcp.guard.redaction import hold_job
from ray_mcp.limits import LINE_CHARS
from ray_mcp.shaping.jobs import job_info, job_list
from ray_mcp.shaping.logs import decode_log
from ray_mcp.sources import scope
from ray_mcp.sources.dashboard import Dashboard, ProgressFn
from ray_mcp.sources.ids import check_job_ref, job_path
from ray_mcp.sources.runtime_env import check_runtime_env, validate_with_ray
from ray_mcp.sources.uploads import confine_uploads
from ray_mcp.text import clean_text, truncate_text

JOB_SDK_SLACK_S = 3.0
UPLOAD_READ_TIMEOUT_S = 300.0
JOB_CHANGE_TIMEOUT_S = 60.0  # a stop or delete waits for the job agent on the head node


def _no_job(url: str, job: str) -> str:
    return (
        f"No job {job!r} in the cluster at {url} (neither a submission id nor a job id). "
        "Call list_jobs to see the jobs that exist."
    )


def job_log_file(submission_id: str) -> str:
    return f"job-driver-{submission_id}.log"  # ray.dashboard.modules.job.common.JOB_LOGS_PATH_TEMPLATE


class Jobs:
    """The Jobs API of one cluster."""

    def __init__(self, client: Dashboard) -> None:
        self.client = client
        # Ray's JobSubmissionClient, made by the first submission (its constructor asks the dashboard's version)
        self._sdk: Any = None
        self._sdk_lock = asyncio.Lock()

    async def _job_client(self) -> Any:
        """Ray's JobSubmissionClient for this cluster, created once (its constructor checks the version)."""
        async with self._sdk_lock:
            if self._sdk is None:
                make = functools.partial(sdk_private.job_client, self.client.dashboard_url, self._sdk_send)
                self._sdk = await self._in_thread(make, what="connecting to the Jobs API")
        return self._sdk

    def _sdk_send(self, method: str, endpoint: str, data: bytes | None, json_data: Any) -> SdkResponse:
        """One request of Ray's Job SDK, called in its worker thread and sent by the cluster's HTTP client on the
        event loop. Reads get the dashboard timeout; a POST or PUT (a submission, an upload) may wait for the
        job server longer. Ray's client sends without any timeout, and with its own headers and TLS."""
        c = self.client
        write = method.upper() != "GET"
        read = max(c.timeout_s, UPLOAD_READ_TIMEOUT_S) if write else c.timeout_s

        async def send() -> httpx.Response:
            if write:  # what the call reads after a submission or an upload is read again
                scope.fresh()
            with dashboard_errors(c.dashboard_url, f"{method} {endpoint} of the Jobs API", read):
                return await c.http.request(
                    method,
                    endpoint,
                    content=data,
                    json=json_data,
                    timeout=httpx.Timeout(c.timeout_s, read=read),
                )

        answer = anyio.from_thread.run(send)
        return SdkResponse(answer.status_code, answer.text)

    async def _in_thread(self, fn: Callable[[], Any], *, what: str, timeout_s: float | None = None) -> Any:
        """Run one blocking Ray client call off the event loop, bounded in time, with its errors mapped."""
        # Each request of the Job SDK has the dashboard timeout (sdk_private.job_client); this is the backstop.
        limit = timeout_s or self.client.timeout_s + JOB_SDK_SLACK_S
        with job_sdk_errors(self.client.dashboard_url, what):
            try:
                with anyio.fail_after(limit):
                    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
            except TimeoutError as exc:
                raise DashboardTimeout(
                    f"The Ray job server at {self.client.dashboard_url} did not finish {what} within {limit:g} s. "
                    "The cluster may be overloaded; retry, or check it with cluster_status."
                ) from exc

    async def details(self, job: str) -> dict[str, Any]:
        """Ray's JobDetails of a job, by submission id or job id (GET /api/jobs/<id>), as a JSON dict."""
        if not job.strip():
            raise InvalidArgument("The job id is empty. Call list_jobs to see the submission ids that exist.")
        job = check_job_ref(job.strip())
        details = await self.client.request_json(
            "GET",
            job_path(job),
            what=f"the lookup of job {job!r}",
            not_found=_no_job(self.client.dashboard_url, job),
        )
        out = dict(details)
        if job not in (out.get("submission_id"), out.get("job_id")):  # the object named, or nothing
            raise RayRequestFailed(
                f"The job server at {self.client.dashboard_url} answered the lookup of job {job} with another "
                "object; nothing was read or changed. Call list_jobs to see the jobs that exist."
            )
        hold_job(
            self.client.dashboard_url, out
        )  # its env_vars are secrets wherever they show up (logs, errors)
        return out

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
        await self._in_thread(
            functools.partial(validate_with_ray, env),
            what="runtime_env validation",
            timeout_s=max(30.0, 3 * self.client.timeout_s),  # local work, no request
        )
        client = await self._job_client()
        submit = functools.partial(
            client.submit_job,
            entrypoint=entrypoint,
            submission_id=submission_id,
            metadata=metadata,
            runtime_env=env or None,
            entrypoint_num_cpus=entrypoint_num_cpus,
            entrypoint_num_gpus=entrypoint_num_gpus,
            entrypoint_memory=entrypoint_memory,
            entrypoint_resources=entrypoint_resources,
        )
        sid = await self._in_thread(
            submit, what="the job submission", timeout_s=max(300.0, self.client.timeout_s)
        )
        info = await self.get(str(sid))
        hints = [
            f"Call wait_for_job with job={sid!r} to follow it, and tail_logs with job={sid!r} for its output."
        ]
        return models.JobSubmitted(
            submission_id=str(sid), status=info.status, entrypoint=entrypoint, uploaded=uploaded, hints=hints
        )

    async def rows(self) -> list[dict[str, Any]]:
        """Every job's JobDetails (GET /api/jobs/), their env_vars learnt as secrets; concurrent askers share the
        read."""
        return await self.client.job_rows()

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
        params = {"node_id": str(node_id), "filename": job_log_file(str(sid)), "lines": "3"}
        try:
            data, _total = await self.client.fetch_log(
                "file", params, what=f"the log of job {sid}", hint="", keep=8192
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
        answer = await self.client.request_json(
            "POST",
            job_path(ident, "stop"),
            what=f"stopping job {ident!r}",
            not_found=_no_job(self.client.dashboard_url, ident),
            timeout_s=max(self.client.timeout_s, JOB_CHANGE_TIMEOUT_S),
        )
        stopped = bool(answer.get("stopped"))
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
        answer = await self.client.request_json(
            "DELETE",
            job_path(sid),
            what=f"deleting job {sid!r}",
            not_found=_no_job(self.client.dashboard_url, sid),
            timeout_s=max(self.client.timeout_s, JOB_CHANGE_TIMEOUT_S),
        )
        deleted = bool(answer.get("deleted"))
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


class SdkResponse:
    """What Ray's Job SDK reads of a response (it was written for ``requests``): status, text, JSON."""

    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text

    def json(self) -> Any:
        return json.loads(self.text)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:  # the SDK's own failure text, which errors.job_sdk_errors reads
            raise RuntimeError(f"Request failed with status code {self.status_code}: {self.text}.")
