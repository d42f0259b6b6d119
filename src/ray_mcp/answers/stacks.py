"""Reading the Python stacks and CPU profiles of Ray processes: the dashboard's profiling routes, or local py-spy.

Sources, in order (``--stack-source auto``):

1. the dashboard's ``/worker/traceback`` and ``/worker/cpu_profile`` (reporter module): the head forwards to
   the agent of the process's node, which runs py-spy there, so remote nodes work. Only when the head runs
   with ``RAY_DASHBOARD_ENABLE_PROFILING=1`` (else the routes answer 403);
2. ``py-spy`` run here, for a process on this host (its node's IP is one of ours, the pid exists and is a Ray
   process);
3. otherwise an error that names ``RAY_DASHBOARD_ENABLE_PROFILING=1``.

Every py-spy run is an asyncio subprocess with a timeout, and at most ``MAX_CONCURRENT_SAMPLES`` run at once
per cluster (dashboard requests included: each one runs py-spy on a node).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import anyio.to_thread

from ray_mcp import models
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.nodes import Nodes
from ray_mcp.answers.targets import Target
from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError, RayRequestFailed
from ray_mcp.limits import PID_WORKERS_READ, STACK_FAILURES_QUOTED, STATE_API_MAX_ROWS
from ray_mcp.shaping import profiles, stacks
from ray_mcp.sources import py_spy as spy
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import Answer
from ray_mcp.sources.hosts import local_addresses
from ray_mcp.sources.records import Actor
from ray_mcp.text import quoted

StackSource = Literal["auto", "dashboard", "py-spy"]
STACK_SOURCES = ("auto", "dashboard", "py-spy")

MAX_CONCURRENT_SAMPLES = 4
DUMP_TIMEOUT_S = 20.0  # one py-spy dump (attaching to a big process on a loaded node takes seconds)
PROFILE_SLACK_S = 30.0  # on top of a profile's duration
PROFILING_CHECK_TTL_S = 60.0
PROFILING_FIX = (
    "start the Ray head with RAY_DASHBOARD_ENABLE_PROFILING=1 in its environment "
    "(`RAY_DASHBOARD_ENABLE_PROFILING=1 ray start --head ...`; on KubeRay, an env var of the head container) "
    "so that the dashboard reads stacks on every node"
)


@dataclass
class Proc:
    """One process to sample."""

    pid: int
    node_id: str | None
    node_ip: str | None
    role: str  # how it is grouped, as the cluster names it: actor class, "task f", "driver", "pid 123"
    driver: bool = False
    task: tuple[str, int] | None = None  # (task id, attempt): the dashboard reads it by task, without the pid

    @property
    def node(self) -> str:
        return self.node_ip or (self.node_id or "?")[:12]


class Stacks:
    """Reads stacks and profiles for one cluster; safe under concurrent calls. ``jobs`` and ``nodes`` find a
    job's processes and a node given by id or IP."""

    def __init__(
        self,
        sources: ClusterSources,
        jobs: Jobs,
        nodes: Nodes,
        *,
        source: str = "auto",
        py_spy: str | None = None,
    ) -> None:
        self.sources = sources
        self.state = sources.state
        self.routes = sources.routes
        self.jobs = jobs
        self.nodes = nodes
        self.source = cast(StackSource, source if source in STACK_SOURCES else "auto")
        self.py_spy_setting = py_spy
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_SAMPLES)
        self._profiling: tuple[float, bool | None] | None = None
        self._local: set[str] | None = None

    # -- where a process can be read from -------------------------------------------------------------------

    async def profiling_enabled(self) -> bool | None:
        """Does the dashboard serve its profiling routes? None if it cannot say (an older Ray: try anyway)."""
        now = time.monotonic()
        if self._profiling is not None and now - self._profiling[0] < PROFILING_CHECK_TTL_S:
            return self._profiling[1]
        enabled: bool | None
        try:
            body = await self.routes.profiling_enabled()
            data = body.get("data") if isinstance(body, dict) else None
            value = (data or {}).get("profilingEnabled", (data or {}).get("profiling_enabled"))
            enabled = bool(value) if value is not None else None
        except RayMCPError:
            enabled = None
        self._profiling = (now, enabled)
        return enabled

    async def is_local(self, proc: Proc) -> bool:
        if self._local is None:
            self._local = await anyio.to_thread.run_sync(local_addresses)
        return bool(proc.node_ip) and proc.node_ip in self._local

    async def _plan(self, proc: Proc) -> tuple[list[str], str]:
        """The sources to try for one process, in order, and what to say if there is none."""
        enabled = await self.profiling_enabled() if self.source != "py-spy" else False
        local = await self.is_local(proc)
        order = []
        if self.source in ("auto", "dashboard") and enabled is not False:
            order.append("dashboard")
        if self.source in ("auto", "py-spy") and local and proc.pid:
            order.append("py-spy")
        if order:
            return order, ""
        if self.source == "py-spy":
            why = (
                f"node {proc.node} is not this host and ray-mcp is set to read stacks with local py-spy only "
                f"(RAY_MCP_STACK_SOURCE=py-spy); use auto and {PROFILING_FIX}"
            )
        elif self.source == "dashboard":
            why = f"the dashboard's profiling routes are off: {PROFILING_FIX}"
        else:
            why = (
                f"the dashboard's profiling routes are off and node {proc.node} is not this host, so local "
                f"py-spy cannot reach it: {PROFILING_FIX}"
            )
        return [], why

    # -- one process ----------------------------------------------------------------------------------------

    async def _dump(self, proc: Proc) -> stacks.Sample:
        sample = stacks.Sample(pid=proc.pid, node=proc.node, role=proc.role)
        order, why = await self._plan(proc)
        if not order:
            sample.error = why
            return sample
        errors = []
        async with self._slots:
            for source in order:
                started = time.monotonic()
                try:
                    if source == "dashboard":
                        sample.dump = await self._dashboard_dump(proc)
                    else:
                        sample.dump = await self._local_dump(proc)
                    sample.source = "dashboard-task" if source == "dashboard" and proc.task else source
                    sample.error = None
                    sample.elapsed_s = time.monotonic() - started
                    return sample
                except _Disabled:
                    errors.append(f"dashboard: profiling is off ({PROFILING_FIX})")
                except RayMCPError as exc:
                    errors.append(f"{source}: {exc}")
        sample.error = "; ".join(errors)
        return sample

    def _node_of(self, proc: Proc) -> str:
        if not proc.node_id:
            raise RayRequestFailed(
                "the process's node id is unknown, so the dashboard cannot route the request"
            )
        return proc.node_id

    def _answered(self, response: Answer) -> str:
        """A profiling route's text, or why it gave none (403: the head's profiling is off)."""
        if response.status == 403 and "RAY_DASHBOARD_ENABLE_PROFILING" in response.text:
            self._profiling = (time.monotonic(), False)
            raise _Disabled()
        if response.status != 200:
            raise RayRequestFailed(spy.failure_reason(response.text or f"HTTP {response.status}"))
        return response.text

    async def _dashboard_dump(self, proc: Proc) -> stacks.ProcessDump:
        timeout_s = max(self.sources.dashboard.timeout_s, DUMP_TIMEOUT_S)
        if proc.task is not None:
            task_id, attempt = proc.task
            answer = await self.routes.task_traceback(
                task_id, attempt, self._node_of(proc), timeout_s=timeout_s
            )
        else:
            answer = await self.routes.worker_traceback(proc.pid, self._node_of(proc), timeout_s=timeout_s)
        text = self._answered(answer)
        try:
            return stacks.parse_dump_text(text, proc.pid)
        except ValueError as exc:
            raise RayRequestFailed(f"the dashboard answered no stack ({spy.stacks_excerpt(text)})") from exc

    def _py_spy(self) -> str:
        found = spy.find_py_spy(self.py_spy_setting)
        if found is None:
            where = self.py_spy_setting or f"beside {sys.executable} or on the PATH"
            raise RayRequestFailed(
                f"py-spy is not installed ({where}): `pip install py-spy` (ray[default] ships it), "
                f"or {PROFILING_FIX}"
            )
        return found

    async def _check_local(self, proc: Proc) -> str:
        ok, title = await anyio.to_thread.run_sync(spy.check_local_process, proc.pid)
        if not ok:
            raise RayRequestFailed(title)
        return title

    async def _local_dump(self, proc: Proc) -> stacks.ProcessDump:
        py_spy = self._py_spy()
        title = await self._check_local(proc)
        out = await spy.run_py_spy([py_spy, "dump", "--pid", str(proc.pid), "--json"], DUMP_TIMEOUT_S)
        try:
            return stacks.parse_dump_json(out, proc.pid, title)
        except (ValueError, TypeError, KeyError) as exc:
            raise RayRequestFailed(f"py-spy answered no stack ({spy.stacks_excerpt(out)})") from exc

    async def _profile(self, proc: Proc, duration_s: int) -> tuple[str, str]:
        """(raw collapsed stacks, source) of one process over ``duration_s`` seconds."""
        order, why = await self._plan(proc)
        if not order:
            raise RayRequestFailed(f"Cannot profile pid {proc.pid}: {why}.")
        errors = []
        async with self._slots:
            for source in order:
                try:
                    if source == "dashboard":
                        raw = self._answered(await self._dashboard_profile(proc, duration_s))
                        source = "dashboard-task" if proc.task else source
                    else:
                        raw = await self._local_profile(proc, duration_s)
                    return raw, source
                except _Disabled:
                    errors.append(f"dashboard: profiling is off ({PROFILING_FIX})")
                except RayMCPError as exc:
                    errors.append(f"{source}: {exc}")
        raise RayRequestFailed(f"Could not profile pid {proc.pid} on node {proc.node}: {'; '.join(errors)}.")

    async def _dashboard_profile(self, proc: Proc, duration_s: int) -> Answer:
        timeout_s = duration_s + PROFILE_SLACK_S
        if proc.task is not None:
            task_id, attempt = proc.task
            return await self.routes.task_cpu_profile(
                task_id, attempt, self._node_of(proc), duration_s=duration_s, timeout_s=timeout_s
            )
        return await self.routes.cpu_profile(
            proc.pid, self._node_of(proc), duration_s=duration_s, timeout_s=timeout_s
        )

    async def _local_profile(self, proc: Proc, duration_s: int) -> str:
        py_spy = self._py_spy()
        await self._check_local(proc)
        with tempfile.TemporaryDirectory(prefix="ray-mcp-profile-") as tmp:
            out = Path(tmp) / "profile.txt"
            cmd = [
                py_spy,
                "record",
                "--pid",
                str(proc.pid),
                "--duration",
                str(duration_s),
                "--format",
                "raw",
                "--output",
                str(out),
            ]
            await spy.run_py_spy(cmd, duration_s + PROFILE_SLACK_S)
            return out.read_text(errors="replace") if out.exists() else ""

    # -- which processes ------------------------------------------------------------------------------------

    async def _node_ips(self) -> dict[str, tuple[str | None, str | None]]:
        found = await self.state.nodes()
        return {str(n.get("node_id")): (n.get("node_ip"), n.get("state")) for n in found["result"]}

    async def processes(self, target: Target) -> list[Proc]:
        """The processes of the target: one for an actor, task or pid; a job's driver, actors and task workers."""
        nodes = await self._node_ips()

        def ip(node_id: str | None) -> str | None:
            return nodes.get(str(node_id), (None, None))[0]

        if target.kind == "pid":
            node_id = await self.nodes.resolve(str(target.node))
            pid = int(target.pid or 0)
            await self._check_worker(pid, node_id)
            return [Proc(pid, node_id, ip(node_id), f"pid {pid}")]
        if target.kind == "actor_id":
            actor_id = str(target.actor_id)
            row = await self.state.actor(actor_id)
            if row is None:
                raise NotFound(
                    f"No actor {actor_id!r} in the cluster at {self.sources.dashboard_url}. "
                    "Call list_actors to see the actor ids that exist."
                )
            return [self._actor_proc(row, ip)]
        if target.kind == "task_id":
            return [await self._task_proc(str(target.task_id).strip(), target.attempt, ip)]
        return await self._job_procs(str(target.job), ip)

    async def _check_worker(self, pid: int, node_id: str) -> None:
        """A pid a caller names must be an alive worker or driver of this cluster on that node, as the cluster
        itself reports them (the State API's workers), before any source reads it: the dashboard's profiling
        routes and py-spy would read any process on the host (ray-mcp itself, the dashboard, anything else).
        The refusal names the target only, never what runs there."""
        found = await self.state.workers(
            filters=[("node_id", "=", node_id), ("pid", "=", str(pid)), ("is_alive", "=", "True")],
            limit=PID_WORKERS_READ,
            detail=False,
        )
        rows = [r for r in found["result"] if str(r.get("pid")) == str(pid) and r.get("is_alive")]
        if not any(str(r.get("node_id")) == node_id for r in rows):
            raise InvalidArgument(
                f"pid {pid} on node {node_id} is not an alive Ray worker or driver of the cluster at "
                f"{self.sources.dashboard_url}, so its stack is not read. Give a worker's pid (list_actors and "
                "list_tasks show them), or name the actor_id, task_id or job instead."
            )

    def _actor_proc(self, row: Actor, ip: Any) -> Proc:
        if row.get("state") != "ALIVE" or not row.get("pid"):
            raise InvalidArgument(
                f"Actor {row.get('actor_id')} ({quoted(row.get('class_name'))}) is {row.get('state')}: no process runs "
                "it now, so it has no stack. get_actor shows why; diagnose_job explains a job's dead actors."
            )
        pid = int(row.get("pid") or 0)
        return Proc(pid, row.get("node_id"), ip(row.get("node_id")), str(row.get("class_name")))

    async def _task_proc(self, task_id: str, attempt: int, ip: Any) -> Proc:
        attempts = await self.state.task_attempts(task_id)
        rows = sorted(attempts, key=lambda r: -int(r.get("attempt_number") or 0))
        if not rows:
            raise NotFound(
                f"No task {task_id!r} in the cluster at {self.sources.dashboard_url}. Task ids appear "
                "in list_tasks."
            )
        row = next((r for r in rows if int(r.get("attempt_number") or 0) == attempt), rows[0])
        if row.get("state") != "RUNNING":
            raise InvalidArgument(
                f"Task {task_id} ({quoted(row.get('name'))}) is {row.get('state')}, not RUNNING: no process runs it, so "
                "it has no stack. A PENDING task waits for resources or arguments: diagnose_job says which."
            )
        name = str(row.get("name") or row.get("func_or_class_name") or "?")
        pid = int(row.get("worker_pid") or 0)
        role = f"task {name}"
        if row.get("actor_id"):
            actor = await self.state.actor(str(row["actor_id"]))
            if actor is not None:
                pid, role = pid or int(actor.get("pid") or 0), str(actor.get("class_name"))
        if not pid and await self.profiling_enabled() is False:
            raise RayRequestFailed(
                f"Ray does not report the worker pid of task {task_id} yet, and the dashboard's profiling "
                f"routes (which find it by task id) are off; retry in a second, or {PROFILING_FIX}."
            )
        attempt_number = int(row.get("attempt_number") or 0)
        node_id = row.get("node_id")
        return Proc(pid, node_id, ip(node_id), role, task=(task_id, attempt_number))

    async def _job_procs(self, job: str, ip: Any) -> list[Proc]:
        details = await self.jobs.details(job)
        status = details.get("status")
        ident = details.get("submission_id") or details.get("job_id") or job
        if status in ("SUCCEEDED", "FAILED", "STOPPED"):
            raise InvalidArgument(
                f"Job {ident} is {status}: its processes have exited, so there are no stacks to read. "
                f"diagnose_job job={ident!r} explains how it ended."
            )
        job_id = details.get("job_id")
        if not job_id:
            started = (
                "has started but not yet connected to Ray; retry in a few seconds"
                if status == "RUNNING"
                else (
                    f"has not started yet, so it has no stacks. diagnose_job job={ident!r} says what it waits for"
                )
            )
            raise InvalidArgument(f"Job {ident} is {status}: its driver {started}.")
        procs: list[Proc] = []
        driver = details.get("driver_info") or {}
        if driver.get("pid"):
            node_id = details.get("driver_node_id")
            procs.append(
                Proc(
                    int(driver["pid"]),
                    node_id,
                    driver.get("node_ip_address") or ip(node_id),
                    "driver",
                    driver=True,
                )
            )
        by_job = [("job_id", "=", str(job_id))]
        actors, tasks = await asyncio.gather(
            self.state.actors(
                filters=[*by_job, ("state", "=", "ALIVE")], limit=STATE_API_MAX_ROWS, detail=False
            ),
            self.state.tasks(filters=[*by_job, ("state", "=", "RUNNING")], limit=STATE_API_MAX_ROWS),
        )
        seen = {(p.node_id, p.pid) for p in procs}
        for row in sorted(actors["result"], key=lambda r: str(r.get("class_name"))):
            if not row.get("pid") or str(row.get("class_name")).startswith("JobSupervisor"):
                continue
            proc = Proc(
                int(row["pid"]), row.get("node_id"), ip(row.get("node_id")), str(row.get("class_name"))
            )
            if (proc.node_id, proc.pid) not in seen:
                seen.add((proc.node_id, proc.pid))
                procs.append(proc)
        for row in tasks["result"]:
            if row.get("actor_id") or not row.get("worker_pid") or row.get("type") != "NORMAL_TASK":
                continue
            name = str(row.get("func_or_class_name") or row.get("name") or "?").rsplit(".", 1)[-1]
            proc = Proc(int(row["worker_pid"]), row.get("node_id"), ip(row.get("node_id")), f"task {name}")
            if (proc.node_id, proc.pid) not in seen:
                seen.add((proc.node_id, proc.pid))
                procs.append(proc)
        return procs

    # -- the tools ------------------------------------------------------------------------------------------

    async def traces(self, target: Target, *, limit: int, max_frames: int) -> models.StackTraces:
        """The stacks of the target's processes (the first ``limit``), collapsed: all of them, the edge fits
        the answer it sends (StackTraces is a Listed)."""
        procs = await self.processes(target)
        if not procs:
            raise NotFound(
                f"{target.label()} has no running process (no driver pid, no alive actor, no running task). "
                "diagnose_job says what it waits for."
            )
        chosen = procs[:limit]
        samples = await asyncio.gather(*(self._dump(p) for p in chosen))
        return self._shape(
            target.label(),
            list(samples),
            total=len(procs),
            max_frames=max_frames,
            limit=limit,
        )

    def _shape(
        self,
        label: str,
        samples: list[stacks.Sample],
        *,
        total: int,
        max_frames: int,
        limit: int,
    ) -> models.StackTraces:
        ok = [s for s in samples if s.dump is not None]
        failed = [s for s in samples if s.dump is None]
        if not ok:
            reasons = sorted({s.error or "unknown" for s in failed})
            raise RayRequestFailed(
                f"Could not read the stack of any of the {len(samples)} process(es) of {label}: "
                + " | ".join(reasons[:STACK_FAILURES_QUOTED])
            )
        groups = stacks.collapse(ok, max_frames=max_frames)
        sources = sorted({s.source for s in ok})
        hints = []
        if total > len(samples):
            hints.append(
                f"Sampled {len(samples)} of {total} processes (limit={limit}); raise limit (max 64)."
            )
        if any(g.state == "active" and not g.blocked_in for g in groups):
            hints.append("A process runs code rather than waiting: cpu_profile it (actor_id or pid + node).")
        return models.StackTraces(
            target=label,
            verdict=stacks.verdict(label, groups, len(ok)),
            source="+".join(sources),
            processes_total=total,
            processes_sampled=len(ok),
            processes_failed=len(failed),
            processes_left_out=max(0, total - len(samples)),
            groups=groups,
            failures=[f"pid {s.pid}@{s.node} ({stacks.role_text(s.role)}): {s.error}" for s in failed],
            hints=hints,
        )

    async def cpu_profile(
        self, target: Target, *, duration_s: int, top: int, max_frames: int
    ) -> models.CpuProfile:
        (proc,) = await self.processes(target)
        raw, source = await self._profile(proc, duration_s)
        parsed = profiles.parse_raw_profile(raw)
        functions, samples = profiles.profile_functions(parsed, top)
        label = f"{target.label()} (pid {proc.pid} on {proc.node}, {stacks.role_text(proc.role)})"
        hints = []
        if samples == 0:
            verdict = (
                f"{label} used no CPU in {duration_s} s: it waits (sleeping, blocked in ray.get or I/O). "
                "stack_traces shows where."
            )
            hints.append("Call stack_traces with the same target to see what it waits in.")
        else:
            project = next((f for f in functions if f.project and f.own_samples), None)
            hot = functions[0]
            verdict = (
                f"{label}: {samples} samples in {duration_s} s; hottest function {hot.function} "
                f"({hot.file}:{hot.line}) {hot.own_pct:g}% own time"
            )
            if project is not None and project is not hot:
                verdict += f"; hottest project function {project.function} ({project.file}:{project.line}) {project.own_pct:g}%"
        return models.CpuProfile(
            target=label,
            verdict=verdict,
            source=source,
            duration_s=duration_s,
            samples=samples,
            functions=functions,
            hottest_stack=profiles.hottest_path(parsed, max_frames),
            hints=hints,
        )


class _Disabled(Exception):
    """The dashboard's profiling routes answered 403 (RAY_DASHBOARD_ENABLE_PROFILING is off)."""
