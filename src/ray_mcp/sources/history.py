"""A terminated cluster's record, read from the KubeRay History Server as if it were the cluster's dashboard.

The History Server (ray-project/kuberay, ``historyserver/``) serves a subset of the dashboard's routes for the
sessions its collector stored. A client picks the cluster with ``GET /enter_cluster/<namespace>/<kind>/<name>
[/<session>]``: that loads the session's record into the server's cache and sets cookies (cluster_name,
cluster_namespace, session_name, owner_kind, owner_name, ten minutes each) that every later request must carry.
The cache is an LRU: a session evicted meanwhile answers 503 "reload via /enter_cluster".

``HistoryTransport`` is the one place that knows this: under the dashboard client (Dashboard), it enters the
cluster before the first request and again after an eviction, sends only the routes the History Server keeps
(a route it lacks is refused here, naming what needs a live cluster), answers the State API's node, actor and
placement group lists and ``/api/version`` from the History Server's routes that hold the same facts
(DERIVED), and finds a job by submission id, which the History Server's ``/api/jobs/<id>`` does not (it keys
jobs by job id).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from ray_mcp.errors import ClusterUnavailable, InvalidArgument, NeedsLiveCluster, RayRequestFailed
from ray_mcp.sources.state import actor_summary_from_rows
from ray_mcp.text import quoted

SCHEME = "history+"  # history+http://host:port/<namespace>/<kind>/<name>[/<session>]
KINDS = ("raycluster", "rayjob", "rayservice")  # what /enter_cluster accepts
# The History Server's routes with the dashboard's shape (GET only): router.go's routerAPI and routerEvents.
# Not its /nodes: that replays each node's state with zeros for host CPU, memory and disk (placeholders).
SERVED = re.compile(
    r"/api/jobs/[^/]*|/api/v0/tasks(/summarize)?|/api/v0/logs(/file)?|/api/cluster_status|/events"
)
# Dashboard routes answered from another the History Server keeps: the route, and where its answer comes from.
# Its catch-all /api/... serves what the collector fetched under the exact URL fetched (poll.go), so a State
# API list is read whole from there and filtered here.
NODES, VERSION, GROUPS = "/api/v0/nodes", "/api/version", "/api/v0/placement_groups"
ACTORS, ACTOR_SUMMARY, JOBS = "/api/v0/actors", "/api/v0/actors/summarize", "/api/v0/jobs"
DERIVED = {
    JOBS: "/api/jobs/",
    NODES: "/nodes?view=summary",  # each node's last state, with its death reason
    ACTORS: "/logical/actors",  # the dashboard's actor table: camelCase, its death cause as exitDetail text
    ACTOR_SUMMARY: "/logical/actors",
    VERSION: "/api/v0/cluster_metadata",  # Ray's version, stored by the collector at start
    GROUPS: "/api/v0/placement_groups?detail=1&limit=10000",
}
# What the History Server answers when the session left its cache, or a request carried no cookies.
REENTER = re.compile(rb"reload via /enter_cluster|Cookie not found")
SESSION_TIME = re.compile(r"session_(\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)")
SESSION_NAME = re.compile(r"session_[0-9_-]{1,64}")  # session_2026-08-19_09-21-52_123456_789


@dataclass(frozen=True)
class HistoryRef:
    """The record named by a history address: the KubeRay object and, optionally, one session of it."""

    url: str  # the History Server's base URL (http[s]://host:port)
    namespace: str
    kind: str
    name: str
    session: str = "latest"  # the History Server's word for the newest stored session

    @property
    def enter_path(self) -> str:
        return f"/enter_cluster/{self.namespace}/{self.kind}/{self.name}/{self.session}"

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


_SEGMENT = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?|session_[0-9_-]+|latest")


def parse_history_address(address: str) -> HistoryRef:
    """``history+http://host:port/<namespace>/<kind>/<name>[/<session>]`` -> HistoryRef (InvalidArgument else)."""
    example = "history+http://historyserver:30080/default/raycluster/my-cluster"
    parts = urlsplit(address.strip().removeprefix(SCHEME))
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme not in ("http", "https") or not parts.hostname or len(segments) not in (3, 4):
        raise InvalidArgument(
            f"Cannot read {address!r} as a History Server address: expected "
            f"history+http://host:port/<namespace>/<kind>/<name>[/<session>], e.g. {example}."
        )
    if segments[1].lower() not in KINDS:
        raise InvalidArgument(
            f"{segments[1]!r} in {address!r} is not a KubeRay kind: expected one of {', '.join(KINDS)} "
            f"(e.g. {example})."
        )
    if not all(_SEGMENT.fullmatch(s) for i, s in enumerate(segments) if i != 1):  # they go into a URL path
        raise InvalidArgument(
            f"{address!r} names a namespace, name or session that is not a Kubernetes name "
            "(lowercase letters, digits, '-' and '.') or a Ray session name (session_...)."
        )
    base = f"{parts.scheme}://{parts.netloc}"
    return HistoryRef(base, segments[0], segments[1].lower(), segments[2], *segments[3:])


def session_started(session: str) -> str | None:
    """When a Ray session began, from its name (session_2026-08-19_09-21-52_...), on the head's clock."""
    m = SESSION_TIME.match(session)
    if m is None:
        return None
    try:
        return datetime.strptime(m[1], "%Y-%m-%d_%H-%M-%S").strftime("%Y-%m-%d %H:%M:%S") + " (head's clock)"
    except ValueError:
        return None


def node_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The History Server's node summary (the dashboard's /nodes shape, one entry per node's last state) as
    State API node rows."""
    renamed = {"objectStoreMemory": "object_store_memory", "node:InternalHead": "node:__internal_head__"}
    rows = []
    for node in summary.get("summary") or []:
        raylet = node.get("raylet") or {}
        resources = {renamed.get(k, k): v for k, v in (raylet.get("resourcesTotal") or {}).items()}
        rows.append(
            {
                "node_id": raylet.get("nodeId"),
                "node_ip": raylet.get("nodeManagerAddress") or node.get("ip"),
                "is_head_node": bool(raylet.get("isHeadNode")),
                "state": raylet.get("state"),
                "state_message": raylet.get("stateMessage") or None,
                "node_name": raylet.get("nodeName")
                or node.get("hostname")
                or raylet.get("nodeManagerAddress"),
                "resources_total": resources,
                "labels": raylet.get("labels") or {},
                "start_time_ms": raylet.get("startTimeMs"),
                "end_time_ms": raylet.get("endTimeMs"),
            }
        )
    return rows


def actor_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The History Server's actor table (the dashboard's /logical/actors: camelCase) as State API actor rows.
    It keeps an actor's death cause only as the text the dashboard shows (exitDetail), not which context or
    reason Ray gave: the row says so rather than guess one."""
    rows = []
    for actor in (data.get("actors") or {}).values():
        exit_detail = actor.get("exitDetail")
        cause = (
            {
                "exit_detail_context": {
                    "reason": "UNKNOWN (the record keeps the text only)",
                    "error_message": exit_detail,
                }
            }
            if exit_detail and exit_detail != "-"
            else None
        )
        rows.append(
            {
                "actor_id": actor.get("actorId"),
                "job_id": actor.get("jobId"),
                "state": actor.get("state"),
                "pid": actor.get("pid"),
                "node_id": (actor.get("address") or {}).get("nodeId"),
                "name": actor.get("name"),
                "class_name": actor.get("className") or actor.get("actorClass"),
                "num_restarts": actor.get("numRestarts"),
                "required_resources": actor.get("requiredResources"),
                "placement_group_id": actor.get("placementGroupId") or None,
                "repr_name": actor.get("reprName"),
                "start_time": actor.get("startTime"),
                "end_time": actor.get("endTime"),
                "death_cause": cause,
            }
        )
    return rows


def filtered(rows: list[dict[str, Any]], params: httpx.QueryParams) -> list[dict[str, Any]]:
    """The rows a State API request's filters (= and !=) keep."""
    wanted = zip(
        params.get_list("filter_keys"),
        params.get_list("filter_predicates"),
        params.get_list("filter_values"),
        strict=False,
    )
    matched = rows
    for key, predicate, value in wanted:
        same = predicate == "="
        matched = [r for r in matched if (str(r.get(key)) == value) == same]
    return matched


def state_page(rows: list[dict[str, Any]], params: httpx.QueryParams) -> dict[str, Any]:
    """A State API list answer over ``rows``, with the request's filters and limit applied."""
    matched = filtered(rows, params)
    limit = int(params.get("limit") or 100)
    result = {
        "total": len(rows),
        "num_after_truncation": len(rows),
        "num_filtered": len(matched),
        "result": matched[:limit],
        "partial_failure_warning": "",
        "warnings": None,
    }
    return {"result": True, "msg": "", "data": {"result": result}}


class HistoryTransport(httpx.AsyncBaseTransport):
    """The dashboard client's transport for a history address (see the module's docstring)."""

    def __init__(self, ref: HistoryRef, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.ref = ref
        self.inner = inner or httpx.AsyncHTTPTransport()
        self.session: str | None = None  # the session entered (the History Server resolves "latest")
        self.last_job_end: str | None = None  # when the record's last job ended, if any did
        self._cookies: str | None = None
        self._lock = anyio.Lock()

    def notice(self) -> str:
        """The sentence every answer from this source starts with."""
        if self.session == "live":  # the History Server proxies a cluster that still runs to its dashboard
            return (
                f"HISTORY: the KubeRay History Server reports {self.ref.label} still live, so these answers are "
                "the live cluster's, passed on by it; write tools are refused here: for them, give ray-mcp the "
                f"cluster's own address (k8s://{self.ref.namespace}/{self.ref.name} or its dashboard URL)."
            )
        session = self.session or (None if self.ref.session == "latest" else self.ref.session)
        started = session_started(session) if session else None
        # the History Server's answer names the session: a Ray session name as it is, anything else as data
        shown = session if session and SESSION_NAME.fullmatch(session) else quoted(session)
        which = (
            f"session {shown}" + (f", started {started}" if started else "")
            if session
            else "its newest session"
        )
        ended = f"last job ended {self.last_job_end}" if self.last_job_end else "no job end recorded"
        return (
            f"HISTORY: read from the KubeRay History Server's record of the terminated {self.ref.label} "
            f"({which}; {ended}; the cluster's own end is not recorded), not from a live cluster; write "
            "tools are refused."
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.rstrip("/") in DERIVED:
            return await self._derived(request, path.rstrip("/"))
        if request.method != "GET" or not SERVED.fullmatch(path):
            raise NeedsLiveCluster(self.refusal(f"{request.method} {path}"))
        if path.startswith("/api/jobs/") and path != "/api/jobs/":
            return await self._one_job(request, path.removeprefix("/api/jobs/"))
        return await self._get(request)

    async def _get(self, request: httpx.Request) -> httpx.Response:
        if self._cookies is None:
            await self._enter(request.headers)
        response = await self._send(request)
        if response.status_code in (400, 503) and REENTER.search(await response.aread()):
            await response.aclose()
            await self._enter(request.headers)  # evicted from the History Server's cache, or cookies expired
            response = await self._send(request)
        return response

    async def _derived(self, request: httpx.Request, route: str) -> httpx.Response:
        """A dashboard route answered from the History Server's route that holds the same facts."""
        source = httpx.Request("GET", self.ref.url + DERIVED[route], headers=request.headers)
        response = await self._get(source)
        body = await response.aread()
        if response.status_code != 200:
            return httpx.Response(response.status_code, content=body, request=request)
        decoded = json.loads(body)  # not JSON: a ValueError, which dashboard_errors maps
        if route == JOBS:  # the Jobs API's list holds the State API's job columns
            jobs = [j for j in decoded if isinstance(j, dict)] if isinstance(decoded, list) else []
            answer: Any = state_page(jobs, request.url.params)
            return httpx.Response(200, json=answer, request=request)
        data = decoded.get("data") if isinstance(decoded, dict) else None
        data = data if isinstance(data, dict) else {}
        if route == VERSION:  # rest_response camelCases Ray's cluster metadata
            answer = {"ray_version": data.get("rayVersion") or "unknown", "session_name": self.session}
        elif route == ACTOR_SUMMARY:
            rows = filtered(actor_rows(data), request.url.params)
            summary = {"node_id_to_summary": {"cluster": actor_summary_from_rows(rows)}}
            answer = {"result": True, "msg": "", "data": {"result": {"total": len(rows), "result": summary}}}
        else:
            if route == NODES:
                rows = node_rows(data)
            elif route == ACTORS:
                rows = actor_rows(data)
            else:
                rows = list((data.get("result") or {}).get("result") or [])
            answer = state_page(rows, request.url.params)
        return httpx.Response(200, json=answer, request=request)

    def refusal(self, route: str) -> str:
        return (
            f"The KubeRay History Server keeps no {route} for {self.ref.label}: that needs "
            "a live cluster. Its record serves get_job, list_jobs, tail_logs (job, task_id, or node and "
            "filename), list_tasks, summarize_tasks, list_actors, list_events, cluster_status, list_nodes, "
            "pg_status and diagnose_job."
        )

    async def _inner(self, request: httpx.Request) -> httpx.Response:
        """One request to the History Server; nothing listening there is said of it, not of the cluster (whose
        absence is expected)."""
        try:
            return await self.inner.handle_async_request(request)
        except httpx.ConnectError as exc:
            raise ClusterUnavailable(
                f"Cannot reach the KubeRay History Server at {self.ref.url} ({type(exc).__name__}: {exc}) for the "
                f"record of {self.ref.label}. Check its address and port (its Service, or a port-forward to it)."
            ) from exc

    async def _send(self, request: httpx.Request) -> httpx.Response:
        if self._cookies:
            request.headers["Cookie"] = self._cookies
        return await self._inner(request)

    async def _enter(self, headers: httpx.Headers) -> None:
        """GET /enter_cluster (with the client's headers: a proxy in front may want its credentials): the
        session is loaded into the History Server's cache; keep its cookies."""
        async with self._lock:
            sent = {k: v for k, v in headers.items() if k.lower() != "cookie"}
            request = httpx.Request("GET", self.ref.url + self.ref.enter_path, headers=sent)
            response = await self._inner(request)
            body = await response.aread()
            if response.status_code == 404:
                raise InvalidArgument(
                    f"The KubeRay History Server at {self.ref.url} has no record of {self.ref.label}"
                    + (f" session {self.ref.session}" if self.ref.session != "latest" else "")
                    + f": it says {quoted(body.decode(errors='replace')[:200])}. Its GET /clusters lists the "
                    "clusters and sessions it keeps; correct the history+ address."
                )
            if response.status_code != 200:
                raise RayRequestFailed(
                    f"The KubeRay History Server at {self.ref.url} could not open the record of {self.ref.label}: "
                    f"HTTP {response.status_code} {quoted(body.decode(errors='replace')[:200])}."
                )
            cookies = httpx.Response(200, headers=response.headers, request=request).cookies
            try:
                self.session = str(json.loads(body).get("session") or "") or None
            except (ValueError, AttributeError):
                self.session = None
            self._cookies = "; ".join(f"{k}={v}" for k, v in cookies.items())
            self.last_job_end = await self._last_job_end(sent)

    async def _last_job_end(self, headers: dict[str, str]) -> str | None:
        """When the record's last job ended (UTC): the nearest the History Server comes to when the cluster
        ended, which it does not record. None when unknown (best effort: the notice says so)."""
        cookie = {"Cookie": self._cookies or ""}
        request = httpx.Request("GET", self.ref.url + "/api/jobs/", headers={**headers, **cookie})
        response = await self._inner(request)
        body = await response.aread()
        try:
            jobs = json.loads(body) if response.status_code == 200 else []
            ends = [int(j["end_time"]) for j in jobs if isinstance(j, dict) and j.get("end_time")]
        except (ValueError, TypeError, KeyError):
            return None
        if not ends:
            return None
        return datetime.fromtimestamp(max(ends) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    async def _one_job(self, request: httpx.Request, ref: str) -> httpx.Response:
        """One job by submission id or job id, from the job list (the History Server finds job ids only)."""
        listing = httpx.Request("GET", self.ref.url + "/api/jobs/", headers=request.headers)
        response = await self.handle_async_request(listing)
        body = await response.aread()
        if response.status_code != 200:
            return httpx.Response(response.status_code, content=body, request=request)
        jobs = json.loads(body)
        found = next(
            (j for j in jobs if isinstance(j, dict) and ref in (j.get("submission_id"), j.get("job_id"))),
            None,
        )
        if found is None:
            return httpx.Response(404, text=f"Job {ref} does not exist in the record", request=request)
        return httpx.Response(200, json=found, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def kept_clusters(
    url: str, *, timeout_s: float, verify: Any = True, transport: httpx.AsyncBaseTransport | None = None
) -> list[dict[str, Any]]:
    """The clusters and sessions a KubeRay History Server keeps (its ``GET /clusters/``: name, namespace,
    sessionName, createTime, ownerKind, ownerName), as it answers them (newest first)."""
    base = url.removeprefix(SCHEME).rstrip("/")
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise InvalidArgument(
            f"Cannot read {url!r} as a History Server URL: expected http://host:port (its root, as in "
            "history+http://host:port/...)."
        )
    async with httpx.AsyncClient(timeout=timeout_s, verify=verify, transport=transport) as client:
        try:
            response = await client.get(f"{base}/clusters/")
        except httpx.HTTPError as exc:
            raise ClusterUnavailable(
                f"The History Server {base} does not answer ({type(exc).__name__}); check its URL."
            ) from None
    if response.status_code != 200:
        raise RayRequestFailed(
            f"The History Server {base} answered GET /clusters/ with HTTP {response.status_code}."
        )
    try:
        body = response.json()
    except ValueError:
        raise RayRequestFailed(
            f"The History Server {base} answered GET /clusters/ with something not JSON."
        ) from None
    return [dict(c) for c in body if isinstance(c, dict)] if isinstance(body, list) else []
