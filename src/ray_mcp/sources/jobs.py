"""Ray's Jobs API: the REST routes (``/api/jobs/``) for reading, stopping and deleting jobs, and Ray's own
``JobSubmissionClient`` for submitting one (it zips and uploads a local working_dir). The SDK's requests ride
the cluster's one HTTP client (``Dashboard.http``, through sdk_private.job_client): the same headers, TLS and
transport as every other call (a Kubernetes API server's service proxy with the kubeconfig's credentials, or a
test's injected fault), and a timeout on every request. Ray's client would send with ``requests``: no timeout,
and in token mode this process's own token to every cluster."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.from_thread
import anyio.to_thread
import httpx

from ray_mcp import sdk_private
from ray_mcp.errors import DashboardTimeout, RayRequestFailed, dashboard_errors, job_sdk_errors
from ray_mcp.sources import scope
from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.ids import job_path
from ray_mcp.sources.records import Job

JOB_SDK_SLACK_S = 3.0
UPLOAD_READ_TIMEOUT_S = 300.0
JOB_CHANGE_TIMEOUT_S = 60.0  # a stop or delete waits for the job agent on the head node


def no_job(url: str, job: str) -> str:
    return (
        f"No job {job!r} in the cluster at {url} (neither a submission id nor a job id). "
        "Call list_jobs to see the jobs that exist."
    )


def job_log_file(submission_id: str) -> str:
    return f"job-driver-{submission_id}.log"  # ray.dashboard.modules.job.common.JOB_LOGS_PATH_TEMPLATE


@dataclass(frozen=True)
class JobList:
    """Every job the Jobs API lists, and when the read began (time.monotonic): a job learned of before then and
    not listed is gone."""

    jobs: list[Job]
    began: float


class JobsAPI:
    """The Jobs API of one cluster."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard
        # Ray's JobSubmissionClient, made by the first submission (its constructor asks the dashboard's version)
        self._sdk: Any = None
        self._sdk_lock = asyncio.Lock()

    async def job_list(self) -> JobList:
        """Every job's JobDetails (GET /api/jobs/), read once per call."""
        d = self.dashboard

        async def read() -> JobList:
            began = time.monotonic()
            jobs = await d.get_json("/api/jobs/", what="the job list (/api/jobs/)")
            rows = [cast(Job, dict(j)) for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []
            return JobList(rows, began)

        listed: JobList = await scope.shared(("job list", d.dashboard_url), read)
        return listed

    async def job(self, ref: str) -> Job:
        """One job's JobDetails by submission id or job id (GET /api/jobs/<id>); NotFound when there is none, and
        RayRequestFailed when the server answers with another job."""
        d = self.dashboard
        details = await d.get_json(
            job_path(ref), what=f"the lookup of job {ref!r}", not_found=no_job(d.dashboard_url, ref)
        )
        if not isinstance(details, dict) or ref not in (details.get("submission_id"), details.get("job_id")):
            raise RayRequestFailed(
                f"The job server at {d.dashboard_url} answered the lookup of job {ref} with another object; "
                "nothing was read or changed. Call list_jobs to see the jobs that exist."
            )
        return cast(Job, dict(details))

    async def stop(self, submission_id: str) -> bool:
        """Ask the job server to stop a job (POST .../stop); whether it was running."""
        d = self.dashboard
        answer = await d.write_json(
            "POST",
            job_path(submission_id, "stop"),
            what=f"stopping job {submission_id!r}",
            not_found=no_job(d.dashboard_url, submission_id),
            timeout_s=max(d.timeout_s, JOB_CHANGE_TIMEOUT_S),
        )
        return bool(answer.get("stopped")) if isinstance(answer, dict) else False

    async def delete(self, submission_id: str) -> bool:
        """Delete an ended job's record (DELETE /api/jobs/<id>); whether Ray deleted it."""
        d = self.dashboard
        answer = await d.write_json(
            "DELETE",
            job_path(submission_id),
            what=f"deleting job {submission_id!r}",
            not_found=no_job(d.dashboard_url, submission_id),
            timeout_s=max(d.timeout_s, JOB_CHANGE_TIMEOUT_S),
        )
        return bool(answer.get("deleted")) if isinstance(answer, dict) else False

    async def submit(self, *, timeout_s: float, **job: Any) -> str:
        """Submit through Ray's JobSubmissionClient (``job``: submit_job's keywords); the submission id."""
        client = await self._job_client()
        sid = await self.in_thread(
            functools.partial(client.submit_job, **job), what="the job submission", timeout_s=timeout_s
        )
        return str(sid)

    async def _job_client(self) -> Any:
        """Ray's JobSubmissionClient for this cluster, created once (its constructor checks the version)."""
        async with self._sdk_lock:
            if self._sdk is None:
                make = functools.partial(sdk_private.job_client, self.dashboard.dashboard_url, self._sdk_send)
                self._sdk = await self.in_thread(make, what="connecting to the Jobs API")
        return self._sdk

    def _sdk_send(self, method: str, endpoint: str, data: bytes | None, json_data: Any) -> SdkResponse:
        """One request of Ray's Job SDK, called in its worker thread and sent by the cluster's HTTP client on the
        event loop. Reads get the dashboard timeout; a POST or PUT (a submission, an upload) may wait for the
        job server longer. Ray's client sends without any timeout, and with its own headers and TLS."""
        d = self.dashboard
        what = f"{method} {endpoint} of the Jobs API"

        async def send() -> httpx.Response:
            if method.upper() != "GET":
                return await d.write(
                    method,
                    endpoint,
                    what=what,
                    json_body=json_data,
                    content=data,
                    read_timeout_s=max(d.timeout_s, UPLOAD_READ_TIMEOUT_S),
                )
            with dashboard_errors(d.dashboard_url, what, d.timeout_s):
                return await d.http.request(method, endpoint, content=data, json=json_data)

        answer = anyio.from_thread.run(send)
        return SdkResponse(answer.status_code, answer.text)

    async def in_thread(self, fn: Callable[[], Any], *, what: str, timeout_s: float | None = None) -> Any:
        """Run one blocking Ray client call off the event loop, bounded in time, with its errors mapped."""
        # Each request of the Job SDK has the dashboard timeout (its send); this is the backstop.
        d = self.dashboard
        limit = timeout_s or d.timeout_s + JOB_SDK_SLACK_S
        with job_sdk_errors(d.dashboard_url, what):
            try:
                with anyio.fail_after(limit):
                    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
            except TimeoutError as exc:
                raise DashboardTimeout(
                    f"The Ray job server at {d.dashboard_url} did not finish {what} within {limit:g} s. "
                    "The cluster may be overloaded; retry, or check it with cluster_status."
                ) from exc


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
