"""The core of the Ray adapter: the dashboard's HTTP API (JSON, envelopes, State API lists, streams) and
concurrency helpers. Every area (jobs, logs, actors, ...) holds the one ``Dashboard`` of its cluster.

Every HTTP failure becomes one of our ``ToolError`` subclasses (``errors.dashboard_errors``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pydantic_core

from ray_mcp.errors import (
    RayMCPError,
    RayRequestFailed,
    dashboard_errors,
    log_request_failed,
)
from ray_mcp.guard.redaction import SECRETS, hold_job, job_owner
from ray_mcp.limits import DASHBOARD_CONNECTIONS
from ray_mcp.shaping.common import source_cap_note
from ray_mcp.sources import scope
from ray_mcp.sources.query import Filter, encode

USER_AGENT = "ray-mcp"
Params = Any  # what httpx accepts as query params
ProgressFn = Callable[[float, float, str], Awaitable[None]]
JOB_SECRETS_TTL_S = 30.0  # how often a log of no known job re-reads every job's env_vars


class Dashboard:
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
    ) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.timeout_s = timeout_s
        self.source = source
        # Ray's own credentials (token auth header, proxy headers) and TLS settings, for Ray's clients too.
        self.headers = dict(headers or {})
        self.verify = verify
        self.http = httpx.AsyncClient(
            base_url=self.dashboard_url,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": USER_AGENT, **self.headers},
            verify=http_verify(self.dashboard_url, verify),
            transport=transport,
            limits=httpx.Limits(max_connections=DASHBOARD_CONNECTIONS, max_keepalive_connections=20),
        )
        # the secret registry's view of the jobs' env_vars (learn_job_secrets)
        self._jobs_secrets_lock = asyncio.Lock()
        self._jobs_learned_at = -1e9
        self._jobs_checked: dict[str, float] = {}

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get_json(self, path: str, *, what: str, params: Params = None) -> Any:
        """GET a dashboard endpoint and return its decoded JSON body: once per call (sources/scope.py), so every
        asker of the same path and query within one tool call shares one request, and its failure."""
        key = ("GET", self.dashboard_url, path, _query_key(params))
        return await scope.shared(key, lambda: self._get_json(path, what=what, params=params))

    async def _get_json(self, path: str, *, what: str, params: Params) -> Any:
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            response = await self.http.get(path, params=params)
            response.raise_for_status()
            return decode_json(response.content)

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        what: str,
        not_found: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Any dashboard request answered in JSON; ``not_found`` is the message for an HTTP 404. A GET is shared
        within the call like get_json's; any other method is a write, after which the call reads afresh."""
        timeout = timeout_s or self.timeout_s

        async def send() -> Any:
            with dashboard_errors(self.dashboard_url, what, timeout, not_found=not_found):
                response = await self.http.request(method, path, timeout=timeout)
                response.raise_for_status()
                return decode_json(response.content)

        if method.upper() == "GET":
            return await scope.shared(("GET", self.dashboard_url, path, ()), send)
        scope.fresh()
        try:
            return await send()
        finally:
            scope.fresh()

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
        filters: Sequence[Filter] = (),
        limit: int = 100,
        detail: bool = False,
    ) -> dict[str, Any]:
        """One State API list call (``/api/v0/<resource>``): returns Ray's result with totals."""
        params: list[tuple[str, str]] = [("limit", str(limit)), ("detail", "1" if detail else "0")]
        params += [("timeout", str(max(1, int(self.timeout_s))))]
        params += encode(filters)
        data = await self.get_data(f"/api/v0/{resource}", what=what, params=params)
        result = data["result"]
        rows = result.get("result") if isinstance(result, dict) else None
        if isinstance(rows, list):  # what these rows' logs and errors may print: their jobs' env_vars
            await self.learn_job_secrets(
                {
                    str(r[k])
                    for r in rows
                    if isinstance(r, dict)
                    for k in ("job_id", "creator_job_id")
                    if r.get(k)
                }
            )
        return result

    async def learn_job_secrets(self, job_ids: set[str] | None = None) -> None:
        """Make sure the secret registry knows the env_vars of these jobs (None: of every job, at most once
        per JOB_SECRETS_TTL_S). One request for the whole job list, only when a job is new; best effort."""
        now = time.monotonic()
        if job_ids is None:
            if now - self._jobs_learned_at < JOB_SECRETS_TTL_S:
                return
        else:
            job_ids = {
                j
                for j in job_ids
                if not SECRETS.holds(job_owner(self.dashboard_url, j))
                and self._jobs_checked.get(j, -1e9) < now - JOB_SECRETS_TTL_S
            }
            if not job_ids:
                return
        async with self._jobs_secrets_lock:
            if job_ids is None and time.monotonic() - self._jobs_learned_at < JOB_SECRETS_TTL_S:
                return
            with contextlib.suppress(RayMCPError):
                await self.job_rows()
                self._jobs_learned_at = time.monotonic()
            for job in job_ids or ():
                self._jobs_checked[job] = (
                    now  # not a Jobs API job (or unreadable): not asked again for a while
                )

    async def job_rows(self) -> list[dict[str, Any]]:
        """Every job's JobDetails (GET /api/jobs/), their env_vars learnt as secrets; concurrent askers (a
        health check's failed jobs, its evidence graph, the secret registry) share the read."""

        async def read() -> list[dict[str, Any]]:
            began = time.monotonic()
            jobs = await self.request_json("GET", "/api/jobs/", what="the job list (/api/jobs/)")
            dicts = [dict(j) for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []
            for details in dicts:
                hold_job(self.dashboard_url, details)
            if isinstance(jobs, list):  # the jobs no longer listed were deleted: their logs are gone too
                alive = {
                    job_owner(self.dashboard_url, str(d[k]))
                    for d in dicts
                    for k in ("submission_id", "job_id")
                    if d.get(k)
                }
                SECRETS.drop_owners_except(job_owner(self.dashboard_url, ""), alive, began)
            return dicts

        rows: list[dict[str, Any]] = await scope.shared(("jobs", self.dashboard_url), read)
        return rows

    async def state_page(
        self, resource: str, *, filters: list[Filter], limit: int, detail: bool
    ) -> tuple[int, int, list[dict[str, Any]], list[str]]:
        """One State API list call: (total, matched, rows, notes). ``matched`` is exact: Ray filters every row."""
        result = await self.list_state(
            resource,
            what=f"the {resource} list (/api/v0/{resource})",
            filters=filters,
            limit=max(1, limit),
            detail=detail,
        )
        notes = [w for w in [result.get("partial_failure_warning"), *list(result.get("warnings") or [])] if w]
        capped = source_cap_note(resource.replace("_", " "), result)
        notes += [capped] if capped else []
        rows = list(result.get("result") or [])[:limit]
        return int(result.get("total") or 0), int(result.get("num_filtered") or 0), rows, notes

    async def summary(self, resource: str, *, filters: list[Filter], **extra: str) -> dict[str, Any]:
        params: list[tuple[str, str]] = [("timeout", str(max(1, int(self.timeout_s))))]
        params += list(extra.items())
        params += encode(filters)
        data = await self.get_data(
            f"/api/v0/{resource}/summarize",
            what=f"the {resource} summary (/api/v0/{resource}/summarize)",
            params=params,
        )
        return dict(data.get("result") or {})

    async def one_state(
        self, resource: str, key: str, value: str, attempt: int | None = None
    ) -> dict[str, Any] | None:
        result = await self.list_state(
            resource, what=f"the lookup of {key} {value}", filters=[(key, "=", value)], limit=100
        )
        rows = result.get("result") or []
        if attempt is not None:
            rows = [r for r in rows if int(r.get("attempt_number") or 0) == attempt]
        return dict(rows[0]) if rows else None

    @asynccontextmanager
    async def log_stream(
        self, media: str, params: Mapping[str, str], *, what: str, hint: str, read_timeout: float | None
    ) -> AsyncIterator[httpx.Response]:
        """Open ``/api/v0/logs/<media>`` as a stream; failures (the endpoint answers 500) become ours."""
        timeout = httpx.Timeout(self.timeout_s, read=read_timeout)
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            request = self.http.build_request("GET", f"/api/v0/logs/{media}", params=params, timeout=timeout)
            response = await self.http.send(request, stream=True)
            try:
                if response.status_code != 200:
                    body = (await response.aread()).decode("utf-8", errors="replace")
                    raise log_request_failed(
                        self.dashboard_url, response.status_code, body, what=what, not_found_hint=hint
                    )
                yield response
            finally:
                await response.aclose()

    async def fetch_log(
        self, media: str, params: Mapping[str, str], *, what: str, hint: str, keep: int
    ) -> tuple[bytes, int]:
        """Read a log response, keeping only its last ``keep`` bytes. Returns (kept bytes, total bytes); once
        per call, like every GET."""
        key = ("LOG", self.dashboard_url, media, _query_key(params), keep)
        return await scope.shared(
            key, lambda: self._fetch_log(media, params, what=what, hint=hint, keep=keep)
        )

    async def _fetch_log(
        self, media: str, params: Mapping[str, str], *, what: str, hint: str, keep: int
    ) -> tuple[bytes, int]:
        buf = bytearray()
        total = 0
        async with self.log_stream(
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

    def authorization(self) -> str | None:
        """This cluster's own Authorization (settings.dashboard_request_headers), never the process's token."""
        return next((v for k, v in self.headers.items() if k.lower() == "authorization"), None)


def _query_key(params: Params) -> tuple[tuple[str, str], ...]:
    """A query's parameters in one order, so that two askers of the same read share it."""
    return tuple(sorted(httpx.QueryParams(params).multi_items())) if params else ()


def http_verify(dashboard_url: str, verify: bool | str) -> Any:
    """How the HTTP client checks TLS. A plain-http dashboard reached without a proxy never makes a TLS
    connection (the client follows no redirects): then no CA bundle is loaded (loading one is most of a new
    client's cost), and the context given verifies against no CA at all, so any TLS connection it were asked
    to make would fail."""
    if verify is True and dashboard_url.startswith("http://") and not urllib.request.getproxies():
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, hostname checked, no CA loaded
    return verify


async def gather(*awaitables: Awaitable[Any]) -> list[Any]:
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


async def nothing() -> None:
    return None


def decode_json(body: bytes) -> Any:
    """A dashboard answer's JSON, by pydantic-core's parser: the same values as json.loads, faster, on the
    event loop (``/api/cluster_status`` is a megabyte at a thousand placement groups). What it refuses (a lone surrogate escape, which Python's json writes for a string holding one) goes to json.loads,
    which raises ValueError for what is not JSON."""
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        return json.loads(body)


async def dashboard_answers(url: str, timeout_s: float, headers: Mapping[str, str] | None = None) -> bool:
    """Is there a Ray dashboard at this URL? (Never raises.)"""
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
    try:
        async with httpx.AsyncClient(timeout=timeout_s, headers=headers) as http:
            r = await http.get(f"{url}/api/v0/nodes", params={"limit": 10})
            nodes = r.json()["data"]["result"]["result"]
            return r.status_code == 200 and any(n.get("state") == "ALIVE" for n in nodes)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return False
