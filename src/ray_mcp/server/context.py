"""The one object every tool reads: settings, and one connection (cluster manager + Ray API) per cluster.

With a clusters file, every tool gets an optional ``cluster`` argument (see server.py): the ClusterSelection
middleware sets ``CURRENT_CLUSTER`` for the call, and ``App.api()`` returns the adapter of that cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context

from ray_mcp.cluster import ClusterManager, Resolved
from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.redaction import SECRETS, credential_values
from ray_mcp.lazy import import_sync
from ray_mcp.ray_api.gcs import GCS_LOOKUP, GcsLookup
from ray_mcp.settings import Settings

if TYPE_CHECKING:
    import httpx  # only for annotations: see ray_api

    from ray_mcp.guard.confirm import ClusterRef
    from ray_mcp.ray_api import RayAPI

log = logging.getLogger(__name__)

DEFAULT_CLUSTER = "default"
# Clusters on this machine found without an address, or started here: Ray puts them in token mode when
# ~/.ray/auth_token exists, so its token goes to them (settings.resolved_ray_auth_token).
LOCAL_SOURCES = ("embedded", "local")
# The warm-up imports Ray when no tool call is under way (the import holds the GIL for ~0.5 s and would slow a
# call down), but waits at most this long (a wait_for_job can last minutes) ...
WARM_UP_IDLE_WAIT_S = 2.0
# ... and, after a call, until none has been under way for this long: an agent's next call often follows at once.
WARM_UP_QUIET_S = 0.2
# Ray's Jobs modules (submit_job, diagnose_job, cluster_health; ~0.4 s holding the GIL) wait for a longer
# quiet: a model's turn between two calls is seconds, so a call that comes sooner than this is not slowed down
# by an import it rarely needs.
WARM_UP_LATE_QUIET_S = 1.5
# The cluster named by the tool call being served (None: the default cluster).
CURRENT_CLUSTER: ContextVar[str | None] = ContextVar("ray_mcp_cluster", default=None)


class Connection:
    """One cluster: how to find it (ClusterManager) and the reused client for it (RayAPI)."""

    def __init__(
        self,
        name: str,
        settings: Settings,
        *,
        http_transport: httpx.AsyncBaseTransport | None,
        gcs_lookup: GcsLookup | None,
    ) -> None:
        self.name = name
        self.settings = settings
        if gcs_lookup is not None:  # asked with this cluster's own credentials only
            auth = next(
                (v for k, v in settings.dashboard_request_headers().items() if k.lower() == "authorization"),
                None,
            )
            gcs_lookup = gcs_lookup.with_authorization(auth)
        self.cluster = ClusterManager(settings, gcs_lookup=gcs_lookup)
        self._http_transport = http_transport
        self._gcs_lookup = gcs_lookup
        self._api: RayAPI | None = None
        self._lock = asyncio.Lock()

    async def api(self) -> RayAPI:
        resolved = await self.cluster.resolved()
        async with self._lock:  # concurrent first calls share one adapter
            return await self._adapter_for(resolved)

    async def _adapter_for(self, resolved: Resolved) -> RayAPI:
        if self._api is None or self._api.dashboard_url != resolved.dashboard_url.rstrip("/"):
            if self._api is not None:
                await self._api.aclose()
            s = self.settings
            headers = s.dashboard_request_headers(local_cluster=resolved.source in LOCAL_SOURCES)
            SECRETS.add([v for value in headers.values() for v in credential_values(value)], pinned=True)
            self._api = await anyio.to_thread.run_sync(
                functools.partial(
                    new_api,
                    resolved.dashboard_url,
                    timeout_s=s.request_timeout_s,
                    source=resolved.source,
                    headers=headers,
                    verify=str(s.dashboard_ca_file) if s.dashboard_ca_file else s.dashboard_verify_tls,
                    transport=self._http_transport,
                    gcs_address=resolved.gcs_address,
                    gcs_lookup=self._gcs_lookup,
                    stack_source=s.stack_source,
                    py_spy=s.py_spy,
                    local_logs=s.local_logs,
                )
            )
        return self._api

    async def aclose(self) -> None:
        if self._api is not None:
            await self._api.aclose()
            self._api = None
        await self.cluster.aclose()


def new_api(dashboard_url: str, **kwargs: Any) -> RayAPI:
    """A RayAPI (in a worker thread: the first one imports every area of ray_api, httpx's transport, and may
    load TLS certificates: tens of ms that the event loop must not wait on)."""
    api: type[RayAPI] = import_sync("ray_mcp.ray_api.api").RayAPI
    return api(dashboard_url, **kwargs)


class App:
    """Process-wide state: created by build_server, closed by whoever runs the server (cli or a test)."""

    def __init__(
        self,
        settings: Settings,
        *,
        http_transport: httpx.AsyncBaseTransport | None = None,
        gcs_lookup: GcsLookup | None = GCS_LOOKUP,
    ) -> None:
        self.settings = settings
        # Where local runtime_env paths may be read from (uploads.py), fixed at start: the starting directory
        # on stdio unless --upload-root names others; none over HTTP unless named.
        self.upload_roots = settings.effective_upload_roots()
        per_cluster = settings.cluster_settings() or {DEFAULT_CLUSTER: settings}
        self.connections = {
            name: Connection(name, s, http_transport=http_transport, gcs_lookup=gcs_lookup)
            for name, s in per_cluster.items()
        }
        self.default_cluster = next(iter(self.connections))
        self.on_close: list[Callable[[], Awaitable[None]]] = []
        self._warming: asyncio.Task[None] | None = None
        self._calls = 0  # tool calls under way
        self._idle = asyncio.Event()  # set when none is
        self._idle.set()
        self._last_call_end = float("-inf")  # event loop time
        # What the warm-up runs before Ray's imports (server.py: build the tools listed from the catalog), once.
        self.prepare: Callable[[], Awaitable[None]] | None = None

    @property
    def multi_cluster(self) -> bool:
        return len(self.connections) > 1

    @property
    def cluster(self) -> ClusterManager:
        """The default cluster's manager."""
        return self.connections[self.default_cluster].cluster

    def start(self) -> None:
        for connection in self.connections.values():
            connection.cluster.start()

    @contextlib.contextmanager
    def call_under_way(self) -> Iterator[None]:
        """Around every tool call: the warm-up waits for none to be under way before it imports Ray."""
        self._calls += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._calls -= 1
            if not self._calls:
                self._last_call_end = asyncio.get_running_loop().time()
                self._idle.set()

    async def until_quiet(self, quiet_s: float = WARM_UP_QUIET_S) -> None:
        """Until no call is under way and none has ended (nor the tools been listed) for ``quiet_s``; at most
        WARM_UP_IDLE_WAIT_S past that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WARM_UP_IDLE_WAIT_S + quiet_s
        while (left := deadline - loop.time()) > 0:
            if self._calls:
                with anyio.move_on_after(left):
                    await self._idle.wait()
                continue
            rest = self._last_call_end + quiet_s - loop.time()
            if rest <= 0:
                return
            await anyio.sleep(min(rest, left))

    def warm_up(self) -> asyncio.Task[None] | None:
        """Once, when a client has listed the tools: in the background, find each cluster, make its client and
        GCS channel and import Ray, so that a first call costs what later ones do (without it, +0.1-0.2 s for
        the HTTP client and +0.5-0.8 s where Ray is imported). The HTTP client first; each GIL-heavy step of
        the rest (Ray's GCS modules, the GCS lookup and channel, Ray's Jobs modules) only once the server is
        quiet (``until_quiet``), checked again before every step: a call that arrives meanwhile runs beside one
        step at most, not beside all of them. A first call that needs Ray imports it itself, through the same
        gate (ray_import). A failure here is left for the calls to report. Off with RAY_MCP_WARM_UP=false."""
        if self._warming is None and self.settings.warm_up:
            loop = asyncio.get_running_loop()
            # A client that lists the tools calls one next, often at once: that call runs before the GIL-heavy
            # steps, which count the listing as the last activity.
            self._last_call_end = max(self._last_call_end, loop.time())
            self._warming = loop.create_task(self._warm(), name="ray-mcp warm-up")
        return self._warming

    async def _warm(self) -> None:
        await anyio.to_thread.run_sync(importlib.import_module, "httpx")  # what RayAPI imports first
        for connection in self.connections.values():
            try:
                api = await connection.api()
                # The rest competes with a first call for the dashboard (which answers one request at a time)
                # or the GIL: each step waits for quiet. A call that needs it meanwhile does it itself.
                await self.until_quiet()
                with contextlib.suppress(Exception):  # best effort: a first tail_logs looks again
                    await api.find_local_logs_dirs()
                await self.until_quiet()
                # Ray's GCS part before the tools' builds: a first pg_status would wait ~0.3-1 s for it, a
                # first call of a tool not built yet ~10-20 ms for its build.
                await api.warm_up_gcs(between=self.until_quiet)
                await self._prepare()
                await api.warm_up_jobs(between=functools.partial(self.until_quiet, WARM_UP_LATE_QUIET_S))
            except Exception as exc:  # the first call meets the same failure and reports it
                log.debug("ray-mcp: warm-up of cluster %s stopped: %s", connection.name, exc)
        await self._prepare()  # if no cluster got that far

    async def _prepare(self) -> None:
        prepare, self.prepare = self.prepare, None
        if prepare is not None:
            await prepare()

    async def api(self) -> RayAPI:
        """The adapter of the cluster the current call names (else the default); the first call may wait."""
        name = CURRENT_CLUSTER.get() or self.default_cluster
        if name not in self.connections:
            raise InvalidArgument(
                f"No cluster named {name!r}; the configured clusters are {', '.join(self.connections)}."
            )
        return await self.connections[name].api()

    async def cluster_ref(self) -> ClusterRef:
        """The cluster this call acts on, by name and dashboard URL (what a confirmation is bound to)."""
        from ray_mcp.guard.confirm import ClusterRef  # imported by the tools that ask for a confirmation

        name = CURRENT_CLUSTER.get() or self.default_cluster
        api = await self.api()
        return ClusterRef(name, api.dashboard_url)

    async def aclose(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
            with contextlib.suppress(BaseException):
                await self._warming
        for close in self.on_close:  # what runs on top of the connections (the job pollers of live.py)
            await close()
        for connection in self.connections.values():
            await connection.aclose()


def app_of(ctx: Context) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App), "ray-mcp tools need the App lifespan context (use build_server)"
    return app
