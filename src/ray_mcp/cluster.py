"""Find the cluster to talk to, or start and stop the embedded local one.

Addresses come in the forms of the address table (addresses.py: one row per form, each with the kind resolved
here), and every client we use wants the dashboard URL: a dashboard URL is that; a Ray Client address has its dashboard assumed on the same host at
8265; a GCS knows where its dashboard listens, so we ask it.

With no address (or Ray's ``auto``), a cluster answering on 127.0.0.1:8265 is used; failing that, ray-mcp
starts its own head node (local_head.py: ``ray start --head --block`` in a private temp dir on free ports), and
on exit stops exactly the processes that one started. It never runs ``ray stop``, which would kill every Ray
process on the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

# The address table (one row per form) is read here: its names stay importable from this module.
from ray_mcp.addresses import ADDRESS_FORMS as ADDRESS_FORMS
from ray_mcp.addresses import DEFAULT_DASHBOARD_PORT, Address
from ray_mcp.addresses import parse_address as parse_address
from ray_mcp.errors import ClusterUnavailable, unreachable
from ray_mcp.local_head import PROBE_TIMEOUT_S, LocalHead, start_local_head
from ray_mcp.local_prometheus import LocalPrometheus, prometheus_binary
from ray_mcp.sources.dashboard import dashboard_answers
from ray_mcp.sources.history import HistoryRef, parse_history_address

if TYPE_CHECKING:
    from ray_mcp.settings import Settings
    from ray_mcp.sources.gcs import GcsLookup
    from ray_mcp.sources.kube_target import RayTarget
    from ray_mcp.sources.kubernetes import Kube

log = logging.getLogger("ray_mcp.cluster")

LOCAL_DASHBOARD_URL = f"http://127.0.0.1:{DEFAULT_DASHBOARD_PORT}"
# After a failed embedded start, the next call tries again once this long has passed, doubling per failure.
RESTART_BACKOFF_S = 5.0
RESTART_BACKOFF_MAX_S = 60.0
# The Prometheus beside the embedded head: Ray's dashboard writes its config a moment after the head is ready.
EMBEDDED_PROMETHEUS_START_S = 30.0

T = TypeVar("T")


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
