"""The dashboard's HTTP client: one ``httpx.AsyncClient`` per cluster, JSON and the dashboard's envelope, log
streams, and the concurrency helpers. The sources of each dashboard API (state.py, jobs.py, serve.py, logs.py,
routes.py) send their requests through it.

Every GET is made once per call (sources/scope.py); any other request is a write, after which the call reads
afresh. Every HTTP failure becomes one of our ``ToolError`` subclasses (``errors.dashboard_errors``)."""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
from ray_mcp.limits import DASHBOARD_CONNECTIONS
from ray_mcp.sources import scope
from ray_mcp.sources.ids import plain_names

USER_AGENT = "ray-mcp"
Params = Any  # what httpx accepts as query params
ProgressFn = Callable[[float, float, str], Awaitable[None]]


@dataclass(frozen=True)
class Answer:
    """A dashboard answer whose status carries meaning (a route that answers 403 or 500 on purpose)."""

    status: int
    text: str
    location: str | None = None  # where a redirect points (/worker/gpu_profile answers one to its trace file)

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return decode_json(self.text.encode())


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

    async def aclose(self) -> None:
        await self.http.aclose()

    async def get_json(
        self, path: str, *, what: str, params: Params = None, not_found: str | None = None
    ) -> Any:
        """GET a dashboard endpoint and return its decoded JSON body: once per call (sources/scope.py), so every
        asker of the same path and query within one tool call shares one request, and its failure.
        ``not_found`` is the message for an HTTP 404."""
        key = ("GET", self.dashboard_url, path, _query_key(params))

        async def read() -> Any:
            with dashboard_errors(self.dashboard_url, what, self.timeout_s, not_found=not_found):
                response = await self.http.get(path, params=params)
                response.raise_for_status()
                return plain_names(decode_json(response.content))

        return await scope.shared(key, read)

    async def get_answer(
        self,
        path: str,
        *,
        what: str,
        params: Params = None,
        timeout_s: float | None = None,
        shared: bool = True,
    ) -> Answer:
        """GET a route whose status the caller reads (any status comes back; only a failure to get an answer
        raises). ``shared=False`` for what is measured, not read (a stack dump, a profile)."""
        timeout = timeout_s or self.timeout_s

        async def read() -> Answer:
            with dashboard_errors(self.dashboard_url, what, timeout):
                response = await self.http.get(path, params=params, timeout=timeout)
                return Answer(response.status_code, response.text, response.headers.get("location"))

        if not shared:
            return await read()
        return await scope.shared(("GET answer", self.dashboard_url, path, _query_key(params)), read)

    async def write(
        self,
        method: str,
        path: str,
        *,
        what: str,
        json_body: Any = None,
        content: bytes | None = None,
        not_found: str | None = None,
        timeout_s: float | None = None,
        read_timeout_s: float | None = None,
    ) -> httpx.Response:
        """A request that changes the cluster (any method but GET): sent every time, and what the call reads
        after it is read again. The response comes back whatever its status; ``raise_for_status`` is the caller's."""
        timeout = timeout_s or self.timeout_s
        scope.fresh()
        try:
            with dashboard_errors(self.dashboard_url, what, read_timeout_s or timeout, not_found=not_found):
                return await self.http.request(
                    method,
                    path,
                    json=json_body,
                    content=content,
                    timeout=httpx.Timeout(timeout, read=read_timeout_s or timeout),
                )
        finally:
            scope.fresh()

    async def write_json(
        self,
        method: str,
        path: str,
        *,
        what: str,
        not_found: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """A write answered in JSON (a job's stop or delete); an HTTP error status raises ours."""
        timeout = timeout_s or self.timeout_s
        scope.fresh()
        try:
            with dashboard_errors(self.dashboard_url, what, timeout, not_found=not_found):
                response = await self.http.request(method, path, timeout=timeout)
                response.raise_for_status()
                return plain_names(decode_json(response.content))
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
