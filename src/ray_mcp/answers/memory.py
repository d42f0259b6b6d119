"""memory_profile and gpu_profile: memray attached to one worker, and a Torch GPU trace of one, through the
dashboard's profiling routes (``RAY_DASHBOARD_ENABLE_PROFILING=1``, the gate of stack_traces and cpu_profile),
or, for memory_profile, memray run on this host.

``/memory_profile`` attaches memray on the worker's node (a pid, or a task attempt found by its id), keeps it
for ``duration`` seconds and answers memray's report; ``/worker/gpu_profile`` profiles ``num_iterations``
optimizer steps of a Torch training worker and answers a redirect to the trace file on its node. The process
is found as stack_traces finds it (answers/stacks.py); a pid is checked to be an alive worker of this cluster.

Sources of a memory profile, in order, as stack_traces picks between the dashboard and local py-spy
(``--stack-source``: ``dashboard`` never runs memray here, ``py-spy`` means "this host only"):

1. the dashboard's ``/memory_profile``, when its profiling routes are on;
2. memray run here (sources/memray.py) against the worker's pid, when the worker runs on this host;
3. otherwise an error that names ``RAY_DASHBOARD_ENABLE_PROFILING=1``.
"""

from __future__ import annotations

import sys
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread

from ray_mcp import models
from ray_mcp.answers.stacks import PROFILING_FIX, Proc, Stacks
from ray_mcp.answers.targets import Target
from ray_mcp.errors import RayMCPError, RayRequestFailed
from ray_mcp.limits import GPU_PROFILE_TIMEOUT_S, LINE_CHARS, MEMORY_SLACK_S
from ray_mcp.shaping import memory, stacks
from ray_mcp.sources import memray as local_memray
from ray_mcp.sources import py_spy as spy
from ray_mcp.sources.dashboard import Answer
from ray_mcp.text import head_text, quoted

# memray is not in ray[default]: every node whose workers are profiled needs it in the Python that runs Ray.
MEMRAY_FIX = (
    "install memray on the node, in the Python environment that runs Ray (`pip install memray`; ray-mcp's "
    "`memray` extra installs it beside ray-mcp), and make sure gdb (or lldb) is there too: memray attaches "
    "with it"
)
MEMRAY_MISSING = "memray is not installed"  # Ray's words (profile_manager.py) when the node lacks memray
# Ray's words (gpu_profile_manager.py) when the node's agent found no GPU or no dynolog at start.
GPU_DISABLED = "GPU profiling is not enabled on node"
GPU_NOT_TORCH = "The profiling command failed for pid="  # the worker is not a Torch training process


class MemoryProfiles:
    """Memory and GPU profiles of one cluster's workers; the processes are found by ``stacks``."""

    def __init__(self, stacks: Stacks) -> None:
        self.stacks = stacks
        self.routes = stacks.routes

    async def _one(self, target: Target, what: str) -> Proc:
        if await self.stacks.profiling_enabled() is False:
            raise RayRequestFailed(
                f"Cannot {what} {target.label()}: the dashboard's profiling routes are off. {PROFILING_FIX}."
            )
        (proc,) = await self.stacks.processes(target)
        if not proc.node_id:
            raise RayRequestFailed(
                f"Ray does not report the node of {target.label()}, so the dashboard cannot route the request; "
                "retry in a second."
            )
        return proc

    def _failed(self, answer: Answer, label: str, what: str) -> RayRequestFailed:
        text = answer.text or f"HTTP {answer.status}"
        if answer.status == 403:
            return RayRequestFailed(
                f"Cannot {what} {label}: the dashboard's profiling routes are off. {PROFILING_FIX}."
            )
        if MEMRAY_MISSING in text:
            return RayRequestFailed(
                f"Cannot {what} {label}: memray is not installed on its node. To fix: {MEMRAY_FIX}."
            )
        return RayRequestFailed(f"Could not {what} {label}: {spy.failure_reason(text)}")

    async def _memory_source(self, target: Target) -> tuple[Proc, str]:
        """The worker to profile, and where its memray runs: "dashboard" (the profiling routes) or "memray"
        (here, when the routes are off and the worker runs on this host)."""
        enabled = await self.stacks.profiling_enabled() if self.stacks.source != "py-spy" else False
        (proc,) = await self.stacks.processes(target)
        if enabled is not False and self.stacks.source != "py-spy":
            if not proc.node_id:
                raise RayRequestFailed(
                    f"Ray does not report the node of {target.label()}, so the dashboard cannot route the "
                    "request; retry in a second."
                )
            return proc, "dashboard"
        if self.stacks.source != "dashboard" and proc.pid and await self.stacks.is_local(proc):
            return proc, "memray"
        if self.stacks.source == "dashboard":
            why = "the dashboard's profiling routes are off"
        else:
            why = (
                f"the dashboard's profiling routes are off and {target.label()} runs on node {proc.node}, not "
                "this host, so memray cannot run here against it"
            )
        raise RayRequestFailed(f"Cannot memory-profile {target.label()}: {why}. {PROFILING_FIX}.")

    async def _dashboard_report(
        self, proc: Proc, label: str, *, duration_s: int, leaks_only: bool, native: bool
    ) -> tuple[str, bool]:
        """memray's flame graph page from ``/memory_profile``, and whether Ray warned of a shared worker."""
        answer = await self.routes.memory_profile(
            node_id=str(proc.node_id),
            pid=None if proc.task else proc.pid,
            task=proc.task,
            duration_s=duration_s,
            leaks=leaks_only,
            native=native,
            timeout_s=duration_s + MEMORY_SLACK_S,
        )
        if answer.status != 200:
            raise self._failed(answer, label, "memory-profile")
        return answer.text, memory.shared_worker(answer.text)

    async def _local_report(
        self, proc: Proc, label: str, *, duration_s: int, leaks_only: bool, native: bool
    ) -> str:
        """memray's flame graph page, memray run here against the worker's pid (checked to be a Ray process)."""
        found = local_memray.find_memray()
        if found is None:
            raise RayRequestFailed(
                f"Cannot memory-profile {label}: the dashboard's profiling routes are off and memray is not "
                f"installed on this host (beside {sys.executable} or on the PATH). To fix: {MEMRAY_FIX}; or "
                f"{PROFILING_FIX}."
            )
        ok, why = await anyio.to_thread.run_sync(spy.check_local_process, proc.pid)
        if not ok:
            raise RayRequestFailed(f"Cannot memory-profile {label}: {why}.")
        run = local_memray.flamegraph(
            found,
            proc.pid,
            duration_s=duration_s,
            leaks=leaks_only,
            native=native,
            step_timeout_s=MEMORY_SLACK_S,
        )
        try:
            return await run
        except RayRequestFailed as exc:
            raise RayRequestFailed(
                f"Could not memory-profile {label} with memray on this host: {exc}"
            ) from exc

    async def memory_profile(
        self, target: Target, *, duration_s: int, leaks_only: bool, native: bool, top: int
    ) -> models.MemoryProfile:
        proc, source = await self._memory_source(target)
        label = f"{target.label()} (pid {proc.pid} on {proc.node}, {stacks.role_text(proc.role)})"
        if source == "dashboard":
            page, shared = await self._dashboard_report(
                proc, label, duration_s=duration_s, leaks_only=leaks_only, native=native
            )
        else:
            local = self._local_report(
                proc, label, duration_s=duration_s, leaks_only=leaks_only, native=native
            )
            page, shared = await local, False
        try:
            nodes = memory.parse_flamegraph(page)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise RayRequestFailed(
                f"{'The dashboard' if source == 'dashboard' else 'memray'} answered no memray report for "
                f"{label} ({spy.stacks_excerpt(page)})."
            ) from exc
        mode = "leaks" if leaks_only else "peak"
        rows, lines_total = memory.allocators(nodes, top)
        leaks = memory.leak_candidates(nodes) if leaks_only else []
        total = nodes[0].total if nodes else 0
        hints = []
        if not leaks_only:
            hints.append(
                "leaks_only=true reports what is still held at the end of the window: the leak candidates."
            )
        if not native:
            hints.append("native=true adds C/C++ frames (for memory that numpy, Arrow or Torch allocate).")
        if lines_total > len(rows):
            hints.append(f"Showing {len(rows)} of {lines_total} allocating lines; raise top to see more.")
        return models.MemoryProfile(
            target=label,
            verdict=memory.memory_verdict(label, mode, duration_s, total, rows, leaks),
            source=source,
            mode=mode,
            duration_s=duration_s,
            total_bytes=total,
            allocations=nodes[0].allocations if nodes else 0,
            allocators=rows,
            allocators_total=lines_total,
            leak_candidates=leaks,
            largest_stack=memory.largest_stack(nodes),
            warning="another task runs in the same worker: the report may hold its allocations too"
            if shared
            else None,
            hints=hints,
        )

    async def _node_gpus(self, node_id: str) -> float | None:
        try:
            rows = (await self.stacks.state.nodes())["result"]
        except RayMCPError:
            return None
        row = next((r for r in rows if r.get("node_id") == node_id), None)
        return None if row is None else float((row.get("resources_total") or {}).get("GPU", 0))

    async def gpu_profile(self, target: Target, *, steps: int) -> models.GpuProfile:
        proc = await self._one(target, "GPU-profile")
        label = f"{target.label()} (pid {proc.pid} on {proc.node}, {stacks.role_text(proc.role)})"
        gpus = await self._node_gpus(str(proc.node_id))
        if gpus == 0:
            return models.GpuProfile(
                target=label,
                verdict=f"{label} runs on a node without a GPU (its resources list none): nothing to GPU-profile.",
                gpu=False,
                steps=steps,
                hints=["cpu_profile and memory_profile profile a CPU worker."],
            )
        answer = await self.routes.gpu_profile(
            proc.pid, str(proc.node_id), steps=steps, timeout_s=GPU_PROFILE_TIMEOUT_S
        )
        if answer.status in (301, 302, 303, 307) and answer.location:
            query = parse_qs(urlsplit(answer.location).query)
            trace = next(iter(query.get("filename") or []), None)
            ip = next(iter(query.get("node_ip") or []), None)
            return models.GpuProfile(
                target=label,
                verdict=f"{label}: Torch traced {steps} optimizer steps; the trace is {quoted(trace)} on node {ip}.",
                gpu=True,
                steps=steps,
                trace_file=trace,
                node_ip=ip,
                hints=[
                    "Open the trace in Perfetto or chrome://tracing; the dashboard serves it at "
                    f"{head_text(answer.location, LINE_CHARS)}."
                ],
            )
        if answer.status != 200 and GPU_DISABLED in answer.text:
            return models.GpuProfile(
                target=label,
                verdict=f"{label}: Ray's agent on its node has GPU profiling off: it detected no GPU there, or "
                "the profiler it needs (dynolog) is not installed.",
                gpu=bool(gpus) if gpus is not None else None,
                steps=steps,
                hints=[
                    "Install dynolog on GPU nodes (Ray's GPU profiling needs it), then restart Ray there."
                    if gpus
                    else "cpu_profile and memory_profile profile a CPU worker."
                ],
            )
        if answer.status != 200 and GPU_NOT_TORCH in answer.text:
            raise RayRequestFailed(
                f"Could not GPU-profile {label}: it is not a Torch training process that Ray can trace. Start the "
                "training workers with KINETO_USE_DAEMON=1 KINETO_DAEMON_INIT_DELAY_S=5 in their env_vars "
                "(TorchTrainer workers), then call gpu_profile again."
            )
        raise self._failed(answer, label, "GPU-profile")
