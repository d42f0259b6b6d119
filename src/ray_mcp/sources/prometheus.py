"""Prometheus's HTTP API (``/api/v1``): instant and range queries, series and label values. Requests in, records
out: no shaping, no guard, no answers.

The URL and headers come from settings only (``--prometheus``, ``RAY_PROMETHEUS_HOST`` and
``RAY_PROMETHEUS_HEADERS``), from the Prometheus ray-mcp started beside its embedded head, or from the dashboard
(``PrometheusLocator``): no tool argument can point ray-mcp at another host.

Every request has a bounded timeout (limits.PROMETHEUS_TIMEOUT_S, and Prometheus itself is told to stop
evaluating by then); every failure becomes one of our errors in errors.prometheus_errors. Prometheus answers in
an envelope ``{"status": "success"|"error", "data"|"errorType"+"error", "warnings"}``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from ray_mcp.errors import (
    InvalidArgument,
    PrometheusQueryError,
    PrometheusUnavailable,
    prometheus_errors,
    prometheus_refused,
)
from ray_mcp.limits import (
    PROMETHEUS_PROBE_TIMEOUT_S,
    PROMETHEUS_RESPONSE_BYTES,
    PROMETHEUS_TIMEOUT_S,
    PROMQL_GET_CHARS,
)
from ray_mcp.sources import scope

USER_AGENT = "ray-mcp"
HeaderPairs = Sequence[tuple[str, str]]
# The label Ray puts on every metric it exports: the cluster's session (a new one after each head start). It
# scopes our queries to one cluster when a Prometheus scrapes several (kube-prometheus-stack, a shared one).
SESSION_LABEL = "SessionName"
# Where Ray's own dashboard looks for its Prometheus when RAY_PROMETHEUS_HOST is unset: port 9090 of the head
# (metrics_head.DEFAULT_PROMETHEUS_HOST is localhost:9090 as the head sees it; `ray metrics launch-prometheus`
# starts one there).
RAY_DEFAULT_PROMETHEUS_PORT = 9090
# How long "no Prometheus found through the dashboard" holds before it is looked for again.
RELOCATE_AFTER_S = 60.0


@dataclass(frozen=True)
class Sample:
    """One series of an instant query: its labels and its value at ``at`` (seconds since the epoch)."""

    labels: dict[str, str]
    at: float
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and its points (time, value), oldest first."""

    labels: dict[str, str]
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class Alert:
    """One alert of Prometheus's rules (``/api/v1/alerts``): its labels (``alertname``, ``severity``, ...), its
    annotations, its state (``pending`` or ``firing``), since when it is active (RFC 3339) and its value."""

    labels: dict[str, str]
    annotations: dict[str, str]
    state: str
    active_at: str
    value: str


@dataclass(frozen=True)
class RangeResult:
    series: list[Series]
    warnings: list[str] = field(default_factory=list)


class Prometheus:
    """One Prometheus, over one httpx.AsyncClient, reused by every call. ``origin`` says how it was found."""

    def __init__(
        self,
        url: str,
        *,
        origin: str,
        headers: HeaderPairs = (),
        timeout_s: float = PROMETHEUS_TIMEOUT_S,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.origin = origin
        self.timeout_s = timeout_s
        self.http = httpx.AsyncClient(
            base_url=self.url,
            timeout=httpx.Timeout(timeout_s),
            headers=httpx.Headers([("User-Agent", USER_AGENT), *headers]),
            verify=verify,
            transport=transport,
            follow_redirects=False,  # a redirect elsewhere would carry the headers to a host nobody named
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def instant(self, promql: str, *, at: float | None = None) -> list[Sample]:
        """``/api/v1/query``: a vector (one sample per series) or a scalar (one sample, no labels)."""
        params = {"query": promql, **({"time": _ts(at)} if at is not None else {})}
        data = await self._api("query", params, what=f"the instant query {promql!r}")
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar" or kind == "string":
            return [Sample({}, float(result[0]), _number(result[1]))]
        if kind != "vector" or not isinstance(result, list):
            raise self._wrong(f"a {kind} where an instant vector was expected")
        return [
            Sample(dict(row.get("metric") or {}), float(row["value"][0]), _number(row["value"][1]))
            for row in result
        ]

    async def range_query(self, promql: str, *, start: float, end: float, step_s: float) -> RangeResult:
        """``/api/v1/query_range``: every series' points from ``start`` to ``end``, one per ``step_s``."""
        params = {"query": promql, "start": _ts(start), "end": _ts(end), "step": f"{step_s:g}"}
        data, warnings = await self._api_with_warnings(
            "query_range", params, what=f"the range query {promql!r}"
        )
        kind, result = data.get("resultType"), data.get("result")
        if kind != "matrix" or not isinstance(result, list):
            raise self._wrong(f"a {kind} where a range (matrix) was expected")
        series = [
            Series(
                dict(row.get("metric") or {}),
                [(float(t), _number(v)) for t, v in row.get("values") or []],
            )
            for row in result
        ]
        return RangeResult(series, warnings)

    async def series(self, matchers: Sequence[str], *, start: float, end: float) -> list[dict[str, str]]:
        """``/api/v1/series``: the label sets of the series that match any of ``matchers`` in the window."""
        params: list[tuple[str, str]] = [("match[]", m) for m in matchers]
        params += [("start", _ts(start)), ("end", _ts(end))]
        data = await self._api("series", params, what=f"the series of {', '.join(matchers)}")
        if not isinstance(data, list):
            raise self._wrong("series that are not a list")
        return [dict(row) for row in data if isinstance(row, dict)]

    async def label_values(
        self,
        label: str,
        *,
        matchers: Sequence[str] = (),
        start: float | None = None,
        end: float | None = None,
    ) -> list[str]:
        """``/api/v1/label/<label>/values`` (``__name__``: the metric names), of the matching series."""
        params: list[tuple[str, str]] = [("match[]", m) for m in matchers]
        params += [("start", _ts(start))] if start is not None else []
        params += [("end", _ts(end))] if end is not None else []
        data = await self._get(f"label/{label}/values", params, what=f"the values of the label {label}")
        if not isinstance(data, list):
            raise self._wrong("label values that are not a list")
        return [str(v) for v in data]

    async def alerts(self) -> list[Alert]:
        """``/api/v1/alerts``: every alert its rules hold now, pending or firing (KubeRay ships Ray's rules as
        PrometheusRules; Prometheus evaluates them)."""
        data = await self._get("alerts", [], what="the alerts (/api/v1/alerts)")
        rows = data.get("alerts") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise self._wrong("alerts that are not a list")
        return [
            Alert(
                {str(k): str(v) for k, v in (row.get("labels") or {}).items()},
                {str(k): str(v) for k, v in (row.get("annotations") or {}).items()},
                str(row.get("state") or ""),
                str(row.get("activeAt") or ""),
                str(row.get("value") or ""),
            )
            for row in rows
            if isinstance(row, dict)
        ]

    async def answers(self, timeout_s: float = PROMETHEUS_PROBE_TIMEOUT_S) -> bool:
        """Does a Prometheus query engine answer here? (Ray's dashboard asks ``vector(1)`` the same way.)"""
        try:
            async with asyncio.timeout(timeout_s):
                await self.instant("vector(1)")
            return True
        except (PrometheusUnavailable, TimeoutError, InvalidArgument):
            return False

    # -- the envelope --------------------------------------------------------------------------------------

    async def _api(self, endpoint: str, params: Any, *, what: str) -> Any:
        return (await self._api_with_warnings(endpoint, params, what=what))[0]

    async def _api_with_warnings(self, endpoint: str, params: Any, *, what: str) -> tuple[Any, list[str]]:
        """A query endpoint: GET with its parameters, or a POST form when they are too long for a URL.
        Prometheus is told to give up a little before our own timeout, so that a slow query says so. Once per
        tool call (sources/scope.py): askers of the same query share one request, and its failure."""
        if isinstance(params, dict):
            params = list(params.items())
        if endpoint in ("query", "query_range"):
            params = [*params, ("timeout", f"{max(self.timeout_s - 1, 1):g}s")]
        key = ("PROMETHEUS", self.url, endpoint, tuple(sorted((k, str(v)) for k, v in params)))
        return await scope.shared(key, lambda: self._send(endpoint, params, what=what))

    async def _send(
        self, endpoint: str, params: list[tuple[str, Any]], *, what: str
    ) -> tuple[Any, list[str]]:
        long = sum(len(k) + len(str(v)) for k, v in params) > PROMQL_GET_CHARS
        path = f"/api/v1/{endpoint}"
        with prometheus_errors(self.url, what, self.timeout_s):
            if long:
                request = self.http.build_request("POST", path, data=_form(params))
            else:
                request = self.http.build_request("GET", path, params=params)
            return self._envelope(await self._bounded(request, what), what)

    async def _get(self, endpoint: str, params: list[tuple[str, Any]], *, what: str) -> Any:
        async def read() -> Any:
            with prometheus_errors(self.url, what, self.timeout_s):
                request = self.http.build_request("GET", f"/api/v1/{endpoint}", params=params)
                return self._envelope(await self._bounded(request, what), what)[0]

        return await scope.shared(("PROMETHEUS", self.url, endpoint, tuple(sorted(params))), read)

    async def _bounded(self, request: httpx.Request, what: str) -> httpx.Response:
        """The response, read to at most PROMETHEUS_RESPONSE_BYTES: a query that matches too much is refused
        before it fills memory (Prometheus has no limit of its own on what one answer holds)."""
        response = await self.http.send(request, stream=True)
        body = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > PROMETHEUS_RESPONSE_BYTES:
                    raise InvalidArgument(
                        f"Prometheus at {self.url} answers {what} with more than "
                        f"{PROMETHEUS_RESPONSE_BYTES // 1_048_576} MB: narrow it (a label matcher, topk(10, ...), "
                        "or a shorter window) and call again."
                    )
        finally:
            await response.aclose()
        kept = {"content-type": response.headers.get("content-type", "")}  # the body is decoded already
        return httpx.Response(response.status_code, headers=kept, content=bytes(body), request=request)

    def _envelope(self, response: httpx.Response, what: str) -> tuple[Any, list[str]]:
        if response.status_code in (401, 403, 407):
            raise prometheus_refused(self.url, what, response.status_code)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
            response.raise_for_status()  # an HTTP error without Prometheus's envelope (a proxy's page)
            raise self._wrong(f"HTTP {response.status_code} without Prometheus's JSON envelope")
        if body["status"] == "error":
            raise PrometheusQueryError(
                str(body.get("errorType") or ""), str(body.get("error") or ""), response.status_code
            )
        warnings = [str(w) for w in body.get("warnings") or []]
        return body.get("data"), warnings

    def _wrong(self, what: str) -> PrometheusUnavailable:
        return PrometheusUnavailable(
            f"The Prometheus at {self.url} ({self.origin}) answered {what}: it may not be a Prometheus API. "
            "History is unknown until it answers; check --prometheus (RAY_MCP_PROMETHEUS or RAY_PROMETHEUS_HOST)."
        )


def _form(params: list[tuple[str, Any]]) -> dict[str, Any]:
    form: dict[str, Any] = {}
    for key, value in params:
        if key in form:
            form[key] = [*(form[key] if isinstance(form[key], list) else [form[key]]), value]
        else:
            form[key] = value
    return form


def _ts(at: float | None) -> str:
    return f"{at:.3f}" if at is not None else f"{time.time():.3f}"


def _number(text: Any) -> float:
    """Prometheus sends values as strings: "1.5", "NaN", "+Inf"."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


# -- where the Prometheus is ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Configured:
    """A Prometheus the settings name (or the embedded head's own), with its headers and how it was named."""

    url: str
    origin: str
    headers: tuple[tuple[str, str], ...] = ()


class PrometheusLocator:
    """The Prometheus of one cluster, found in order: the configured one (``--prometheus``, else
    ``RAY_PROMETHEUS_HOST``), the one ray-mcp started beside its embedded head, else the one Ray's dashboard
    reports (its ``/api/prometheus_health`` answers, and Ray's default place, port 9090 of the dashboard's
    host, answers Prometheus's API). None: no Prometheus is known, and why.

    A configured or embedded one is never replaced by a guess; the dashboard's is looked for again after
    RELOCATE_AFTER_S when it was not found. Configured headers go to the configured URL only."""

    def __init__(
        self,
        configured: Configured | None,
        dashboard_url: str,
        *,
        dashboard_answers: Any,  # async () -> bool: the dashboard's own Prometheus answers
        timeout_s: float = PROMETHEUS_TIMEOUT_S,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._configured = configured
        self._dashboard_url = dashboard_url
        self._dashboard_answers = dashboard_answers
        self._timeout_s = timeout_s
        self._verify = verify
        self._transport = transport
        self._found: Prometheus | None = None
        self._missing_since: float | None = None
        self._why_missing = ""
        self._lock = asyncio.Lock()

    async def locate(self) -> Prometheus | None:
        async with self._lock:
            if self._found is not None:
                return self._found
            if self._configured is not None:
                c = self._configured
                self._found = self._client(c.url, c.origin, c.headers)
                return self._found
            if self._missing_since is not None and time.monotonic() - self._missing_since < RELOCATE_AFTER_S:
                return None
            self._found = await self._from_dashboard()
            self._missing_since = None if self._found is not None else time.monotonic()
            return self._found

    @property
    def why_missing(self) -> str:
        return self._why_missing

    def _client(self, url: str, origin: str, headers: HeaderPairs = ()) -> Prometheus:
        return Prometheus(
            url,
            origin=origin,
            headers=headers,
            timeout_s=self._timeout_s,
            verify=self._verify,
            transport=self._transport,
        )

    async def _from_dashboard(self) -> Prometheus | None:
        try:
            healthy = await self._dashboard_answers()
        except Exception as exc:  # the dashboard is unreachable: the calls that need it say so
            self._why_missing = (
                f"the dashboard did not say whether it has a Prometheus ({type(exc).__name__})"
            )
            return None
        if not healthy:
            self._why_missing = (
                "none is configured (--prometheus, RAY_MCP_PROMETHEUS or RAY_PROMETHEUS_HOST) and the cluster's "
                "dashboard reports none answering"
            )
            return None
        host = urlsplit(self._dashboard_url).hostname or "127.0.0.1"
        host = f"[{host}]" if ":" in host else host
        candidate = self._client(
            f"http://{host}:{RAY_DEFAULT_PROMETHEUS_PORT}", "reported by the dashboard (Ray's default place)"
        )
        if await candidate.answers():
            return candidate
        await candidate.aclose()
        self._why_missing = (
            "the dashboard reports a Prometheus (RAY_PROMETHEUS_HOST on the head) but not where; it does not "
            f"answer at {candidate.url}: pass its URL with --prometheus"
        )
        return None

    async def aclose(self) -> None:
        if self._found is not None:
            await self._found.aclose()
            self._found = None
