"""The dashboard's other routes, one method each: its version, the autoscaler's cluster status, the nodes'
summary and details, live actors' worker stats, the older events route, Grafana's health, the profiling routes
(a process's stack, its CPU profile), Ray Train's runs, Ray Data's datasets, and its Prometheus (whether it
answers; the nodes' metrics targets). Ray's records come back as they
are; each read is made once per call (sources/scope.py), except a stack or profile, which is a measurement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ray_mcp.sources.dashboard import Answer, Dashboard
from ray_mcp.sources.ids import check_id, node_path

TRAIN_RUNS_PATH = "/api/train/v2/runs/v1"  # Train v2 (Ray's TrainHead.get_train_v2_runs)
PROMETHEUS_HEALTH_PATH = "/api/prometheus_health"  # metrics_head.py: does the dashboard's Prometheus answer
PROMETHEUS_SD_PATH = "/api/prometheus/sd"  # reporter_head.py: the metrics targets, as Prometheus's HTTP SD
# platform_event_head.py: the Kubernetes pod events the head ingests; 404 when it does not (the module loads only
# with RAY_DASHBOARD_INGEST_PLATFORM_EVENTS=1 in the head's environment)
PLATFORM_EVENTS_PATH = "/api/v0/platform_events"


class Routes:
    """The dashboard's own routes of one cluster (the State, Jobs, Serve and log APIs have sources of their own)."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    async def version(self) -> dict[str, Any]:
        found = await self.dashboard.get_json("/api/version", what="the version request (/api/version)")
        return dict(found) if isinstance(found, dict) else {}

    async def cluster_status(self) -> dict[str, Any]:
        """The autoscaler's view (``ray status``): per-node use, pending demands, launches and failures."""
        found = await self.dashboard.get_data(
            "/api/cluster_status", what="the cluster status (/api/cluster_status)"
        )
        return dict(found) if isinstance(found, dict) else {}

    async def node_summary(self) -> dict[str, Any]:
        """Every node's host use, raylet and object store stats (``/nodes?view=summary``: ~1 KB a worker)."""
        found = await self.dashboard.get_data(
            "/nodes", what="the node summary (/nodes?view=summary)", params={"view": "summary"}
        )
        return dict(found) if isinstance(found, dict) else {}

    async def node_details(self, node_id: str) -> dict[str, Any]:
        """One node's details (``/nodes/<id>``): its raylet's own report (its log directory among them)."""
        found = await self.dashboard.get_data(node_path(node_id), what=f"the details of node {node_id}")
        return dict(found) if isinstance(found, dict) else {}

    async def logical_actors(self, actor_ids: Sequence[str]) -> dict[str, Any]:
        """Live actors' worker stats (assigned resource slots, physical GPUs) by actor id."""
        found = await self.dashboard.get_data(
            "/logical/actors",
            what="the actors' worker stats (/logical/actors)",
            params={"ids": ",".join(actor_ids), "nocache": "1"},
        )
        actors = found.get("actors") if isinstance(found, dict) else None
        return dict(actors) if isinstance(actors, dict) else {}

    async def events(self) -> dict[str, list[dict[str, Any]]]:
        """The dashboard's older events route (``/events``: every event by job, camelCase fields)."""
        found = await self.dashboard.get_data("/events", what="the cluster events (/events)")
        events = found.get("events") if isinstance(found, dict) else None
        return dict(events) if isinstance(events, dict) else {}

    async def platform_events(self) -> Answer:
        """The platform (Kubernetes) events the head ingests, newest first: Ray's RayEvent protobufs as JSON
        (``platformEvent``: source, objectKind, objectName, reason, message, customFields) in its envelope's
        ``data.events``; 404 when the head does not ingest them."""
        return await self.dashboard.get_answer(
            PLATFORM_EVENTS_PATH, what=f"the platform events ({PLATFORM_EVENTS_PATH})"
        )

    async def grafana_health(self) -> Answer:
        """Whether the dashboard reaches a Grafana, and which (Ray answers 500 when it cannot)."""
        return await self.dashboard.get_answer("/api/grafana_health", what="checking Grafana")

    async def prometheus_health(self) -> bool:
        """Whether the dashboard's own Prometheus (RAY_PROMETHEUS_HOST on the head) answers (Ray asks it
        ``vector(1)`` and answers 500 when it cannot)."""
        answer = await self.dashboard.get_answer(PROMETHEUS_HEALTH_PATH, what="checking its Prometheus")
        if answer.status != 200:
            return False
        try:
            body = answer.json()
        except ValueError:
            return False
        return isinstance(body, dict) and body.get("result") is True

    async def prometheus_targets(self) -> list[str]:
        """The ``host:port`` metrics endpoints Ray gives Prometheus (``/api/prometheus/sd``, HTTP service
        discovery: the list Ray writes to the session's prom_metrics_service_discovery.json)."""
        groups = await self.dashboard.get_json(
            PROMETHEUS_SD_PATH, what=f"the metrics targets ({PROMETHEUS_SD_PATH})"
        )
        targets: list[str] = []
        for group in groups if isinstance(groups, list) else []:
            for target in (group or {}).get("targets") or [] if isinstance(group, dict) else []:
                if isinstance(target, str) and target not in targets:
                    targets.append(target)
        return targets

    async def profiling_enabled(self) -> Any:
        return await self.dashboard.get_json("/api/profiling_enabled", what="the profiling check")

    async def worker_traceback(self, pid: int, node_id: str, *, timeout_s: float) -> Answer:
        """A process's Python stacks, read by py-spy on its node (403 when the head's profiling is off)."""
        return await self._profiling("/worker/traceback", pid, node_id, timeout_s)

    async def cpu_profile(self, pid: int, node_id: str, *, duration_s: int, timeout_s: float) -> Answer:
        """A process's CPU profile over ``duration_s`` (py-spy record on its node), as raw collapsed stacks."""
        return await self._profiling(
            "/worker/cpu_profile", pid, node_id, timeout_s, duration=str(duration_s), format="raw"
        )

    async def task_traceback(self, task_id: str, attempt: int, node_id: str, *, timeout_s: float) -> Answer:
        """The stacks of the worker that runs one task attempt (Ray 2.60's ``/task/traceback``: the head finds
        the attempt's worker itself, so no pid is needed; 500 when the attempt is not RUNNING)."""
        return await self._task_profiling("/task/traceback", task_id, attempt, node_id, timeout_s)

    async def task_cpu_profile(
        self, task_id: str, attempt: int, node_id: str, *, duration_s: int, timeout_s: float
    ) -> Answer:
        """One task attempt's CPU profile over ``duration_s`` (``/task/cpu_profile``), as raw collapsed stacks."""
        return await self._task_profiling(
            "/task/cpu_profile", task_id, attempt, node_id, timeout_s, duration=str(duration_s), format="raw"
        )

    async def memory_profile(
        self,
        *,
        node_id: str,
        pid: int | None = None,
        task: tuple[str, int] | None = None,
        duration_s: int,
        leaks: bool,
        native: bool,
        timeout_s: float,
    ) -> Answer:
        """memray attached to one worker (``pid``) or one task attempt's worker (``task``: id, attempt) for
        ``duration_s`` (``/memory_profile``), its report as memray's ``flamegraph`` page (HTML with the frame
        tree as JSON: each line's own bytes and the bytes under it; the ``table`` report names only the innermost
        frame). 500 with memray's words when memray is missing on the node or cannot attach."""
        params = {
            "node_id": node_id,
            "duration": str(duration_s),
            "format": "flamegraph",
            "leaks": "1" if leaks else "0",
            "native": "1" if native else "0",
            "trace_python_allocators": "1",  # pymalloc allocations too: a list of small objects is a leak
        }
        if task is not None:
            params |= {"task_id": task[0], "attempt_number": str(task[1])}
            what = f"/memory_profile of task {task[0]} attempt {task[1]}"
        else:
            params["pid"] = str(pid)
            what = f"/memory_profile of pid {pid}"
        return await self.dashboard.get_answer(
            "/memory_profile", what=what, params=params, timeout_s=timeout_s, shared=False
        )

    async def gpu_profile(self, pid: int, node_id: str, *, steps: int, timeout_s: float) -> Answer:
        """A Torch GPU trace of one worker over ``steps`` optimizer steps (``/worker/gpu_profile``): a 302 whose
        location is the log API's download of the trace file on the node (not followed: the file is a whole
        Chrome trace); 500 with Ray's words when the node has no GPU or the worker is not training with Torch."""
        return await self._profiling(
            "/worker/gpu_profile", pid, node_id, timeout_s, num_iterations=str(steps)
        )

    async def _profiling(self, path: str, pid: int, node_id: str, timeout_s: float, **extra: str) -> Answer:
        params = {"pid": str(pid), "node_id": node_id, "native": "0", **extra}
        return await self.dashboard.get_answer(
            path, what=f"{path} of pid {pid}", params=params, timeout_s=timeout_s, shared=False
        )

    async def _task_profiling(
        self, path: str, task_id: str, attempt: int, node_id: str, timeout_s: float, **extra: str
    ) -> Answer:
        params = {
            "task_id": task_id,
            "attempt_number": str(attempt),
            "node_id": node_id,
            "native": "0",
            **extra,
        }
        return await self.dashboard.get_answer(
            path, what=f"{path} of task {task_id}", params=params, timeout_s=timeout_s, shared=False
        )

    async def train_runs(self) -> Answer:
        """Ray Train v2's runs (``/api/train/v2/runs/v1``): 404 without the module, 500 without its state actor."""
        return await self.dashboard.get_answer(TRAIN_RUNS_PATH, what=f"the Train runs ({TRAIN_RUNS_PATH})")

    async def datasets(self, job_id: str) -> list[dict[str, Any]]:
        """A job's Ray Data datasets, newest first. The route creates Ray Data's stats actor when it does not
        exist: ask it only once that actor is alive."""
        path = f"/api/data/datasets/{check_id('job', job_id)}"
        body = await self.dashboard.get_json(path, what=f"the datasets of job {job_id}")
        rows = body.get("datasets") if isinstance(body, dict) else None
        return [dict(r) for r in rows or [] if isinstance(r, dict)]
