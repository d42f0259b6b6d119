"""The embedded local cluster: a Ray head node that ray-mcp (and the tests and the bench) start themselves.

``ray start --head --block`` in a private temp dir, on free ports, in its own process group, killed by the kernel
if ray-mcp dies; stopped by the pids it started, never by ``ray stop`` (which would kill every Ray process on the
machine). The temp dirs of heads whose ray-mcp died without stopping them are swept at the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from ray_mcp.child_env import ray_env
from ray_mcp.errors import ClusterUnavailable
from ray_mcp.sources.dashboard import head_node_alive
from ray_mcp.text import clean_text, quoted

if TYPE_CHECKING:
    pass

log = logging.getLogger("ray_mcp.local_head")


PROBE_TIMEOUT_S = 2.0


STOP_GRACE_S = 3.0


# The setting that gives the embedded head longer to start (named in every error that says it did not).
START_TIMEOUT_ENV = "RAY_MCP_CLUSTER_START_TIMEOUT_S"


# Ray's own limit on how long `ray start` waits for its dashboard (60 s in Ray): raised to ours for the heads
# ray-mcp starts, since on a busy machine the dashboard alone can take longer and Ray then gives up.
RAY_DASHBOARD_TIMEOUT_ENV = "RAY_DASHBOARD_STARTUP_TIMEOUT_S"


# Lines of Ray's output that say why a start failed, most telling first.
FAILURE_MARKERS = ("Failed to start", "Address already in use", "Error", "error")


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on this machine (held open together so they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    if beside.exists():
        return str(beside)
    found = shutil.which("ray")
    if not found:
        raise ClusterUnavailable(
            "Cannot start an embedded Ray cluster: the `ray` command is not installed next to this Python "
            f"({sys.executable}). Install ray[default], or pass --address of a running cluster."
        )
    return found


def spawn_owned(cmd: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own process group, to be SIGKILLed by the kernel when ray-mcp dies.

    ``ray start --block`` turns on Ray's kernel fate-sharing, so its daemons (GCS, raylet, dashboard) die
    with it, and workers die with their raylet: even a SIGKILLed ray-mcp leaves no Ray process behind.
    Its own process group keeps a terminal's Ctrl-C (or an MCP client's killpg) off the Ray daemons, so
    that ray-mcp shuts them down itself.

    No Python code runs between fork and exec: the parent-death signal is set by util-linux's ``setpriv``,
    which keeps it across its exec (the signal fires when the thread that started it ends: start it from one
    that lasts). A ``preexec_fn`` did it before, and a fork of a process with threads (gRPC's) that runs
    Python in the child crashed it now and then ("Fatal Python error: Segmentation fault" in
    threading._after_fork, in a full test run); the start was retried. Without setpriv (not Linux), the
    process group alone."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv:
        cmd = [setpriv, "--pdeathsig", "KILL", "--", *cmd]
    return subprocess.Popen(cmd, process_group=0, **popen)


@dataclass
class LocalHead:
    """One Ray head node run by ``ray start --head --block`` in its own temp dir, on free ports."""

    num_cpus: int | None = None
    resources: str | None = None
    object_store_memory: int | None = None  # bytes; Ray's default is 30% of memory
    labels: str | None = None  # node labels as `ray start --labels` takes them: "key1=val1,key2=val2"
    temp_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ray-mcp-")))
    gcs_port: int = 0
    dashboard_port: int = 0
    process: subprocess.Popen[bytes] | None = None
    _owned_temp_dir: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. RAY_AUTH_MODE=token for a token-auth head
    start_timeout_s: float | None = None  # Ray's own dashboard wait is raised to this (wait_ready's budget)

    def __post_init__(self) -> None:
        if self._owned_temp_dir:  # who made it: a later start removes it if this process died without stop()
            (self.temp_dir / OWNER_FILE).write_text(str(os.getpid()))

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"127.0.0.1:{self.gcs_port}"

    @property
    def log_path(self) -> Path:
        return self.temp_dir / "ray-start.log"

    def command(self) -> list[str]:
        ports = free_ports(8)
        self.gcs_port, self.dashboard_port = ports[0], ports[1]
        cmd = [
            ray_executable(),
            "start",
            "--head",
            "--block",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
            f"--port={ports[0]}",
            f"--dashboard-port={ports[1]}",
            f"--ray-client-server-port={ports[2]}",
            f"--dashboard-agent-listen-port={ports[3]}",
            f"--dashboard-agent-grpc-port={ports[4]}",
            f"--runtime-env-agent-port={ports[5]}",
            f"--metrics-export-port={ports[6]}",
            f"--node-manager-port={ports[7]}",
        ]
        return cmd + self.resource_args()

    def resource_args(self) -> list[str]:
        """The node's resources, as `ray start` takes them (shared by heads and the workers joining them)."""
        args = [f"--num-cpus={self.num_cpus}"] if self.num_cpus is not None else []
        args += [f"--object-store-memory={self.object_store_memory}"] if self.object_store_memory else []
        args += [f"--labels={self.labels}"] if self.labels else []
        return args + ([f"--resources={self.resources}"] if self.resources else [])

    def spawn(self) -> None:
        """Start the head process (returns at once; wait_ready waits for the dashboard)."""
        cmd = self.command()
        env = self.environment()
        with open(self.log_path, "ab") as out:
            self.process = spawn_owned(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )

    def environment(self) -> dict[str, str]:
        """The head's environment (child_env.ray_env: no setting or credential of ray-mcp's; Ray's token as a
        file), with the settings every head ray-mcp starts has."""
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        # The dashboard's profiling routes (/worker/traceback, /worker/cpu_profile) that stack_traces and
        # cpu_profile read: off by default in Ray, on in every head ray-mcp starts (extra_env may turn it off).
        env["RAY_DASHBOARD_ENABLE_PROFILING"] = "1"
        if self.start_timeout_s is not None and RAY_DASHBOARD_TIMEOUT_ENV not in env:
            env[RAY_DASHBOARD_TIMEOUT_ENV] = str(max(60, math.ceil(self.start_timeout_s)))
        env = ray_env(self.temp_dir, source=env, extra=self.extra_env)
        # Job entrypoints (`python train.py`) are looked up on the PATH of the Ray processes: put this Python's
        # environment first, so that they run with the same Python and Ray as the head.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    async def wait_ready(self, timeout_s: float, headers: Mapping[str, str] | None = None) -> None:
        """Wait until the dashboard answers and the head node is registered as ALIVE."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise ClusterUnavailable(
                    f"The embedded Ray head exited with code {self.process.returncode} while starting: "
                    f"{self.failure_cause()}."
                )
            if await head_node_alive(self.dashboard_url, PROBE_TIMEOUT_S, headers):
                return
            if time.monotonic() > deadline:
                raise ClusterUnavailable(
                    f"The embedded Ray head did not become ready within {timeout_s:g} s "
                    f"(dashboard {self.dashboard_url}): {self.failure_cause()}."
                )
            await asyncio.sleep(0.25)

    def failure_cause(self) -> str:
        """Why the start failed, quoted from Ray's own output (read before stop() deletes the temp dir)."""
        logs = self.temp_dir / "session_latest" / "logs"
        for path in (self.log_path, logs / "dashboard.err", logs / "dashboard.log"):
            try:
                lines = [clean_text(ln) for ln in path.read_text(errors="replace").splitlines()]
            except OSError:
                continue
            for marker in FAILURE_MARKERS:
                if found := next((ln for ln in lines if marker in ln), None):
                    return f"Ray says {quoted(found)} (in {path.name})"
        return "Ray's output names no cause"

    def owned_pids(self) -> set[int]:
        """Every live process this head started: the tree under ``ray start`` and anything using its temp dir."""
        pids: set[int] = set()
        if self.process is not None:
            with contextlib.suppress(psutil.Error):
                root = psutil.Process(self.process.pid)
                pids.add(root.pid)
                pids.update(child.pid for child in root.children(recursive=True))
        for proc in using_dirs([self.temp_dir]).get(self.temp_dir, []):
            pids.add(proc.pid)
            with contextlib.suppress(psutil.Error):
                pids.update(child.pid for child in proc.children(recursive=True))
        pids.discard(os.getpid())
        return pids

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop exactly the processes this head started; never touches other Ray processes.

        Like ``ray stop``, but scoped to this head: SIGTERM to its whole process group (and to any process
        of its temp dir that left the group) at once, then SIGKILL to whatever outlives the grace period.
        Ray's own sequential shutdown takes ~7 s, while MCP clients kill a server ~2 s after closing stdin.
        """
        pids = self.owned_pids()
        self._signal_all(signal.SIGTERM, pids)
        _gone, alive = psutil.wait_procs([p for p in map(_proc, pids) if p is not None], timeout=grace_s)
        self._signal_all(signal.SIGKILL, {p.pid for p in alive} | self.owned_pids())
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        if self._owned_temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _signal_all(self, signum: int, pids: set[int]) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)


def _proc(pid: int) -> psutil.Process | None:

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


OWNER_FILE = "ray-mcp.pid"


def using_dirs(dirs: list[Path]) -> dict[Path, list[psutil.Process]]:
    """The processes whose command line names each of ``dirs`` (Ray's processes name their temp dir), by dir."""
    found: dict[Path, list[psutil.Process]] = {}
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error, TypeError):
            args = proc.info["cmdline"] or []
            for d in dirs:
                if any(str(d) in arg for arg in args):
                    found.setdefault(d, []).append(proc)
    return found


def sweep_abandoned_temp_dirs(root: str | None = None) -> list[Path]:
    """Remove the ``ray-mcp-*`` temp dirs of heads whose ray-mcp died without stopping them (SIGKILL, a
    client that gave up mid-start): the pid in their owner file is gone and no process uses the dir."""
    abandoned = []
    for path in Path(root or tempfile.gettempdir()).glob("ray-mcp-*"):
        try:
            owner = int((path / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not one of ours, or its owner has not written the file yet
        if owner != os.getpid() and not psutil.pid_exists(owner):
            abandoned.append(path)
    if abandoned:
        in_use = using_dirs(abandoned)
        abandoned = [p for p in abandoned if p not in in_use]
    for path in abandoned:
        shutil.rmtree(path, ignore_errors=True)
    return abandoned


async def start_local_head(
    *,
    num_cpus: int | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    attempts: int = 3,
    on_spawn: Callable[[LocalHead], None] | None = None,
    extra_env: Mapping[str, str] | None = None,
    **head_options: Any,
) -> LocalHead:
    """Start a LocalHead and wait for it. The free ports are picked before Ray binds them, so another process
    can take one in between: when the head exits while starting, try again on new ports. The last failure
    stops the head (its temp dir goes, Ray's cause is quoted in the error) and names the setting to raise."""
    for gone in await asyncio.to_thread(sweep_abandoned_temp_dirs):
        log.info("ray-mcp: removed %s, left by a ray-mcp that exited without stopping its head", gone)
    for attempt in range(1, attempts + 1):
        head = LocalHead(
            num_cpus=num_cpus, extra_env=dict(extra_env or {}), start_timeout_s=timeout_s, **head_options
        )
        log.info("ray-mcp: starting a local Ray head in %s (attempt %d)", head.temp_dir, attempt)
        head.spawn()
        if on_spawn is not None:
            on_spawn(head)
        try:
            await head.wait_ready(timeout_s, headers)
            return head
        except ClusterUnavailable as exc:
            exited = head.process is not None and head.process.poll() is not None
            await asyncio.to_thread(head.stop)
            if exited and attempt < attempts:  # most often a port taken between free_ports and Ray's bind
                log.info("ray-mcp: %s Retrying on new ports.", exc)
                continue
            log.warning("ray-mcp: %s", exc)
            raise ClusterUnavailable(
                f"{exc} On a busy machine, give it longer: {START_TIMEOUT_ENV}={2 * timeout_s:g} "
                f"(now {timeout_s:g}), or pass --address of a running cluster."
            ) from exc
    raise AssertionError("unreachable")  # pragma: no cover
