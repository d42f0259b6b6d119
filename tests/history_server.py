"""A KubeRay History Server on loopback, serving one terminated cluster's record: no real one can run here.

It speaks the History Server's own API as its source defines it (ray-project/kuberay, historyserver/pkg/
historyserver/router.go and reader.go, August 2026): ``/enter_cluster/<namespace>/<kind>/<name>[/<session>]``
loads a session and sets its cookies, every other route needs them (400 "Cluster Cookie not found"), a session
evicted from its cache answers 503 "reload via /enter_cluster", ``/api/jobs/<id>`` finds job ids only (and
answers 200 "Job <id> does not exist" for anything else), the log routes answer plain text, ``stream`` answers
501, and its catch-all ``/api/...`` answers 404 for what the collector did not store.

The record is a real one: the answers a Ray 2.60 head's dashboard gave in one session for a job whose driver
raised and one whose tasks failed (tests/recorded/driver_exception.json, task_errors.json), reshaped the way the History Server shapes what its collector stored
(formatJobForResponse, LogEvent.ToAPIResponse grouped by job, the log file's last lines joined by newlines).
"""

from __future__ import annotations

import contextlib
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from tests.support import serve_asgi

# Two diagnoses recorded on the same Ray 2.60 head, in one session: a driver that raised, tasks that failed.
RECORDINGS = [
    Path(__file__).parent / "recorded" / f"{name}.json" for name in ("driver_exception", "task_errors")
]
NAMESPACE, KIND, NAME = "ml", "rayjob", "train-lr"
SESSION = "session_2026-11-30_19-52-31_118093_27652"
COOKIES = ("cluster_name", "cluster_namespace", "session_name", "owner_kind", "owner_name")
# formatJobForResponse's keys: what the History Server answers for a job (start/end only when known)
JOB_KEYS = (
    "driver_exit_code",
    "driver_node_id",
    "driver_agent_http_address",
    "runtime_env",
    "metadata",
    "error_type",
    "message",
    "entrypoint",
    "status",
    "driver_info",
    "job_id",
    "submission_id",
    "type",
    "start_time",
    "end_time",
)


# formatTaskForResponse's keys: the basic ones, and those added with detail=1
TASK_KEYS = (
    "task_id",
    "attempt_number",
    "name",
    "state",
    "job_id",
    "actor_id",
    "type",
    "func_or_class_name",
    "parent_task_id",
    "node_id",
    "worker_id",
    "worker_pid",
    "error_type",
)
TASK_DETAIL_KEYS = (
    "language",
    "required_resources",
    "runtime_env_info",
    "placement_group_id",
    "events",
    "task_log_info",
    "error_message",
    "is_debugger_paused",
    "call_site",
    "label_selector",
    "creation_time_ms",
    "start_time_ms",
    "end_time_ms",
)


def _recorded(prefix: str, recording: Path = RECORDINGS[0]) -> Any:
    exchanges = json.loads(recording.read_text())["exchanges"]
    return next(e["body"] for e in exchanges if e["request"].startswith(prefix))


def history_job(details: dict[str, Any]) -> dict[str, Any]:
    """A Ray JobDetails as the History Server rebuilds it from the job's events."""
    job = {k: details.get(k) for k in JOB_KEYS if k in details or k not in ("start_time", "end_time")}
    info = dict(details.get("driver_info") or {})
    job["driver_info"] = {
        "id": info.get("id"),
        "node_ip_address": info.get("node_ip_address"),
        "pid": int(info.get("pid") or 0),
    }
    return job


def history_event(row: dict[str, Any]) -> dict[str, Any]:
    """A State API cluster event as the History Server answers it (camelCase, unix seconds as a string)."""
    stamp = datetime.datetime.strptime(row["time"], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.UTC)
    fields = {
        "".join(w if i == 0 else w.title() for i, w in enumerate(k.split("_"))): v
        for k, v in (row.get("custom_fields") or {}).items()
    }
    return {
        "eventId": row["event_id"],
        "sourceType": row["source_type"],
        "sourceHostname": "",
        "sourcePid": 0,
        "severity": row["severity"],
        "label": "",
        "message": row["message"],
        "timestamp": str(int(stamp.timestamp())),
        "customFields": fields,
    }


def history_node(row: dict[str, Any], session: str) -> dict[str, Any]:
    """A State API node row as the History Server replays the node's last state (formatNodeSummaryReplayForResp:
    host metrics are placeholders, the raylet part carries the state and its death reason)."""
    renamed = {"object_store_memory": "objectStoreMemory", "node:__internal_head__": "node:InternalHead"}
    resources = {renamed.get(k, k): v for k, v in row["resources_total"].items()}
    return {
        "t": row["start_time_ms"],
        "now": row["start_time_ms"],
        "hostname": "",
        "ip": row["node_ip"],
        "cpu": 0,
        "cmdline": [],
        "cpus": [0, 0],
        "mem": [0, 0, 0, 0],
        "shm": 0,
        "bootTime": 0,
        "gpus": [],
        "tpus": [],
        "workers": [],
        "actors": {},
        "raylet": {
            "storeStats": {"objectStoreBytesAvail": resources.get("objectStoreMemory")},
            "nodeId": row["node_id"],
            "nodeManagerAddress": row["node_ip"],
            "nodeManagerHostname": "",
            "rayletSocketName": f"/tmp/ray/{session}/sockets/raylet",
            "metricsExportPort": "8080",
            "resourcesTotal": resources,
            "nodeName": "",
            "instanceId": "",
            "instanceTypeName": "",
            "nodeTypeName": "headgroup" if row["is_head_node"] else "workergroup",
            "startTimeMs": row["start_time_ms"],
            "isHeadNode": row["is_head_node"],
            "labels": row["labels"],
            "state": row["state"],
            "endTimeMs": row["end_time_ms"],
            "stateMessage": row["state_message"] or "",
        },
    }


def history_actor(row: dict[str, Any]) -> dict[str, Any]:
    """A State API actor row as the History Server answers it (formatActorForResponse: camelCase, the death
    cause only as the dashboard's exitDetail text)."""
    context = next(iter((row.get("death_cause") or {}).values()), {})
    return {
        "actorId": row["actor_id"],
        "jobId": row["job_id"],
        "state": row["state"],
        "pid": row["pid"],
        "address": {"nodeId": row["node_id"], "ipAddress": "", "port": 0, "workerId": ""},
        "name": row["name"],
        "numRestarts": str(row["num_restarts"]),
        "actorClass": row["class_name"],
        "className": row["class_name"],
        "requiredResources": row["required_resources"],
        "exitDetail": context.get("error_message") or "-",
        "reprName": row["repr_name"],
        "placementGroupId": row["placement_group_id"] or "",
        "callSite": row["call_site"] or "",
        "labelSelector": row["label_selector"],
    }


# A worker the autoscaler removed when idle, as the History Server replays it (composeStateMessage's words for
# AUTOSCALER_DRAIN_IDLE): not in the recordings, whose head ran alone.
IDLE_WORKER = {
    "node_id": "9a0c4e2d1b7f6a3e8c5d2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c",
    "node_ip": "192.0.2.7",
    "is_head_node": False,
    "state": "DEAD",
    "state_message": "Terminated due to idle (no Ray activity)",
    "resources_total": {"CPU": 4.0, "object_store_memory": 2e9, "memory": 8e9},
    "labels": {},
    "start_time_ms": 1796068380000,
    "end_time_ms": 1796068440000,
}


@dataclass
class Record:
    """The stored session of one terminated cluster, and what the server was asked."""

    jobs: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)  # (node id, filename) -> content
    tasks: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # LogEvent.ToAPIResponse's shape
    nodes: list[dict[str, Any]] = field(default_factory=list)  # /nodes?view=summary's entries
    metadata: dict[str, Any] = field(default_factory=dict)  # the collector's copy of /api/v0/cluster_metadata
    actors: list[dict[str, Any]] = field(default_factory=list)  # /logical/actors' entries
    loaded: bool = False  # in the History Server's snapshot cache (set by /enter_cluster)
    live: bool = False  # the cluster still runs: /enter_cluster answers the session "live"
    entered: int = 0
    requests: list[str] = field(default_factory=list)

    @classmethod
    def recorded(cls) -> Record:
        jobs = [history_job(j) for j in json.loads(_recorded("GET /api/jobs/?"))]
        logs = {}
        for recording in RECORDINGS:
            job = json.loads(_recorded("GET /api/jobs/raysubmit_", recording))
            name = f"job-driver-{job['submission_id']}.log"
            logs[(job["driver_node_id"], name)] = _recorded(
                "GET /api/v0/logs/file?filename=job-driver-", recording
            )
        body = json.loads(_recorded("GET /api/v0/tasks?detail=1&filter_keys=job_id&", RECORDINGS[1]))
        tasks = [
            {k: t.get(k) for k in TASK_KEYS + TASK_DETAIL_KEYS} for t in body["data"]["result"]["result"]
        ]
        nodes = json.loads(_recorded("GET /api/v0/nodes"))["data"]["result"]["result"] + [IDLE_WORKER]
        metadata = {
            "result": True,
            "msg": "",
            "data": {
                "rayVersion": "2.60.0",
                "pythonVersion": "3.11.13",
                "sessionStartTimestampMs": 1796067151118,
                "rayInitCluster": False,
                "os": "linux",
            },
        }
        actors = [
            history_actor(a)
            for recording in RECORDINGS
            for a in json.loads(_recorded("GET /api/v0/actors?detail=1&filter_keys=name", recording))["data"][
                "result"
            ]["result"]
        ]
        return cls(
            jobs=jobs,
            logs=logs,
            tasks=tasks,
            metadata=metadata,
            actors=actors,
            nodes=[history_node(n, SESSION) for n in nodes],
            events=[
                history_event(e)
                for e in json.loads(_recorded("GET /api/v0/cluster_events"))["data"]["result"]["result"]
            ],
        )

    @property
    def failed_job(self) -> dict[str, Any]:
        """The job whose driver raised."""
        return next(
            j
            for j in self.jobs
            if j["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR" and "learning rate" in j["message"]
        )

    @property
    def tasks_job(self) -> dict[str, Any]:
        """The job whose tasks failed."""
        return next(j for j in self.jobs if j["job_id"] == self.tasks[0]["job_id"])


def _envelope(result: Any) -> JSONResponse:
    return JSONResponse({"result": True, "msg": "", "data": {"result": result}})


def _filtered(rows: list[dict[str, Any]], request: Request) -> list[dict[str, Any]]:
    keys, values = request.query_params.getlist("filter_keys"), request.query_params.getlist("filter_values")
    return [r for r in rows if all(str(r.get(k)) == v for k, v in zip(keys, values, strict=False))]


def make_app(record: Record) -> Starlette:
    def enter(request: Request) -> Response:
        p = request.path_params
        record.requests.append(request.url.path)
        if p["kind"] not in ("raycluster", "rayjob", "rayservice"):
            return PlainTextResponse(f"unsupported resource kind: {p['kind']!r}", status_code=400)
        session = p.get("session", "latest")
        if (p["ns"], p["kind"], p["name"]) != (NAMESPACE, KIND, NAME) or session not in ("latest", SESSION):
            return PlainTextResponse(
                f"cluster {p['ns']}/{p['kind']}/{p['name']} with session {session} not found", status_code=404
            )
        record.loaded, record.entered = True, record.entered + 1
        session = "live" if record.live else SESSION
        response = JSONResponse(
            {"result": "success", "name": NAME, "namespace": NAMESPACE, "session": session}
        )
        values = (f"{NAME}-abcde", NAMESPACE, session, KIND, NAME)
        for key, value in zip(COOKIES, values, strict=True):
            response.set_cookie(key, value, max_age=600, path="/")
        return response

    def clusters(request: Request) -> Response:
        return JSONResponse(
            [
                {
                    "name": f"{NAME}-abcde",
                    "namespace": NAMESPACE,
                    "sessionName": SESSION,
                    "createTime": "2026-11-30T19:52:31Z",
                    "createTimeStamp": 1796067151,
                    "ownerKind": KIND,
                    "ownerName": NAME,
                }
            ]
        )

    async def api(request: Request) -> Response:
        path = request.url.path
        record.requests.append(f"{path}?{request.url.query}")
        if request.cookies.get("cluster_name") is None:
            return JSONResponse("Cluster Cookie not found", status_code=400)
        if not record.loaded:
            return PlainTextResponse(
                "session snapshot not in cache; reload via /enter_cluster", status_code=503
            )
        q = request.query_params
        if path == "/api/jobs/":
            return JSONResponse(record.jobs)
        if path.startswith("/api/jobs/"):
            ref = path.removeprefix("/api/jobs/")
            found = next((j for j in record.jobs if j["job_id"] == ref), None)
            return JSONResponse(found) if found else PlainTextResponse(f"Job {ref} does not exist")
        if path == "/api/v0/tasks":
            keys = TASK_KEYS + (TASK_DETAIL_KEYS if q.get("detail") in ("1", "true") else ())
            rows = [{k: t.get(k) for k in keys} for t in _filtered(record.tasks, request)]
            return _envelope(
                {
                    "total": len(record.tasks),
                    "num_after_truncation": len(record.tasks),
                    "num_filtered": len(rows),
                    "result": rows,
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            )
        if path == "/api/v0/tasks/summarize":  # getTaskSummarize: by func_name, the whole record as "cluster"
            summary: dict[str, Any] = {}
            for t in _filtered(record.tasks, request):
                row = summary.setdefault(
                    t["func_or_class_name"],
                    {"func_or_class_name": t["func_or_class_name"], "type": t["type"], "state_counts": {}},
                )
                row["state_counts"][t["state"]] = row["state_counts"].get(t["state"], 0) + 1
            by_func = {
                "summary": summary,
                "total_tasks": len(record.tasks),
                "total_actor_tasks": 0,
                "total_actor_scheduled": 0,
                "summary_by": "func_name",
            }
            return _envelope(
                {
                    "total": len(record.tasks),
                    "num_after_truncation": len(record.tasks),
                    "num_filtered": len(record.tasks),
                    "result": {"node_id_to_summary": {"cluster": by_func}},
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            )
        if path == "/api/v0/logs/file":
            if not q.get("node_id"):
                return PlainTextResponse(
                    "node_id or node_ip is required when actor_id or task_id is not provided", status_code=400
                )
            content = record.logs.get((q["node_id"], q.get("filename", "")))
            if content is None:
                return PlainTextResponse(f"log file not found: {q.get('filename')}", status_code=404)
            lines = content.splitlines()
            wanted = int(q.get("lines") or 1000)
            return PlainTextResponse("\n".join(lines if wanted < 0 else lines[-wanted:]))
        if path == "/nodes" and q.get("view", "summary") == "summary":
            return JSONResponse(
                {
                    "result": True,
                    "msg": "Node summary fetched.",
                    "data": {"summary": record.nodes, "nodeLogicalResources": {}},
                }
            )
        if path == "/api/cluster_status" and q.get("format") != "1":  # Ray's frontend asks format=1 only
            return JSONResponse(
                {
                    "result": True,
                    "msg": "Got cluster status.",
                    "data": {"autoscalingStatus": None, "autoscalingError": None, "clusterStatus": None},
                }
            )
        if path == "/api/v0/cluster_metadata":
            return JSONResponse(record.metadata)
        if path == "/api/v0/placement_groups":  # the session had none: stored empty, or the empty fallback
            return _envelope(
                {
                    "total": 0,
                    "num_after_truncation": 0,
                    "num_filtered": 0,
                    "result": [],
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            )
        if path == "/logical/actors":
            actors = {a["actorId"]: a for a in record.actors}
            return JSONResponse({"result": True, "msg": "All actors fetched.", "data": {"actors": actors}})
        if path == "/events":  # grouped by job id: "global" for events that name none
            grouped: dict[str, list[dict[str, Any]]] = {}
            for e in record.events:
                grouped.setdefault(str(e["customFields"].get("jobId") or "global"), []).append(e)
            return JSONResponse({"result": True, "msg": "All events fetched.", "data": {"events": grouped}})
        if path == "/api/v0/logs/stream":
            return PlainTextResponse("Log streaming only available for live clusters", status_code=501)
        return PlainTextResponse("Endpoint data not found in storage", status_code=404)

    return Starlette(
        routes=[
            Route("/enter_cluster/{ns}/{kind}/{name}", enter),
            Route("/enter_cluster/{ns}/{kind}/{name}/{session}", enter),
            Route("/clusters/", clusters),
            Route("/{path:path}", api, methods=["GET", "POST", "PUT", "DELETE"]),
        ]
    )


def serve(record: Record) -> contextlib.AbstractContextManager[str]:
    """Run the History Server on a free loopback port in a thread; yields its URL."""
    return serve_asgi(make_app(record))
