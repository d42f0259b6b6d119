"""The only module that talks to Ray: the dashboard REST API (httpx), and Ray's own clients.

Ray is imported lazily, inside the functions that need it, so that the server answers ``initialize``
without paying for ``import ray``. Every call is wrapped in ``errors.dashboard_errors`` so that an HTTP
failure becomes one of our ``ToolError`` subclasses with an actionable message.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from ray_mcp import causal_gather, causal_report, diagnosis, models, shaping
from ray_mcp.errors import (
    ClusterUnavailable,
    DashboardTimeout,
    InvalidArgument,
    NotFound,
    RayMCPError,
    RayRequestFailed,
    dashboard_errors,
    job_sdk_errors,
    log_request_failed,
)
from ray_mcp.shaping import uncamel_resources

if TYPE_CHECKING:
    import httpx

USER_AGENT = "ray-mcp"
Params = Any  # what httpx accepts as query params


# == jobs & logs: module-level helpers =====================================================================

DEFAULT_MAX_SCAN_MB = 256
MAX_LOG_LINES = 2000
ProgressFn = Callable[[float, float, str], Awaitable[None]]
_MAIN_LOGS = ("raylet.", "gcs_server.", "dashboard.", "dashboard_agent.", "monitor.", "runtime_env_agent.")
_ACTOR_HINT = "Call list_actors to see the actor ids that exist."
_TASK_HINT = (
    "Task ids appear in list_tasks and in the job's driver log; tasks of actors log to the actor's log "
    "(use actor_id)."
)


@dataclass(frozen=True)
class LogTarget:
    """Exactly one thing whose log to read (checked by ``shaping.log_target_kind``)."""

    kind: str  # job | actor_id | task_id | pid | filename
    job: str | None = None
    actor_id: str | None = None
    task_id: str | None = None
    attempt: int = 0
    pid: int | None = None
    node: str | None = None
    filename: str | None = None
    stream: str = "both"


@dataclass
class LogSource:
    """One file to read: the endpoint's query parameters and how to describe it to the agent."""

    params: dict[str, str]
    source: str
    node_id: str | None
    filename: str | None
    stream: str | None
    hint: str = field(default="")


def _job_log_file(submission_id: str) -> str:
    return f"job-driver-{submission_id}.log"  # ray.dashboard.modules.job.common.JOB_LOGS_PATH_TEMPLATE


def _compile_grep(grep: str) -> re.Pattern[str]:
    try:
        return re.compile(grep, re.MULTILINE)
    except re.error as exc:
        raise InvalidArgument(
            f"grep {grep!r} is not a valid regular expression: {exc}. Fix it and retry."
        ) from exc


def _validate_runtime_env_with_ray(env: dict[str, Any]) -> None:
    """Run Ray's own RuntimeEnv validation (types of pip, conda, uv...) without submitting anything."""
    if not env:
        return
    from ray.runtime_env import RuntimeEnv  # lazily: the server must start without importing ray

    try:
        RuntimeEnv(**env)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"Invalid runtime_env, nothing was submitted: Ray says {exc}") from exc


class RayAPI:
    """A connection to one Ray cluster through its dashboard. One instance per cluster, reused by every call."""

    def __init__(
        self,
        dashboard_url: str,
        *,
        timeout_s: float,
        source: str = "external",
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
        gcs_address: str | None = None,
    ) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.gcs_address = gcs_address  # known for embedded clusters and GCS addresses; else discovered
        self._gcs_channel: Any = None
        self.timeout_s = timeout_s
        self.source = source
        # Ray's own credentials (token auth header, proxy headers) and TLS settings, for Ray's clients too.
        self.headers = dict(headers or {})
        self.verify = verify
        import httpx  # lazily: importing it costs cold start, and a RayAPI is made on the first tool call

        self._http = httpx.AsyncClient(
            base_url=self.dashboard_url,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": USER_AGENT, **self.headers},
            verify=verify,
            transport=transport,
        )
        # jobs & logs: Ray's JobSubmissionClient, created on first use (it imports ray and checks the version)
        self._jobs_client: Any = None
        self._jobs_lock = asyncio.Lock()
        self._driver_logs: dict[str, LogSource] = {}  # job -> its driver log; a job's driver never moves

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._gcs_channel is not None:
            self._gcs_channel.close()
            self._gcs_channel = None

    # -- raw dashboard access ---------------------------------------------------------------------------

    async def get_json(self, path: str, *, what: str, params: Params = None) -> Any:
        """GET a dashboard endpoint and return its decoded JSON body."""
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            response = await self._http.get(path, params=params)
            response.raise_for_status()
            return response.json()

    async def get_data(self, path: str, *, what: str, params: Params = None) -> Any:
        """GET an endpoint that answers in the dashboard's ``{"result", "msg", "data"}`` envelope."""
        body = await self.get_json(path, what=what, params=params)
        if not isinstance(body, dict) or "data" not in body:
            raise RayRequestFailed(f"The Ray dashboard at {self.dashboard_url} answered {what} without data.")
        if body.get("result") is False:
            raise RayRequestFailed(
                f"The Ray dashboard at {self.dashboard_url} failed {what}: {body.get('msg') or 'no message'}."
            )
        return body["data"]

    async def list_state(
        self,
        resource: str,
        *,
        what: str,
        filters: Sequence[tuple[str, str, str]] = (),
        limit: int = 100,
        detail: bool = False,
    ) -> dict[str, Any]:
        """One State API list call (``/api/v0/<resource>``): returns Ray's result with totals."""
        params: list[tuple[str, str]] = [("limit", str(limit)), ("detail", "1" if detail else "0")]
        params += [("timeout", str(max(1, int(self.timeout_s))))]
        for key, predicate, value in filters:
            params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
        data = await self.get_data(f"/api/v0/{resource}", what=what, params=params)
        return data["result"]

    # -- cluster -----------------------------------------------------------------------------------------

    async def version(self) -> dict[str, Any]:
        return await self.get_json("/api/version", what="the version request (/api/version)")

    async def cluster_status(self, *, max_nodes: int) -> models.ClusterStatus:
        """Nodes, resource use, pending demands and autoscaler state: what ``ray status`` shows."""
        version = await self.version()
        nodes_result = await self.list_state(
            "nodes", what="the node list (/api/v0/nodes)", limit=10_000, detail=True
        )
        status = await self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)")
        pending_pgs = await self.list_state(
            "placement_groups",
            what="the placement group list (/api/v0/placement_groups)",
            filters=[("state", "=", "PENDING")],
            limit=1,
        )
        return shaping.build_cluster_status(
            dashboard_url=self.dashboard_url,
            source=self.source,
            version=version,
            nodes=nodes_result.get("result") or [],
            status=status,
            pending_placement_groups=int(pending_pgs.get("num_filtered") or 0),
            max_nodes=max_nodes,
        )

    # == jobs (submit_job, get_job, list_jobs, wait_for_job, stop_job, delete_job) ====================

    async def _job_client(self) -> Any:
        """Ray's JobSubmissionClient for this cluster, created once (its constructor checks the version)."""
        async with self._jobs_lock:
            if self._jobs_client is None:
                # Importing ray is local work that may take seconds on a busy machine: not bounded by the
                # dashboard timeout. The constructor's version check is a request: bounded.
                cls = await anyio.to_thread.run_sync(bounded_job_client_class, self.timeout_s)
                make = functools.partial(
                    cls, self.dashboard_url, headers=self.headers or None, verify=self.verify
                )
                self._jobs_client = await self._in_thread(make, what="connecting to the Jobs API")
        return self._jobs_client

    async def _in_thread(
        self, fn: Callable[[], Any], *, what: str, job: str | None = None, timeout_s: float | None = None
    ) -> Any:
        """Run one blocking Ray client call off the event loop, bounded in time, with its errors mapped."""
        # Each request of the Job SDK has the dashboard timeout (bounded_job_client_class); this is the backstop.
        limit = timeout_s or self.timeout_s + JOB_SDK_SLACK_S
        with job_sdk_errors(self.dashboard_url, what, job=job):
            try:
                with anyio.fail_after(limit):
                    return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
            except TimeoutError as exc:
                raise DashboardTimeout(
                    f"The Ray job server at {self.dashboard_url} did not finish {what} within {limit:g} s. "
                    "The cluster may be overloaded; retry, or check it with cluster_status."
                ) from exc

    async def _jobs_call(
        self, method: str, *args: Any, what: str, job: str | None = None, **kwargs: Any
    ) -> Any:
        client = await self._job_client()
        return await self._in_thread(
            functools.partial(getattr(client, method), *args, **kwargs), what=what, job=job
        )

    async def job_details(self, job: str) -> dict[str, Any]:
        """Ray's JobDetails of a job, by submission id or job id, as a JSON dict."""
        if not job.strip():
            raise InvalidArgument("The job id is empty. Call list_jobs to see the submission ids that exist.")
        job = check_job_ref(job.strip())
        details = await self._jobs_call("get_job_info", job, what=f"the lookup of job {job!r}", job=job)
        return dict(details.model_dump(mode="json"))

    async def get_job(self, job: str) -> models.JobInfo:
        return shaping.job_info(await self.job_details(job), time.time())

    async def submit_job(
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
    ) -> models.JobSubmitted:
        """Validate the runtime_env, upload local directories, submit, and read back the first status."""
        if not entrypoint.strip():
            raise InvalidArgument(
                "The entrypoint is empty: give the shell command to run, e.g. 'python train.py'."
            )
        if submission_id is not None:
            check_job_ref(submission_id, what="submission_id")
        env, uploaded = shaping.check_runtime_env(runtime_env)
        await self._in_thread(
            functools.partial(_validate_runtime_env_with_ray, env),
            what="runtime_env validation",
            timeout_s=max(30.0, 3 * self.timeout_s),  # local work (imports ray), no request
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
        sid = await self._in_thread(submit, what="the job submission", timeout_s=max(300.0, self.timeout_s))
        info = await self.get_job(str(sid))
        hints = [
            f"Call wait_for_job with job={sid!r} to follow it, and tail_logs with job={sid!r} for its output."
        ]
        return models.JobSubmitted(
            submission_id=str(sid), status=info.status, entrypoint=entrypoint, uploaded=uploaded, hints=hints
        )

    async def list_jobs(
        self, *, statuses: list[str] | None, entrypoint_contains: str | None, limit: int
    ) -> models.JobList:
        jobs = await self._jobs_call("list_jobs", what="the job list")
        dicts = [dict(j.model_dump(mode="json")) for j in jobs]
        return shaping.job_list(
            dicts, statuses=statuses, entrypoint_contains=entrypoint_contains, limit=limit, now_s=time.time()
        )

    async def wait_for_job(
        self, job: str, *, timeout_s: float, on_progress: ProgressFn | None = None, poll_s: float = 1.0
    ) -> models.JobWait:
        """Poll until the job ends or ``timeout_s`` passes, reporting status and newest log line meanwhile."""
        started = time.monotonic()
        details = await self.job_details(job)
        last_line: str | None = None
        with anyio.move_on_after(timeout_s):
            while True:
                last_line = await self.newest_log_line(details) or last_line
                if on_progress is not None:
                    elapsed = round(time.monotonic() - started, 1)
                    note = f"{details.get('status')}" + (f": {last_line}" if last_line else "")
                    await on_progress(elapsed, timeout_s, shaping.truncate_text(note, 300))
                if details.get("status") in models.TERMINAL_JOB_STATUSES:
                    break
                await anyio.sleep(poll_s if time.monotonic() - started < 30 else 2 * poll_s)
                details = await self.job_details(job)
        info = shaping.job_info(details, time.time())
        finished = info.status in models.TERMINAL_JOB_STATUSES
        if finished:
            last_line = await self.newest_log_line(details) or last_line
        hints = [] if finished else [f"Call wait_for_job again to keep waiting, or stop_job to stop {job!r}."]
        return models.JobWait(
            job=info,
            finished=finished,
            timed_out=not finished,
            waited_s=round(time.monotonic() - started, 1),
            last_log_line=last_line,
            hints=hints,
        )

    async def newest_log_line(self, details: Mapping[str, Any]) -> str | None:
        """The last non-empty line of a submitted job's driver log, or None if there is none (yet)."""
        sid, node_id = details.get("submission_id"), details.get("driver_node_id")
        if not sid or not node_id:
            return None
        params = {"node_id": str(node_id), "filename": _job_log_file(str(sid)), "lines": "3"}
        try:
            data, _total = await self._fetch_log(
                "file", params, what=f"the log of job {sid}", hint="", keep=8192
            )
        except RayMCPError:
            return None
        lines = [line for line in shaping.decode_log(data).splitlines() if line.strip()]
        return shaping.truncate_text(lines[-1], 300) if lines else None

    async def stop_job(self, job: str) -> models.JobChange:
        info = await self.get_job(job)
        ident = info.submission_id or job
        if info.status in models.TERMINAL_JOB_STATUSES:
            return models.JobChange(
                job=ident, action="stop", done=False, status=info.status,
                message=f"Nothing to do: job {ident} already ended ({info.status}). Nothing was changed.",
            )  # fmt: skip
        stopped = await self._jobs_call("stop_job", ident, what=f"stopping job {ident!r}", job=ident)
        after = await self.get_job(ident)
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

    async def deletable_job(self, job: str) -> models.JobInfo:
        """The job, if it may be deleted (it has ended); else InvalidArgument saying what to do first."""
        info = await self.get_job(job)
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
        return info

    async def delete_job(self, job: str) -> models.JobChange:
        info = await self.deletable_job(job)
        sid = str(info.submission_id)
        deleted = await self._jobs_call("delete_job", sid, what=f"deleting job {sid!r}", job=sid)
        message = (
            f"Deleted job {sid} ({info.status}): its record and runtime-env data are gone; log files stay "
            "on disk."
            if deleted
            else f"Ray did not delete job {sid}; call get_job to see its state."
        )
        return models.JobChange(job=sid, action="delete", done=bool(deleted), status=None, message=message)

    # == logs (tail_logs) ====================================================================================

    @asynccontextmanager
    async def _log_stream(
        self, media: str, params: Mapping[str, str], *, what: str, hint: str, read_timeout: float | None
    ) -> AsyncIterator[httpx.Response]:
        """Open ``/api/v0/logs/<media>`` as a stream; failures (the endpoint answers 500) become ours."""
        import httpx

        timeout = httpx.Timeout(self.timeout_s, read=read_timeout)
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            request = self._http.build_request("GET", f"/api/v0/logs/{media}", params=params, timeout=timeout)
            response = await self._http.send(request, stream=True)
            try:
                if response.status_code != 200:
                    body = (await response.aread()).decode("utf-8", errors="replace")
                    raise log_request_failed(
                        self.dashboard_url, response.status_code, body, what=what, not_found_hint=hint
                    )
                yield response
            finally:
                await response.aclose()

    async def _fetch_log(
        self, media: str, params: Mapping[str, str], *, what: str, hint: str, keep: int
    ) -> tuple[bytes, int]:
        """Read a log response, keeping only its last ``keep`` bytes. Returns (kept bytes, total bytes)."""
        buf = bytearray()
        total = 0
        async with self._log_stream(
            media, params, what=what, hint=hint, read_timeout=self.timeout_s
        ) as response:
            with dashboard_errors(self.dashboard_url, what, self.timeout_s):
                async for chunk in response.aiter_raw():
                    total += len(chunk)
                    buf += chunk
                    if len(buf) > 2 * keep:
                        del buf[: len(buf) - keep]
        if len(buf) > keep:
            del buf[: len(buf) - keep]
        return bytes(buf), total

    async def resolve_log_sources(self, target: LogTarget) -> list[LogSource]:
        """Turn the target (job, actor, task, pid + node, node + filename) into the file(s) to read."""
        kind = target.kind
        suffixes = ["out", "err"] if target.stream == "both" else [target.stream]
        if kind == "job":
            return [await self._job_log_source(str(target.job))]
        if kind == "actor_id":
            actor_id = str(target.actor_id)
            if not re.fullmatch(r"[0-9a-fA-F]{32}", actor_id):
                raise InvalidArgument(
                    f"{actor_id!r} is not an actor id (32 hex characters). Call list_actors to see the actor "
                    "ids."
                )
            actor = await self._one_state("actors", "actor_id", actor_id)
            if actor is None:
                raise NotFound(f"No actor {actor_id!r} in the cluster at {self.dashboard_url}. {_ACTOR_HINT}")
            desc = f"actor {actor_id}" + (f" ({actor.get('class_name')})" if actor.get("class_name") else "")
            return [
                LogSource(
                    params={"actor_id": actor_id, "suffix": sfx},
                    source=f"std{sfx} of {desc}, worker pid {actor.get('pid')}",
                    node_id=actor.get("node_id"),
                    filename=f"worker-*-{actor.get('pid')}.{sfx}",
                    stream=sfx,
                    hint=_ACTOR_HINT,
                )
                for sfx in suffixes
            ]
        if kind == "task_id":
            task_id = str(target.task_id)
            task = await self._one_state("tasks", "task_id", task_id, attempt=target.attempt)
            if task is None:
                raise NotFound(
                    f"No task {task_id!r} (attempt {target.attempt}) in the cluster at {self.dashboard_url}. "
                    f"{_TASK_HINT}"
                )
            return [
                LogSource(
                    params={"task_id": task_id, "attempt_number": str(target.attempt), "suffix": sfx},
                    source=f"std{sfx} of task {task_id} attempt {target.attempt} ({task.get('name')})",
                    node_id=task.get("node_id"),
                    filename=f"worker-*.{sfx} (the task's byte range)",
                    stream=sfx,
                    hint=_TASK_HINT,
                )
                for sfx in suffixes
            ]
        node_id = await self._resolve_node(str(target.node))
        if kind == "pid":
            hint = f"Is pid {target.pid} a Ray worker on node {node_id}? list_actors shows actors' pids."
            return [
                LogSource(
                    params={"node_id": node_id, "pid": str(target.pid), "suffix": sfx},
                    source=f"std{sfx} of worker pid {target.pid}",
                    node_id=node_id,
                    filename=f"worker-*-{target.pid}.{sfx}",
                    stream=sfx,
                    hint=hint,
                )
                for sfx in suffixes
            ]
        filename = str(target.filename)
        return [
            LogSource(
                params={"node_id": node_id, "filename": filename},
                source=f"file {filename}",
                node_id=node_id,
                filename=filename,
                stream=None,
                hint=await self._similar_files_hint(node_id, filename),
            )
        ]

    async def _job_log_source(self, job: str) -> LogSource:
        cached = self._driver_logs.get(job)
        if cached is not None:  # the fast path of a repeated tail: one request instead of two
            return cached
        details = await self.job_details(job)
        sid = details.get("submission_id")
        if not sid:
            raise InvalidArgument(
                f"Job {job} was not submitted through the Jobs API (type {details.get('type')}): Ray keeps "
                "no driver log file for such a job, its output went to the terminal that ran it. Read its "
                "workers' logs with actor_id or task_id instead."
            )
        node_id = details.get("driver_node_id")
        if not node_id:
            raise NotFound(
                f"Job {sid} has no driver log yet (status {details.get('status')}: its driver has not "
                "started). "
                f"Call wait_for_job with job={sid!r}, then tail_logs again."
            )
        filename = _job_log_file(str(sid))
        source = LogSource(
            params={"node_id": str(node_id), "filename": filename},
            source=f"driver log of job {sid}",
            node_id=str(node_id),
            filename=filename,
            stream=None,
            hint="Call list_jobs to see the jobs that exist.",
        )
        self._driver_logs[job] = source
        return source

    async def _one_state(
        self, resource: str, key: str, value: str, attempt: int | None = None
    ) -> dict[str, Any] | None:
        result = await self.list_state(
            resource, what=f"the lookup of {key} {value}", filters=[(key, "=", value)], limit=100
        )
        rows = result.get("result") or []
        if attempt is not None:
            rows = [r for r in rows if int(r.get("attempt_number") or 0) == attempt]
        return dict(rows[0]) if rows else None

    async def _resolve_node(self, node: str) -> str:
        """A node id (hex) or IP -> the node id; NotFound says how to list the nodes."""
        node = node.strip()
        result = await self.list_state("nodes", what="the node list (/api/v0/nodes)", limit=10_000)
        nodes = result.get("result") or []
        for wanted_key in ("node_id", "node_ip"):
            hits = [n for n in nodes if str(n.get(wanted_key)) == node]
            hits.sort(key=lambda n: n.get("state") != "ALIVE")
            if hits:
                return str(hits[0]["node_id"])
        raise NotFound(
            f"No node {node!r} in the cluster at {self.dashboard_url} (give a node id or IP). "
            "Call cluster_status to see the nodes, with their ids and IPs."
        )

    async def _similar_files_hint(self, node_id: str, filename: str) -> str:
        """Say which files exist on the node, for when ``filename`` is not one of them (best effort)."""
        stem = re.sub(r"[^A-Za-z0-9_.-]", "", filename.rsplit("/", 1)[-1].split(".")[0])[:40]
        files: list[str] = []
        with contextlib.suppress(RayMCPError, KeyError, TypeError):
            for glob in ([f"*{stem}*"] if stem else []) + ["*"]:
                data = await self.get_data(
                    "/api/v0/logs", what="the log file list", params={"node_id": node_id, "glob": glob}
                )
                files = sorted(
                    {f for group in (data.get("result") or {}).values() for f in group if "/" not in f}
                )
                if files:
                    break
        workers = [f for f in files if f.startswith(("worker-", "python-core-worker-"))]
        others = sorted(set(files) - set(workers), key=lambda f: (not f.startswith(_MAIN_LOGS), f))
        listing = ", ".join(others[:25]) + (f", and {len(workers)} worker files" if workers else "")
        return (
            f"Files on node {node_id} include: {listing}."
            if files
            else "Call cluster_status to check the node."
        )

    async def tail_logs(
        self,
        target: LogTarget,
        *,
        lines: int,
        max_bytes: int,
        grep: str | None = None,
        context: int = 0,
        max_scan_mb: int = DEFAULT_MAX_SCAN_MB,
        follow_s: float = 0.0,
        on_progress: ProgressFn | None = None,
    ) -> models.LogTail:
        """The tail (or grep result) of one log, read on the server side; optionally follow it."""
        pattern = _compile_grep(grep) if grep is not None else None
        sources = await self.resolve_log_sources(target)
        budget = max(256, max_bytes // len(sources))
        sections = []
        followed = follow_s
        for src in sources:
            if pattern is not None:
                sections.append(await self._grep(src, pattern, lines=lines, max_bytes=budget, context=context,
                                                 scan_cap=max_scan_mb * 1024**2, follow_s=follow_s,
                                                 on_progress=on_progress))  # fmt: skip
            else:
                sections.append(await self._tail(src, lines=lines, max_bytes=budget, follow_s=follow_s,
                                                 on_progress=on_progress))  # fmt: skip
            follow_s = 0.0  # follow only the first stream (out, for both)
        hints = shaping.log_hints(sections, lines=lines, max_bytes=max_bytes, max_lines=MAX_LOG_LINES)
        if len(sections) == 2 and followed:
            hints.append("follow_s followed stdout only; pass stream='err' to follow stderr.")
        return models.LogTail(sections=sections, hints=hints)

    def _section_base(self, src: LogSource) -> models.LogSection:
        return models.LogSection(
            source=src.source, node_id=src.node_id, filename=src.filename, stream=src.stream,
            lines=[], lines_shown=0, more_before=False,
        )  # fmt: skip

    async def _tail(
        self, src: LogSource, *, lines: int, max_bytes: int, follow_s: float, on_progress: ProgressFn | None
    ) -> models.LogSection:
        keep = 2 * max_bytes + 65_536
        params = {**src.params, "lines": str(lines + 1), "timeout": str(max(1, int(self.timeout_s)))}
        data, total = await self._fetch_log("file", params, what=src.source, hint=src.hint, keep=keep)
        complete = total == len(data) and shaping.count_lines(data) <= lines
        if follow_s > 0:
            data += await self._follow(src, follow_s, on_progress=on_progress, skip_first=bool(data))
        return shaping.tail_section(
            data,
            lines=lines,
            max_bytes=max_bytes,
            complete=complete,
            dropped=max(0, total - len(data)),
            base=self._section_base(src),
            followed_s=follow_s or None,
        )

    async def _grep(
        self,
        src: LogSource,
        pattern: re.Pattern[str],
        *,
        lines: int,
        max_bytes: int,
        context: int,
        scan_cap: int,
        follow_s: float,
        on_progress: ProgressFn | None,
    ) -> models.LogSection:
        scanner = shaping.GrepScanner(pattern, context=context, keep=lines)
        params = {**src.params, "lines": "-1", "timeout": str(max(5, int(self.timeout_s)))}
        complete = True
        async with self._log_stream(
            "file", params, what=src.source, hint=src.hint, read_timeout=self.timeout_s
        ) as r:
            with dashboard_errors(self.dashboard_url, src.source, self.timeout_s):
                async for chunk in r.aiter_raw(1 << 20):
                    scanner.feed(chunk)
                    if scanner.bytes >= scan_cap:
                        complete = False
                        break
        if complete:
            scanner.finish()
        new_lines = 0
        if follow_s > 0:
            before = scanner.line_no
            scanner.feed(
                await self._follow(src, follow_s, on_progress=on_progress, skip_first=scanner.bytes > 0)
            )
            scanner.finish()
            new_lines = scanner.line_no - before
        section = shaping.grep_section(
            scanner,
            max_bytes=max_bytes,
            complete=complete,
            grep=pattern.pattern,
            base=self._section_base(src),
        )
        if follow_s > 0:
            section = section.model_copy(update={"followed_s": follow_s, "new_lines": new_lines})
        return section

    async def _follow(
        self, src: LogSource, follow_s: float, *, on_progress: ProgressFn | None, skip_first: bool
    ) -> bytes:
        """Stream the lines appended to a log during ``follow_s`` seconds, reporting each batch as progress.

        The stream endpoint starts with the file's last line (``lines=1``); that line is already in the
        answer, so it is skipped.
        """
        started = time.monotonic()
        new = bytearray()
        pending = bytearray()
        skipping = skip_first
        params = {**src.params, "lines": "1", "interval": "0.5"}
        with anyio.move_on_after(follow_s):
            async with self._log_stream(
                "stream", params, what=src.source, hint=src.hint, read_timeout=None
            ) as r:
                async for chunk in r.aiter_raw():
                    pending += chunk
                    if skipping:
                        cut = pending.find(b"\n")
                        if cut < 0:
                            continue
                        del pending[: cut + 1]
                        skipping = False
                    cut = pending.rfind(b"\n")
                    if cut < 0:
                        continue
                    batch = bytes(pending[: cut + 1])
                    del pending[: cut + 1]
                    new += batch
                    if on_progress is not None:
                        text = shaping.truncate_text(shaping.decode_log(batch).rstrip("\n"), 1000)
                        await on_progress(round(time.monotonic() - started, 1), follow_s, text)
        return bytes(new + pending)

    # -- cluster state: actors, placement groups, nodes, tasks, serve (issue 4) -------------------------------

    async def _state_page(
        self, resource: str, *, filters: list[tuple[str, str, str]], limit: int, detail: bool
    ) -> tuple[int, int, list[dict[str, Any]], list[str]]:
        """One State API list call: (total, matched, rows, notes). ``matched`` is exact: Ray filters every row."""
        result = await self.list_state(
            resource, what=f"the {resource} list (/api/v0/{resource})", filters=filters, limit=max(1, limit),
            detail=detail,
        )  # fmt: skip
        notes = [w for w in [result.get("partial_failure_warning"), *list(result.get("warnings") or [])] if w]
        rows = list(result.get("result") or [])[:limit]
        return int(result.get("total") or 0), int(result.get("num_filtered") or 0), rows, notes

    async def _summary(
        self, resource: str, *, filters: list[tuple[str, str, str]], **extra: str
    ) -> dict[str, Any]:
        params: list[tuple[str, str]] = [("timeout", str(max(1, int(self.timeout_s))))]
        params += list(extra.items())
        for key, predicate, value in filters:
            params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
        data = await self.get_data(
            f"/api/v0/{resource}/summarize", what=f"the {resource} summary (/api/v0/{resource}/summarize)",
            params=params,
        )  # fmt: skip
        return dict(data.get("result") or {})

    async def list_actors(
        self, *, filters: list[tuple[str, str, str]], limit: int, detail: bool, notes: list[str]
    ) -> models.ActorList:
        # detail=1 always: restarts and the death cause are detail columns in Ray's schema. Only `limit` rows come.
        total, matched, rows, ray_notes = await self._state_page(
            "actors", filters=filters, limit=limit, detail=True
        )
        if len(rows) >= matched:  # every matching actor is on the page: count them here, one request saved
            cluster: Mapping[str, Any] | None = shaping.actor_summary_from_rows(rows)
        else:
            summary = await self._summary("actors", filters=filters)
            cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster")
        return shaping.build_actor_list(
            total=total, matched=matched, rows=rows, summary=cluster, limit=limit, detail=detail,
            notes=notes + ray_notes,
        )  # fmt: skip

    async def get_actor(self, actor_id: str) -> models.Actor:
        check_id("actor", actor_id)
        _total, _matched, rows, _notes = await self._state_page(
            "actors", filters=[("actor_id", "=", actor_id)], limit=1, detail=True
        )
        if not rows:
            raise NotFound(
                f"No actor {actor_id!r} in the cluster at {self.dashboard_url}. "
                "Call list_actors to see the actor ids that exist."
            )
        return shaping.actor_from_state(rows[0], detail=True)

    async def node_capacities(self) -> tuple[list[dict[str, Any]], list[shaping.NodeCapacity]]:
        """Every node (State API) and, for the alive ones, total and available resources."""
        nodes_result, status = await _gather(
            self.list_state("nodes", what="the node list (/api/v0/nodes)", limit=10_000, detail=True),
            self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
        )
        nodes = list(nodes_result.get("result") or [])
        load = ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
        known = {name for node in nodes for name in (node.get("resources_total") or {})}
        usage = {nid: uncamel_resources(u, known) for nid, u in (load.get("usageByNode") or {}).items()}
        return nodes, shaping.node_capacities(nodes, usage)

    async def list_nodes(self, *, state: str | None, limit: int, notes: list[str]) -> models.NodeList:
        nodes, capacities = await self.node_capacities()
        if state:
            nodes = [n for n in nodes if n.get("state") == state]
        return shaping.build_node_list(rows=nodes, capacities=capacities, limit=limit, notes=notes)

    async def pg_status(
        self, *, pg: str | None, state: str | None, job_id: str | None, limit: int, notes: list[str]
    ) -> models.PlacementGroupList:
        filters: list[tuple[str, str, str]] = []
        if pg is not None:
            is_id = re.fullmatch(r"[0-9a-fA-F]{36}", pg) is not None
            filters.append(("placement_group_id" if is_id else "name", "=", pg.lower() if is_id else pg))
        if state:
            filters.append(("state", "=", state))
        if job_id:
            check_id("job", job_id)
            filters.append(("creator_job_id", "=", job_id))
        # One State API page and the GCS's placement group table (states and strategies), side by side; the
        # node capacities only when a shown group is PENDING (they explain why it waits).
        page, table = await _gather(
            self._state_page("placement_groups", filters=filters, limit=limit, detail=True),
            self._pg_table(),
        )
        total, matched, rows, ray_notes = page
        if pg is not None and not rows:
            raise NotFound(
                f"No placement group with id or name {pg!r} in the cluster at {self.dashboard_url}. "
                "Call pg_status without pg to list them."
            )
        if table is None:
            ray_notes.append(
                "Strategies unknown: the GCS did not answer, so STRICT_* constraints are not checked."
            )
            by_state = await self._pg_counts(filters)
        else:
            by_state = (
                {} if any(k == "state" for k, _p, _v in filters) else shaping.pg_state_counts(table, filters)
            )
        strategies = {r["placement_group_id"]: r["strategy"] for r in table or []}
        capacities: list[shaping.NodeCapacity] = []
        if any(row.get("state") == "PENDING" for row in rows):
            _nodes, capacities = await self.node_capacities()
        groups = [
            shaping.placement_group_from_state(
                row, strategy=strategies.get(row.get("placement_group_id", "")), nodes=capacities
            )
            for row in rows
        ]
        return shaping.build_pg_list(
            total=total,
            matched=matched,
            groups=groups,
            by_state=by_state,
            limit=limit,
            notes=notes + ray_notes,
        )

    async def _pg_counts(self, filters: list[tuple[str, str, str]]) -> dict[str, int]:
        """Exact count per state without the GCS: one limit=1 State API call per state (each returns a total)."""
        if any(key == "state" for key, _p, _v in filters):
            return {}
        states = ("PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING")
        pages = await _gather(
            *(self._state_page("placement_groups", filters=[*filters, ("state", "=", s)], limit=1, detail=False)
              for s in states)
        )  # fmt: skip
        return {s: p[1] for s, p in zip(states, pages, strict=True) if p[1]}

    async def _pg_table(self) -> list[dict[str, str]] | None:
        """Every placement group's id, name, state, creator job and strategy, from the GCS in one call (the
        State API omits the strategy and has no per-state summary). None if the GCS is unreachable."""
        try:
            return await anyio.to_thread.run_sync(self._pg_table_sync)
        except Exception:  # the GCS may be unreachable from here; the answer says so
            return None

    def _pg_table_sync(self) -> list[dict[str, str]]:
        from ray.core.generated import common_pb2, gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(self._gcs())
        request = gcs_service_pb2.GetAllPlacementGroupRequest()  # type: ignore[attr-defined]
        reply = stub.GetAllPlacementGroup(request, timeout=self.timeout_s)
        state_name = gcs_pb2.PlacementGroupTableData.PlacementGroupState.Name  # type: ignore[attr-defined]
        return [
            {
                "placement_group_id": d.placement_group_id.hex(),
                "name": d.name,
                "state": state_name(d.state),
                "creator_job_id": d.creator_job_id.hex(),
                "strategy": common_pb2.PlacementStrategy.Name(d.strategy),  # type: ignore[attr-defined]
            }
            for d in reply.placement_group_table_data
        ]

    def _gcs(self) -> Any:
        """A gRPC channel to the GCS (created once). Finds the GCS if we were only given the dashboard."""
        if self._gcs_channel is None:
            from ray._private.grpc_utils import init_grpc_channel

            address = self.gcs_address or find_gcs_for_dashboard(self.dashboard_url, min(self.timeout_s, 3.0))
            if address is None:
                raise ClusterUnavailable(
                    f"Cannot find the GCS of the cluster whose dashboard is {self.dashboard_url}: this call needs it. "
                    "Start ray-mcp with the GCS address (--address host:6379)."
                )
            self.gcs_address = address
            self._gcs_channel = init_grpc_channel(address, asynchronous=False)
        return self._gcs_channel

    async def list_tasks(
        self, *, filters: list[tuple[str, str, str]], limit: int, detail: bool, notes: list[str]
    ) -> models.TaskList:
        total, matched, rows, ray_notes = await self._state_page(
            "tasks", filters=filters, limit=limit, detail=detail
        )
        return shaping.build_task_list(
            total=total, matched=matched, rows=rows, limit=limit, notes=notes + ray_notes
        )

    async def summarize_tasks(self, *, filters: list[tuple[str, str, str]]) -> models.TaskSummary:
        summary = await self._summary("tasks", filters=filters, summary_by="func_name")
        notes = [
            w for w in [summary.get("partial_failure_warning"), *list(summary.get("warnings") or [])] if w
        ]
        failed_counts: dict[str, int] = {}
        samples: dict[str, dict[str, Any]] = {}
        if not any(k == "state" and v != "FAILED" for k, _p, v in filters):
            failed_filters = [f for f in filters if f[0] != "state"] + [("state", "=", "FAILED")]
            # Basic columns only (error_type is one): small rows, up to Ray's 10,000 cap.
            _t, matched, rows, _n = await self._state_page(
                "tasks", filters=failed_filters, limit=10_000, detail=False
            )
            for row in rows:
                key = str(row.get("error_type") or "UNKNOWN")
                failed_counts[key] = failed_counts.get(key, 0) + 1
            if matched > len(rows):
                notes.append(f"Error types counted over the first {len(rows):,} of {matched:,} failed tasks.")
            pages = await _gather(
                *(self._state_page("tasks", filters=[*failed_filters, ("error_type", "=", et)], limit=1, detail=True)
                  for et in list(failed_counts)[:10] if et != "UNKNOWN")
            )  # fmt: skip
            for page in pages:
                if page[2]:
                    samples[str(page[2][0].get("error_type"))] = page[2][0]
        return shaping.build_task_summary(
            summary=summary, failed_counts=failed_counts, samples=samples, notes=notes
        )

    # -- serve --

    async def serve_details(self) -> dict[str, Any]:
        body = await self.get_json(
            "/api/serve/applications/", what="the Serve status (/api/serve/applications/)",
        )  # fmt: skip
        if not isinstance(body, dict):
            raise RayRequestFailed(
                f"The Ray dashboard at {self.dashboard_url} answered the Serve status oddly."
            )
        return body

    async def serve_status(self, *, app: str | None, log_lines: int) -> models.ServeStatus:
        details = await self.serve_details()
        status = shaping.build_serve_status(details, app=app)
        if app is not None and not status.apps:
            names = ", ".join(sorted(details.get("applications") or {})) or "none"
            where = "applications" if status.running else "Serve is not running, so none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.dashboard_url} ({where}: {names}). "
                "Call serve_status without app to see them all."
            )
        if log_lines > 0:
            for application, deployment in shaping.failing_deployments(status):
                await self._attach_replica_log(application.name, deployment, log_lines)
        return status

    async def _attach_replica_log(self, app: str, deployment: models.ServeDeployment, lines: int) -> None:
        """The last lines of a failing replica's Serve log (a replica that is not RUNNING, else the latest DEAD
        one), falling back to its worker's stderr."""
        replica = next((r for r in deployment.replicas if r.state != "RUNNING" and r.node_id), None)
        if replica is not None:
            replica_id, node_id, actor_id = replica.replica_id, replica.node_id, replica.actor_id
        else:
            _t, _m, rows, _n = await self._state_page(
                "actors", filters=[("class_name", "=", f"ServeReplica:{app}:{deployment.name}"), ("state", "=", "DEAD")],
                limit=100, detail=False,
            )  # fmt: skip
            if not rows:
                return
            row = rows[-1]
            replica_id, node_id, actor_id = (
                str(row.get("name", "")).rsplit("#", 1)[-1],
                row.get("node_id"),
                row.get("actor_id"),
            )
        attempts = []
        if replica_id and node_id:
            filename = f"serve/replica_{app}_{deployment.name}_{replica_id}.log"
            attempts.append(({"node_id": node_id, "filename": filename}, f"Serve log {filename}"))
        if actor_id:
            attempts.append(({"actor_id": actor_id, "suffix": "err"}, f"stderr of replica actor {actor_id}"))
        for params, source in attempts:
            try:
                text = await self.log_tail(params, lines=lines)
            except RayRequestFailed:
                continue
            tail = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(":")][-lines:]
            if tail:
                deployment.log_tail = [shaping.head_text(ln, 300) or "" for ln in tail]
                deployment.log_source = source
                return

    async def log_tail(self, selector: Mapping[str, str], *, lines: int) -> str:
        """Last ``lines`` of one log through /api/v0/logs/file (``selector``: actor_id [+ suffix], or node_id +
        filename). Small on purpose: the general tail_logs tool is built elsewhere on the same endpoint and can
        absorb this."""
        params = {**selector, "lines": str(lines), "filter_ansi_code": "true"}
        what = f"the log {dict(selector)} (/api/v0/logs/file)"
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            response = await self._http.get("/api/v0/logs/file", params=params)
            response.raise_for_status()
            return response.text

    async def serve_put(self, config: dict[str, Any]) -> None:
        """PUT a whole Serve config. (Never DELETE /api/serve/applications/: that shuts all of Serve down.)"""
        what = "the Serve deploy (PUT /api/serve/applications/)"
        with dashboard_errors(self.dashboard_url, what, max(self.timeout_s, SERVE_PUT_TIMEOUT_S)):
            response = await self._http.put(
                "/api/serve/applications/", json=config, timeout=max(self.timeout_s, SERVE_PUT_TIMEOUT_S)
            )
            response.raise_for_status()

    async def serve_deploy(self, config: dict[str, Any], *, replace: bool) -> models.ServeChange:
        validated = await anyio.to_thread.run_sync(validate_serve_config, config)
        current = await self.serve_details()
        new_names = [a.get("name", "default") for a in validated.get("applications") or []]
        current_apps = [] if replace else shaping.declared_serve_apps(current, dropping=new_names)
        merged = shaping.merge_serve_config(current_apps, validated, replace=replace)
        await anyio.to_thread.run_sync(validate_serve_config, merged)
        await self.serve_put(merged)
        status = await self.serve_status(app=None, log_lines=0)
        names = [a.get("name", "default") for a in merged["applications"]]
        return models.ServeChange(action="deployed", applications=names, status=status)

    async def serve_delete_app(self, app: str) -> models.ServeChange:
        current = await self.serve_details()
        if app not in details_apps(current):
            names = ", ".join(sorted(details_apps(current))) or "none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.dashboard_url} (applications: {names}). "
                "Call serve_status to see them."
            )
        config = shaping.config_without_app(shaping.declared_serve_apps(current, dropping=[app]), app)
        await self.serve_put(config)
        status = await self.serve_status(app=None, log_lines=0)
        return models.ServeChange(
            action=f"deleted {app}", applications=[a.get("name", "default") for a in config["applications"]],
            status=status,
        )  # fmt: skip

    # -- kill --

    async def kill_actor_and_wait(self, actor: models.Actor, *, no_restart: bool) -> models.ActorKill:
        """Kill, then watch the actor leave its state (bounded wait: the GCS updates within a second or two)."""
        await self.kill_actor(actor.actor_id, no_restart=no_restart)
        after = actor.state
        with anyio.move_on_after(KILL_WAIT_S):
            while after == actor.state:
                await anyio.sleep(0.25)
                after = (await self.get_actor(actor.actor_id)).state
        done = "is now" if after != actor.state else "was killed; Ray still reports it"
        return models.ActorKill(
            actor_id=actor.actor_id, done=True, no_restart=no_restart, state_before=actor.state, state_after=after,
            message=f"Actor {actor.actor_id} ({actor.class_name}) {done} {after}.",
        )  # fmt: skip

    async def kill_actor(self, actor_id: str, *, no_restart: bool) -> None:
        """Force-kill an actor through the GCS (KillActorViaGcs): what ray.kill does, without a driver."""
        await anyio.to_thread.run_sync(self._kill_actor_sync, actor_id, no_restart)

    def _kill_actor_sync(self, actor_id: str, no_restart: bool) -> None:
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(self._gcs())
        request = gcs_service_pb2.KillActorViaGcsRequest(  # type: ignore[attr-defined]
            actor_id=bytes.fromhex(actor_id), force_kill=True, no_restart=no_restart
        )
        try:
            reply = stub.KillActorViaGcs(request, timeout=self.timeout_s)
        except Exception as exc:  # grpc.RpcError: the GCS did not take the request
            raise RayRequestFailed(
                f"The GCS at {self.gcs_address} did not kill actor {actor_id}: {exc}"
            ) from exc
        if reply.status.code != 0:
            raise RayRequestFailed(
                f"The GCS at {self.gcs_address} refused to kill actor {actor_id}: {reply.status.message}"
            )

    # == diagnosis (diagnose_job, cluster_health) ===========================================================

    async def _optional(self, awaitable: Awaitable[Any], notes: list[str], what: str) -> Any:
        """One piece of evidence: a failure to get it becomes a note, not an error of the whole diagnosis."""
        try:
            return await awaitable
        except RayMCPError as exc:
            notes.append(f"Could not check {what}: {first_sentence(str(exc))}")
            return None

    async def diagnose_job(self, job: str, *, max_bytes: int) -> tuple[models.JobDiagnosis, str]:
        """Gather everything about one job concurrently, then rank the findings (diagnosis.diagnose_job)."""
        await anyio.to_thread.run_sync(import_ray_once)  # before threads that import parts of ray at once
        details = await self.job_details(job)
        info = shaping.job_info(details, time.time())
        notes: list[str] = []
        job_id = info.job_id
        sid = info.submission_id
        by_job = [("job_id", "=", job_id)] if job_id else None
        driver, dead, pending, supervisor, tasks, pgs, capacities, status, ev = await _gather(
            self._optional(self.tail_logs(LogTarget(kind="job", job=sid or job), lines=400, max_bytes=96_000),
                           notes, "the driver log"),
            self._optional(self.list_actors(filters=[*by_job, ("state", "=", "DEAD")], limit=6, detail=True, notes=[]),
                           notes, "the job's dead actors") if by_job else _none(),
            self._optional(self.list_actors(filters=[*by_job, ("state", "=", "PENDING_CREATION")], limit=3,
                                            detail=True, notes=[]), notes, "the job's pending actors") if by_job else _none(),
            self._optional(self.list_actors(filters=[("name", "=", f"_ray_internal_job_actor_{sid}")], limit=1,
                                            detail=True, notes=[]), notes, "the job's supervisor") if sid else _none(),
            self._optional(self.summarize_tasks(filters=list(by_job)), notes, "the job's failed tasks") if by_job else _none(),
            self._optional(self.pg_status(pg=None, state="PENDING", job_id=job_id, limit=3, notes=[]),
                           notes, "the job's placement groups") if job_id else _none(),
            self._optional(self.node_capacities(), notes, "the nodes"),
            self._optional(self.cluster_status(max_nodes=1), notes, "pending demands")
            if info.status in ("PENDING", "RUNNING") else _none(),
            causal_gather.gather_job(self, details, None),
        )  # fmt: skip
        driver_lines = [line for section in driver.sections for line in section.lines] if driver else None
        ev.driver_lines = driver_lines
        await causal_gather.phase_two(self, ev)
        evidence = diagnosis.JobEvidence(
            info=info,
            entrypoint_resources=entrypoint_resources(details),
            driver_lines=driver_lines,
            dead_actors=list(dead.actors) if dead else [],
            dead_actors_total=dead.matched if dead else 0,
            pending_actors=list(pending.actors) if pending else [],
            supervisor=supervisor.actors[0] if supervisor and supervisor.actors else None,
            failed_tasks=list(tasks.failed_by_error) if tasks else [],
            pending_pgs=list(pgs.placement_groups) if pgs else [],
            node_totals=[dict(c.total) for c in capacities[1]] if capacities else [],
            infeasible_demands=[d for d in status.pending_demands if d.infeasible] if status else [],
        )
        crashed = [a for a in evidence.dead_actors if a.death_cause and a.death_cause.error_type][:2]
        logs = await _gather(
            *(self._optional(self.tail_logs(LogTarget(kind="actor_id", actor_id=a.actor_id), lines=60, max_bytes=8_000,
                                            grep=r"Traceback|Error|Exception", context=2), notes, f"the log of actor {a.actor_id}")
              for a in crashed)
        )  # fmt: skip
        for actor, tail in zip(crashed, logs, strict=True):
            if tail is not None:
                evidence.actor_log_lines[actor.actor_id] = [
                    line for sec in tail.sections for line in sec.lines
                ]
        findings = diagnosis.diagnose_job(evidence)
        return causal_report.job_report(job, info, ev, findings, notes, max_bytes=max_bytes)

    async def cluster_health(self, *, max_bytes: int) -> tuple[models.ClusterHealth, str]:
        """What is wrong in the cluster right now, from every angle at once, ranked by severity."""
        await anyio.to_thread.run_sync(import_ray_once)  # before threads that import parts of ray at once
        notes: list[str] = []
        checked = ["nodes", "resource demands", "placement groups", "jobs", "actors", "tasks", "Serve"]
        status, jobs, dead, restarting, alive, tasks, pgs, serve, ev = await _gather(
            self._optional(self.cluster_status(max_nodes=50), notes, "nodes and demands"),
            self._optional(self.list_jobs(statuses=["FAILED"], entrypoint_contains=None, limit=5), notes, "failed jobs"),
            self._optional(self.list_actors(filters=[("state", "=", "DEAD")], limit=100, detail=True, notes=[]),
                           notes, "dead actors"),
            self._optional(self.list_actors(filters=[("state", "=", "RESTARTING")], limit=10, detail=True, notes=[]),
                           notes, "restarting actors"),
            self._optional(self.list_actors(filters=[("state", "=", "ALIVE")], limit=200, detail=True, notes=[]),
                           notes, "actor restarts"),
            self._optional(self.summarize_tasks(filters=[]), notes, "failed tasks"),
            self._optional(self.pg_status(pg=None, state="PENDING", job_id=None, limit=5, notes=[]), notes,
                           "placement groups"),
            self._optional(self.serve_status(app=None, log_lines=5), notes, "Serve"),
            causal_gather.gather_cluster(self),
        )  # fmt: skip
        recent = [j for j in (jobs.jobs if jobs else []) if j.submission_id or j.job_id][:5]
        failed_jobs = await _gather(
            *(
                self._optional(self.get_job(j.submission_id or j.job_id or ""), notes, "a failed job")
                for j in recent
            )
        )
        looping = [a for a in (alive.actors if alive else []) if (a.restarts or 0) >= 3]
        evidence = diagnosis.HealthEvidence(
            status=status,
            failed_jobs=[j for j in failed_jobs if j is not None],
            dead_actors=list(dead.actors) if dead else [],
            dead_actors_total=dead.matched if dead else 0,
            restarting=[*(restarting.actors if restarting else []), *looping],
            task_errors=list(tasks.failed_by_error) if tasks else [],
            serve=serve if serve is not None and serve.running else None,
            pending_pgs=list(pgs.placement_groups) if pgs else [],
            pending_pgs_total=pgs.matched if pgs else 0,
        )
        findings = diagnosis.cluster_health(evidence)
        checked.append("cluster events")
        return causal_report.health_report(
            self.dashboard_url, ev, findings, checked, notes, max_bytes=max_bytes
        )


_RAY_IMPORT = threading.Lock()


def import_ray_once() -> None:
    """Import ray (and the modules the gathering threads use) in one thread: two threads importing parts of ray
    at the same time can deadlock in the import system (_DeadlockError)."""
    with _RAY_IMPORT:
        import ray.core.generated.gcs_service_pb2
        import ray.job_submission  # noqa: F401


async def dashboard_answers(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> bool:
    """Is there a Ray dashboard at this URL? (Never raises.)"""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as http:
            r = await http.get(f"{url}/api/version")
            return r.status_code == 200 and "ray_version" in r.json()
    except (httpx.HTTPError, ValueError):
        return False


async def head_node_alive(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> bool:
    """Does the dashboard at this URL answer the State API with at least one ALIVE node? (Never raises.)

    With Ray's token authentication on (a ``~/.ray/auth_token`` makes ``ray start`` turn it on), the probe
    needs the token too, or it would wait for a head that is in fact ready.
    """
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as http:
            r = await http.get(f"{url}/api/v0/nodes", params={"limit": 10})
            nodes = r.json()["data"]["result"]["result"]
            return r.status_code == 200 and any(n.get("state") == "ALIVE" for n in nodes)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return False


def dashboard_url_from_gcs(gcs_address: str, timeout_s: float) -> str | None:
    """Ask the GCS where the dashboard listens (Ray records it in its internal KV). Imports Ray: slow."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    client = GcsClient(address=gcs_address)
    value = client.internal_kv_get(b"dashboard", b"dashboard", timeout=timeout_s)
    if not value:
        return None
    address = value.decode()
    return address if re.match(r"^https?://", address) else f"http://{address}"


# -- the live API reference (imports the installed Ray on demand) -----------------------------------------

API_DOC_MAX_CHARS = 12_000
API_MEMBERS_MAX = 60


def describe_symbol(qualified_name: str) -> str:
    """Markdown with the signature and docstring of a public Ray symbol, read from the installed Ray.

    Raises LookupError, whose message lists close matches, for a name that does not exist.
    """
    import importlib
    import inspect

    name = qualified_name.strip()
    parts = name.split(".")
    if parts[0] != "ray" or not all(p.isidentifier() for p in parts):
        raise LookupError(f"{qualified_name!r} is not a Ray name. Ask for a dotted name such as ray.remote.")
    if any(p.startswith("_") for p in parts[1:]):
        raise LookupError(f"{qualified_name!r} is private; only public Ray names are described.")

    try:
        obj: Any = importlib.import_module("ray")
    except ImportError as exc:
        raise LookupError(f"Ray cannot be imported here: {exc}") from exc
    obj = _resolve(obj, parts, 1)
    if obj is _MISSING:
        parent, i = _deepest_parent(parts)
        public = [m for m in dir(parent) if not m.startswith("_")]
        close = difflib.get_close_matches(parts[i], public, n=5, cutoff=0.5)
        prefix = ".".join(parts[:i])
        hint = (
            ", ".join(f"{prefix}.{c}" for c in close) or f"none; read ray-docs://api/{prefix} for its members"
        )
        raise LookupError(f"{name} does not exist in Ray {_ray_version()}. Close matches: {hint}.")

    kind = "module" if inspect.ismodule(obj) else "class" if inspect.isclass(obj) else "function"
    if not inspect.ismodule(obj) and not inspect.isclass(obj) and not callable(obj):
        kind = type(obj).__name__
    lines = [f"# {name}", "", f"{kind} in Ray {_ray_version()} (read from the installed package)", ""]
    target = getattr(obj, "__wrapped__", obj)
    with contextlib.suppress(TypeError, ValueError):
        if callable(obj) and not inspect.ismodule(obj):
            lines += ["```python", f"{parts[-1]}{inspect.signature(target)}", "```", ""]
    with contextlib.suppress(TypeError, OSError):
        source = inspect.getsourcefile(target)
        if source:
            _, line = inspect.getsourcelines(target)
            lines += [f"Defined in `{source.split('site-packages/')[-1]}` line {line}.", ""]
    doc = inspect.getdoc(obj) or "(no docstring)"
    if len(doc) > API_DOC_MAX_CHARS:
        doc = doc[:API_DOC_MAX_CHARS] + f"\n\n[docstring cut at {API_DOC_MAX_CHARS} characters]"
    lines += [doc, ""]
    if inspect.ismodule(obj) or inspect.isclass(obj):
        members = getattr(obj, "__all__", None) if inspect.ismodule(obj) else None
        members = sorted(members or (m for m in vars(obj) if not m.startswith("_")))
        if members:
            shown = members[:API_MEMBERS_MAX]
            lines.append(f"## Public members ({len(members)})")
            lines += [f"- `{name}.{m}`" for m in shown]
            if len(members) > len(shown):
                lines.append(f"- … {len(members) - len(shown)} more")
    return "\n".join(lines).rstrip() + "\n"


_MISSING = object()


def _resolve(obj: Any, parts: list[str], i: int) -> Any:
    """Walk ``parts[i:]`` from ``obj``. The package namespace wins over a submodule of the same name
    (``ray.serve.deployment`` is the decorator), with a fall back to the submodule when the rest of the
    name only exists there (``ray.util.placement_group.placement_group``)."""
    import importlib

    if i == len(parts):
        return obj
    candidates = []
    if hasattr(obj, parts[i]):
        candidates.append(getattr(obj, parts[i]))
    try:
        module = importlib.import_module(".".join(parts[: i + 1]))
        if all(module is not c for c in candidates):
            candidates.append(module)
    except ImportError:
        pass
    for candidate in candidates:
        found = _resolve(candidate, parts, i + 1)
        if found is not _MISSING:
            return found
    return _MISSING


def _deepest_parent(parts: list[str]) -> tuple[Any, int]:
    """The object of the longest prefix of ``parts`` that resolves, and the index of the first part that does not."""
    import importlib

    obj: Any = importlib.import_module("ray")
    for i in range(1, len(parts)):
        found = _resolve(obj, parts[: i + 1], i)
        if found is _MISSING:
            return obj, i
        obj = found
    return obj, len(parts) - 1


def _ray_version() -> str:
    from importlib.metadata import version

    return version("ray")


# -- cluster state helpers (issue 4) -----------------------------------------------------------------------

SERVE_PUT_TIMEOUT_S = 30.0
KILL_WAIT_S = 10.0
# Ray's ids are hex strings of fixed length: a malformed one gets a clear error before any request.
ID_HEX_LENGTHS = {"actor": 32, "placement group": 36, "node": 56, "job": 8, "task": 48}


def check_id(kind: str, value: str) -> str:
    """Reject a malformed Ray id with a message that says what a good one looks like."""
    length = ID_HEX_LENGTHS[kind]
    if not re.fullmatch(rf"[0-9a-f]{{{length}}}", value or ""):
        raise InvalidArgument(
            f"{value!r} is not {'an' if kind[0] in 'aeiou' else 'a'} {kind} id: Ray {kind} ids are {length} lowercase hex characters. "
            f"Copy one whole from the list tool's answer."
        )
    return value


JOB_SDK_SLACK_S = 3.0
UPLOAD_READ_TIMEOUT_S = 300.0


def bounded_job_client_class(timeout_s: float) -> type:
    """Ray's JobSubmissionClient with a timeout on every request.

    Ray's client sends its requests without one, so a dashboard that accepts and never answers would hold a
    worker thread forever (and enough of them would starve every other call). Reads get the dashboard
    timeout; a POST or DELETE (a submission with an upload, a stop) may wait for the job server longer.
    """
    from ray.job_submission import JobSubmissionClient  # lazily, like all of ray

    class BoundedJobSubmissionClient(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
            read = timeout_s if method.upper() == "GET" else max(timeout_s, UPLOAD_READ_TIMEOUT_S)
            kwargs.setdefault("timeout", (timeout_s, read))
            return super()._do_request(method, endpoint, **kwargs)

    return BoundedJobSubmissionClient


# A job id goes into the job server's URL path (/api/jobs/<id>): '#', '?', '/' or '%' would address another
# resource (an id of '#' asks for the job list), so they are refused before any request.
_JOB_REF_UNSAFE = re.compile(r"[/?#%\\\s\x00-\x1f\x7f]")
MAX_JOB_REF = 256


def check_job_ref(job: str, *, what: str = "job id") -> str:
    if len(job) > MAX_JOB_REF or _JOB_REF_UNSAFE.search(job):
        shown = job if len(job) <= 80 else job[:80] + "…"
        raise InvalidArgument(
            f"{shown!r} is not a valid {what}: ids are at most {MAX_JOB_REF} characters without spaces, '/', "
            "'?', '#', '%' or '\\'. Submission ids look like raysubmit_…, job ids like 02000000; call list_jobs "
            "to see them."
        )
    return job


async def _gather(*awaitables: Awaitable[Any]) -> list[Any]:
    """Run independent dashboard calls concurrently and return their results in order (errors propagate)."""
    results: list[Any] = [None] * len(awaitables)

    async def run(i: int, aw: Awaitable[Any]) -> None:
        results[i] = await aw

    try:
        async with anyio.create_task_group() as tg:
            for i, aw in enumerate(awaitables):
                tg.start_soon(run, i, aw)
    except BaseExceptionGroup as group:
        # Several calls failed together (a dashboard down fails them all): one clear error, not a group,
        # which mcp would report as a crash. Anything that is not one of ours still propagates as it was.
        ours = [e for e in _leaves(group) if isinstance(e, RayMCPError)]
        if ours and len(ours) == len(_leaves(group)):
            raise ours[0] from group
        raise
    return results


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def find_gcs_for_dashboard(dashboard_url: str, timeout_s: float) -> str | None:
    """The GCS whose dashboard is ``dashboard_url``: try host:6379, then (for a local dashboard) every GCS
    process on this machine, and keep the one that reports this dashboard. Imports Ray: slow, run in a thread."""
    from ray._private.services import find_gcs_addresses

    parts = urlsplit(dashboard_url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    candidates = [f"{host}:6379"]
    if host in ("127.0.0.1", "localhost", "::1") or host == socket.gethostbyname(socket.gethostname()):
        candidates += sorted(f"127.0.0.1:{a.rsplit(':', 1)[1]}" for a in find_gcs_addresses())
    for candidate in candidates:
        reported = _gcs_reported_dashboard(candidate, timeout_s)
        if reported and urlsplit(reported if "://" in reported else f"http://{reported}").port == port:
            return candidate
    return None


def _gcs_reported_dashboard(gcs_address: str, timeout_s: float) -> str | None:
    import grpc
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = init_grpc_channel(gcs_address, asynchronous=False)
    try:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        kv_get = gcs_service_pb2.InternalKVGetRequest  # type: ignore[attr-defined]
        request = kv_get(key=b"dashboard", namespace=b"dashboard")
        reply = stub.InternalKVGet(request, timeout=timeout_s)
        return reply.value.decode() if reply.value else None
    except grpc.RpcError:
        return None
    finally:
        channel.close()


def validate_serve_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check a Serve config against Ray's own schema before sending it. Imports Ray Serve: run in a thread."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    if not isinstance(config, Mapping) or not isinstance(config.get("applications"), list):
        raise InvalidArgument(
            'A Serve config is {"applications": [{"name": ..., "import_path": "module:app", "route_prefix": ..., '
            '"runtime_env": {...}, "deployments": [...]}]}; the one given has no "applications" list.'
        )
    try:
        ServeDeploySchema.model_validate(dict(config))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
        raise InvalidArgument(f"The Serve config is not valid, nothing was deployed: {problems}.") from exc
    except ValueError as exc:
        raise InvalidArgument(f"The Serve config is not valid, nothing was deployed: {exc}.") from exc
    return dict(config)


def details_apps(details: Mapping[str, Any]) -> list[str]:
    return list((details.get("applications") or {}).keys())


async def _none() -> None:
    return None


def first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


def entrypoint_resources(details: Mapping[str, Any]) -> dict[str, float]:
    """What a job's driver asks for: entrypoint_num_cpus/gpus/memory and entrypoint_resources."""
    out = {str(k): float(v) for k, v in (details.get("entrypoint_resources") or {}).items()}
    for key, name in (
        ("entrypoint_num_cpus", "CPU"),
        ("entrypoint_num_gpus", "GPU"),
        ("entrypoint_memory", "memory"),
    ):
        if details.get(key):
            out[name] = float(details[key])
    return out
