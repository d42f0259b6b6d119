"""Find the cluster to talk to, or start and stop the embedded local one.

Addresses come in the forms of the address table (addresses.py: one row per form, each with the kind resolved
here), and every client we use wants the dashboard URL: a dashboard URL is that; a Ray Client address has its dashboard assumed on the same host at
8265; a GCS knows where its dashboard listens, so we ask it.

With no address (or Ray's ``auto``), a cluster answering on 127.0.0.1:8265 is used; failing that, ray-mcp
starts its own head node (``ray start --head --block``) in a private temp dir on free ports, and on exit stops
exactly the processes that one started. It never runs ``ray stop``, which would kill every Ray process on the
machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import psutil

# The address table (one row per form) is read here: its names stay importable from this module.
from ray_mcp.addresses import ADDRESS_FORMS as ADDRESS_FORMS
from ray_mcp.addresses import DEFAULT_DASHBOARD_PORT, Address
from ray_mcp.addresses import parse_address as parse_address
from ray_mcp.child_env import ray_env
from ray_mcp.errors import ClusterUnavailable, unreachable
from ray_mcp.sources.dashboard import dashboard_answers, head_node_alive
from ray_mcp.sources.history import HistoryRef, parse_history_address
from ray_mcp.text import clean_text, quoted

if TYPE_CHECKING:
    from ray_mcp.local_prometheus import LocalPrometheus
    from ray_mcp.settings import Settings
    from ray_mcp.sources.gcs import GcsLookup
    from ray_mcp.sources.kube_target import RayTarget
    from ray_mcp.sources.kubernetes import Kube

log = logging.getLogger("ray_mcp.cluster")

LOCAL_DASHBOARD_URL = f"http://127.0.0.1:{DEFAULT_DASHBOARD_PORT}"
PROBE_TIMEOUT_S = 2.0
STOP_GRACE_S = 3.0
# The setting that gives the embedded head longer to start (named in every error that says it did not).
START_TIMEOUT_ENV = "RAY_MCP_CLUSTER_START_TIMEOUT_S"
# Ray's own limit on how long `ray start` waits for its dashboard (60 s in Ray): raised to ours for the heads
# ray-mcp starts, since on a busy machine the dashboard alone can take longer and Ray then gives up.
RAY_DASHBOARD_TIMEOUT_ENV = "RAY_DASHBOARD_STARTUP_TIMEOUT_S"
# After a failed embedded start, the next call tries again once this long has passed, doubling per failure.
RESTART_BACKOFF_S = 5.0
RESTART_BACKOFF_MAX_S = 60.0
# The Prometheus beside the embedded head: Ray's dashboard writes its config a moment after the head is ready.
EMBEDDED_PROMETHEUS_START_S = 30.0
# Lines of Ray's output that say why a start failed, most telling first.
FAILURE_MARKERS = ("Failed to start", "Address already in use", "Error", "error")

T = TypeVar("T")


# -- the embedded cluster -----------------------------------------------------------------------------------


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


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Put ``ray start`` in its own process group, and have the kernel SIGKILL it when ray-mcp dies.

    ``ray start --block`` turns on Ray's kernel fate-sharing, so its daemons (GCS, raylet, dashboard) die
    with it, and workers die with their raylet: even a SIGKILLed ray-mcp leaves no Ray process behind.
    Its own process group keeps a terminal's Ctrl-C (or an MCP client's killpg) off the Ray daemons, so
    that ray-mcp shuts them down itself.
    """
    os.setpgrp()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


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
            self.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=die_with_parent if sys.platform.startswith("linux") else None,
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


# -- choosing the cluster -----------------------------------------------------------------------------------


async def tcp_reachable(host: str, port: int, timeout_s: float) -> bool:
    """Does anything accept a TCP connection at host:port within the timeout? (Never raises.)"""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (TimeoutError, OSError, ValueError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def in_daemon_thread(fn: Callable[..., T], *args: object) -> asyncio.Future[T]:
    """Run a blocking call in a daemon thread: unlike the default executor, the process never waits for it
    at exit (a Ray RPC to a dead address can block for a minute)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, value))

    def run() -> None:
        try:
            value = fn(*args)
        except BaseException as exc:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=run, name="ray-mcp-gcs-lookup", daemon=True).start()
    return future


@dataclass
class Resolved:
    dashboard_url: str
    source: str  # embedded | local | external
    gcs_address: str | None = None  # when known (embedded cluster, or a GCS address was given)
    kube: RayTarget | None = None  # a k8s:// address: the KubeRay object and the head service it resolved to
    history: HistoryRef | None = None  # a history+ address: the record read instead of a live cluster
    prometheus: str | None = None  # the Prometheus ray-mcp started beside its embedded head


class ClusterManager:
    """Resolves the configured address once (in the background) and owns the embedded cluster, if any."""

    def __init__(self, settings: Settings, gcs_lookup: GcsLookup | None = None) -> None:
        self.settings = settings
        self._gcs_lookup = gcs_lookup
        self._task: asyncio.Task[Resolved] | None = None
        self.embedded: LocalHead | None = None
        self.embedded_prometheus: LocalPrometheus | None = None  # started beside the embedded head
        self.kube: Kube | None = None  # the Kubernetes API connection of a k8s:// address
        self._lock = asyncio.Lock()
        self._failures = 0  # embedded starts failed in a row
        self._retry_at = 0.0  # monotonic time from which a call may start the embedded cluster again

    def start(self) -> None:
        """Begin resolving in the background (idempotent). The first tool call waits for it."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._resolve())

    async def resolved(self) -> Resolved:
        async with self._lock:
            if self._task is None or (self._task.done() and self._retryable_failure()):
                self._task = asyncio.get_running_loop().create_task(self._resolve())
            task = self._task
        try:
            return await asyncio.shield(task)
        except ClusterUnavailable as exc:
            wait_s = self._retry_at - time.monotonic()
            if self._failures and wait_s > 0:
                raise ClusterUnavailable(
                    f"{exc} The next call after {wait_s:.0f} s starts it again."
                ) from exc
            raise

    def _retryable_failure(self) -> bool:
        """A failure is never kept for good: a later call resolves again (embedded starts: after a backoff)."""
        assert self._task is not None
        return self._task.exception() is not None and time.monotonic() >= self._retry_at

    async def _resolve(self) -> Resolved:
        s = self.settings
        if s.dashboard_url:
            dashboard = parse_address(s.dashboard_url)
            return Resolved(dashboard.url or dashboard.original, "external")
        if s.address and s.embedded != "always" and (address := parse_address(s.address)).kind != "local":
            return await self._resolve_address(address)
        if s.embedded != "always" and await dashboard_answers(
            LOCAL_DASHBOARD_URL, PROBE_TIMEOUT_S, s.dashboard_request_headers(local_cluster=True)
        ):
            log.info("ray-mcp: using the local Ray cluster at %s", LOCAL_DASHBOARD_URL)
            return Resolved(LOCAL_DASHBOARD_URL, "local")
        if s.embedded == "never":
            raise unreachable(LOCAL_DASHBOARD_URL, "no address configured and no local cluster answers")
        return await self._start_embedded()

    async def _resolve_address(self, address: Address) -> Resolved:
        if address.kind == "kubernetes":
            return await self._resolve_kubernetes(address)
        if address.kind == "history":
            ref = parse_history_address(address.original)
            log.info("ray-mcp: reading the record of %s from the History Server %s", ref.label, ref.url)
            return Resolved(ref.url, "history", history=ref)
        if address.url is not None:  # the form names the dashboard outright
            log.info("ray-mcp: using the Ray cluster whose dashboard is %s", address.url)
            return Resolved(address.url, "external")
        if address.kind == "gcs" and self._gcs_lookup is not None:
            gcs = address.original if address.port else f"{address.host}:6379"
            url = None
            # Ray's GCS client retries an unreachable address for ~50 s, printing C++ warnings on stderr, in a
            # thread that nothing interrupts: only ask it once a TCP connection shows something listens there.
            if await tcp_reachable(address.host, address.port or 6379, PROBE_TIMEOUT_S):
                try:
                    url = await asyncio.wait_for(
                        in_daemon_thread(self._gcs_lookup.dashboard_of, gcs, self.settings.request_timeout_s),
                        self.settings.request_timeout_s + 2,
                    )
                except Exception as exc:  # Ray raises a variety of RPC errors here
                    log.info("ray-mcp: GCS %s did not tell its dashboard address: %s", gcs, exc)
            else:
                log.info("ray-mcp: nothing accepts connections at the GCS address %s", gcs)
            if url:
                log.info("ray-mcp: GCS %s reports its dashboard at %s", gcs, url)
                return Resolved(url, "external", gcs_address=gcs)
        guess = address.default_dashboard_url
        if await dashboard_answers(
            guess, self.settings.request_timeout_s, self.settings.dashboard_request_headers()
        ):
            log.info("ray-mcp: using the dashboard %s for address %s", guess, address.original)
            return Resolved(guess, "external")
        raise unreachable(
            address.original,
            f"no Ray dashboard answers at {guess}"
            + (" and the GCS did not report one" if address.kind == "gcs" else "")
            + "; if the dashboard runs elsewhere, pass --dashboard-url",
            gone=True,
        )

    async def _resolve_kubernetes(self, address: Address) -> Resolved:
        """The head service of the KubeRay object named; the Kubernetes client is imported only here (the
        ``kubernetes`` extra, ~1 s to import, needed by k8s:// addresses alone)."""
        from ray_mcp.sources.kube_target import parse_kube_address, resolve_target
        from ray_mcp.sources.kubernetes import Kube

        s = self.settings
        named = parse_kube_address(address.original, context=s.kube_context, namespace=s.namespace)
        if self.kube is None:
            self.kube = await Kube.connect(
                kubeconfig=str(s.kubeconfig) if s.kubeconfig else None,
                context=named.context,
                namespace=named.namespace,
                timeout_s=s.request_timeout_s,
            )
        target = await resolve_target(self.kube, named.name)
        log.info(
            "ray-mcp: %s %s/%s: dashboard through %s",
            target.kind,
            target.namespace,
            target.name,
            target.dashboard_url,
        )
        return Resolved(target.dashboard_url, "external", kube=target)

    async def _start_embedded(self) -> Resolved:
        def keep(head: LocalHead) -> None:
            self.embedded = head  # owned from the moment it is spawned, so that aclose stops it

        log.info("ray-mcp: no Ray cluster configured; starting an embedded one")
        try:
            head = await start_local_head(
                num_cpus=self.settings.embedded_num_cpus,
                # a machine too slow for the last start gets longer for the next (up to 4 times the setting)
                timeout_s=self.settings.cluster_start_timeout_s * min(2**self._failures, 4),
                headers=self.settings.dashboard_request_headers(local_cluster=True),
                on_spawn=keep,
            )
        except ClusterUnavailable:
            self.embedded = None  # start_local_head stopped it
            self._failures += 1
            backoff = min(RESTART_BACKOFF_S * 2 ** (self._failures - 1), RESTART_BACKOFF_MAX_S)
            self._retry_at = time.monotonic() + backoff
            raise
        self._failures = 0
        log.info(
            "ray-mcp: using the embedded Ray cluster (dashboard %s, GCS %s, temp dir %s)",
            head.dashboard_url,
            head.gcs_address,
            head.temp_dir,
        )
        prometheus = await self._start_prometheus(head)
        return Resolved(head.dashboard_url, "embedded", gcs_address=head.gcs_address, prometheus=prometheus)

    async def _start_prometheus(self, head: LocalHead) -> str | None:
        """A Prometheus beside the embedded head, when a ``prometheus`` binary is on PATH and none is configured;
        its URL, or None (get_metrics then reads the nodes' endpoints and says how to get history)."""
        from ray_mcp.local_prometheus import LocalPrometheus, prometheus_binary  # imports this module

        if self.settings.prometheus:
            return None
        binary = prometheus_binary()
        if binary is None:
            log.info(
                "ray-mcp: no `prometheus` on PATH, so no history for get_metrics (install one: "
                "apt install prometheus)"
            )
            return None
        prometheus = LocalPrometheus(
            head.temp_dir / "session_latest", head.temp_dir / "prometheus", binary=binary
        )
        try:
            await prometheus.start(EMBEDDED_PROMETHEUS_START_S)
        except RuntimeError as exc:
            await asyncio.to_thread(prometheus.stop)
            log.warning("ray-mcp: the embedded cluster runs without a Prometheus: %s", exc)
            return None
        self.embedded_prometheus = prometheus
        log.info("ray-mcp: Prometheus %s scrapes the embedded cluster", prometheus.url)
        return prometheus.url

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.kube is not None:
            kube, self.kube = self.kube, None
            await kube.aclose()
        if self.embedded_prometheus is not None:
            prometheus, self.embedded_prometheus = self.embedded_prometheus, None
            await asyncio.to_thread(prometheus.stop)
        if self.embedded is not None:
            head, self.embedded = self.embedded, None
            log.info("ray-mcp: stopping the embedded Ray cluster in %s", head.temp_dir)
            await asyncio.to_thread(head.stop)
            log.info("ray-mcp: embedded Ray cluster stopped")
