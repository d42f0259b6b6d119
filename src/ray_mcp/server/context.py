"""The one object every tool reads: settings, and one connection (cluster manager + Ray API) per cluster.

With a clusters file, every tool gets an optional ``cluster`` argument (see build.py): the ClusterSelection
middleware sets ``CURRENT_CLUSTER`` for the call, and ``App.api()`` returns the adapter of that cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

import httpx
from mcp.server.mcpserver import Context

from ray_mcp.addresses import AddressForm, form_of
from ray_mcp.answers import RayAPI
from ray_mcp.cluster import ClusterManager, Resolved
from ray_mcp.errors import InvalidArgument, RayMCPError
from ray_mcp.guard.confirm import ClusterRef
from ray_mcp.guard.redaction import CONFIGURED, SECRETS, credential_values
from ray_mcp.limits import LOG_FOLLOWS_MAX, LOG_FOLLOWS_PER_CLIENT
from ray_mcp.local_prometheus import prometheus_binary
from ray_mcp.server.shares import Shares
from ray_mcp.settings import Settings
from ray_mcp.sources.dashboard import http_verify
from ray_mcp.sources.gcs import GCS_LOOKUP, GcsLookup
from ray_mcp.sources.history import HistoryTransport
from ray_mcp.sources.kube_proxy import PROXY_NO_GCS
from ray_mcp.sources.kube_target import RayTarget
from ray_mcp.sources.kubernetes import Kube, KubeContexts
from ray_mcp.sources.prometheus import Configured

DEFAULT_CLUSTER = "default"
# Clusters on this machine found without an address, or started here: Ray puts them in token mode when
# ~/.ray/auth_token exists, so its token goes to them (settings.resolved_ray_auth_token).
LOCAL_SOURCES = ("embedded", "local")
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
        self.history: HistoryTransport | None = None  # a history+ address: the record's transport
        self._building: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        # The address table's row of this cluster's address (None: no address, or one that cannot be read:
        # the first call says why).
        self.form: AddressForm | None = form_of(settings.address)

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
            SECRETS.hold(CONFIGURED, [v for value in headers.values() for v in credential_values(value)])
            transport, gcs_lookup, gcs_out_of_reach = self._http_transport, self._gcs_lookup, None
            if resolved.kube is not None and transport is None:
                transport = resolved.kube.proxy_transport()
            if resolved.kube is not None and not resolved.kube.kube.in_cluster:
                gcs_lookup, gcs_out_of_reach = None, PROXY_NO_GCS  # the API server proxies HTTP only
            self.history = None
            if resolved.history is not None:  # a record, not a cluster: no GCS, no log read from this disk
                verify = str(s.dashboard_ca_file) if s.dashboard_ca_file else s.dashboard_verify_tls
                inner = transport or httpx.AsyncHTTPTransport(
                    verify=http_verify(resolved.dashboard_url, verify)
                )
                transport = self.history = HistoryTransport(resolved.history, inner)
                gcs_lookup = None
            self._api = RayAPI(
                resolved.dashboard_url,
                timeout_s=s.request_timeout_s,
                source=resolved.source,
                headers=headers,
                verify=str(s.dashboard_ca_file) if s.dashboard_ca_file else s.dashboard_verify_tls,
                transport=transport,
                gcs_address=resolved.gcs_address,
                gcs_lookup=gcs_lookup,
                gcs_out_of_reach=gcs_out_of_reach,
                stack_source=s.stack_source,
                py_spy=s.py_spy,
                local_logs=s.local_logs and self.history is None,
                prometheus=configured_prometheus(s, resolved),
                memory_threshold=s.memory_usage_threshold,
            )
        return self._api

    async def kube(self) -> RayTarget:
        """The KubeRay object of a k8s:// address (raises when this cluster was not given as one)."""
        resolved = await self.cluster.resolved()
        if resolved.kube is None:
            raise InvalidArgument(
                f"Cluster {self.name!r} was not given as a k8s://[context/]namespace/name address, so ray-mcp "
                "knows no Kubernetes object for it. Start ray-mcp with --address k8s://<namespace>/<raycluster>."
            )
        return resolved.kube

    @property
    def dashboard_url(self) -> str | None:
        return self._api.dashboard_url if self._api is not None else None

    def start(self) -> None:
        """Resolve the cluster in the background and build its adapter as soon as it is known: building the
        first HTTP client of the process (its TLS context) and connecting to the GCS are paid here, not by
        the first call."""
        self.cluster.start()
        if self._building is None:
            self._building = asyncio.get_running_loop().create_task(self._build())

    async def _build(self) -> None:
        with contextlib.suppress(Exception):  # a cluster that cannot be resolved is reported by the calls
            api = await self.api()
            await api.gcs.connect()

    async def aclose(self) -> None:
        if self._building is not None:
            self._building.cancel()
            with contextlib.suppress(BaseException):
                await self._building
        if self._api is not None:
            await self._api.aclose()
            self._api = None
        await self.cluster.aclose()


def configured_prometheus(settings: Settings, resolved: Resolved) -> Configured | None:
    """The Prometheus a cluster's settings name (its headers with it), else the one ray-mcp started beside its
    embedded head; None lets the locator ask the dashboard. A History Server record has none."""
    if resolved.history is not None:
        return None
    if settings.prometheus:
        return Configured(
            settings.prometheus,
            "configured: --prometheus, RAY_MCP_PROMETHEUS or RAY_PROMETHEUS_HOST",
            tuple(settings.prometheus_request_headers()),
        )
    if resolved.prometheus:
        return Configured(resolved.prometheus, "started by ray-mcp beside its embedded head")
    return None


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
        # Kubernetes connections by context, for the tools that reach past the address's object (the fleet)
        self.kube_contexts = KubeContexts(
            kubeconfig=str(settings.kubeconfig) if settings.kubeconfig else None,
            context=settings.kube_context,
            namespace=settings.namespace,
            timeout_s=settings.request_timeout_s,
        )
        # each holds a dashboard connection for up to MAX_FOLLOW_S: a share per client, far below the pool
        self.follows = Shares(
            "log follows (tail_logs follow_s)", total=LOG_FOLLOWS_MAX, per_owner=LOG_FOLLOWS_PER_CLIENT
        )

    @property
    def multi_cluster(self) -> bool:
        return len(self.connections) > 1

    @property
    def cluster(self) -> ClusterManager:
        """The default cluster's manager."""
        return self.connections[self.default_cluster].cluster

    def start(self) -> None:
        for connection in self.connections.values():
            connection.start()

    async def api(self) -> RayAPI:
        """The adapter of the cluster the current call names (else the default); the first call may wait."""
        name = CURRENT_CLUSTER.get() or self.default_cluster
        if name not in self.connections:
            raise InvalidArgument(
                f"No cluster named {name!r}; the configured clusters are {', '.join(self.connections)}."
            )
        return await self.connections[name].api()

    def history_of_call(self) -> HistoryTransport | None:
        """The History Server record the current call reads, when its cluster has a history+ address."""
        connection = self.connections.get(CURRENT_CLUSTER.get() or self.default_cluster)
        return connection.history if connection is not None else None

    def reads_history(self) -> bool:
        """Does the current call's cluster have a history+ address (known before it is resolved)?"""
        connection = self.connections.get(CURRENT_CLUSTER.get() or self.default_cluster)
        form = connection.form if connection is not None else None
        return form is not None and form.record

    async def kube(self) -> RayTarget:
        """The KubeRay object of the cluster the current call names (else the default)."""
        name = CURRENT_CLUSTER.get() or self.default_cluster
        if name not in self.connections:
            raise InvalidArgument(
                f"No cluster named {name!r}; the configured clusters are {', '.join(self.connections)}."
            )
        return await self.connections[name].kube()

    async def kube_or_none(self) -> RayTarget | None:
        """The KubeRay object of the current call's cluster when it was given as k8s://, else None."""
        name = CURRENT_CLUSTER.get() or self.default_cluster
        connection = self.connections.get(name)
        form = connection.form if connection is not None else None
        if connection is None or form is None or not form.kubernetes:
            return None
        return await connection.kube()

    async def kube_at(self, context: str | None = None) -> Kube:
        """A Kubernetes connection for ``context`` (None: the address's, when it is k8s://, else the
        kubeconfig's current context), bound to its default namespace."""
        with contextlib.suppress(
            RayMCPError
        ):  # the address's object may be gone: its kubeconfig still answers
            target = await self.kube_or_none()
            if target is not None:
                self.kube_contexts.adopt(target.kube)
        return await self.kube_contexts.get(context)

    @property
    def kubernetes(self) -> bool:
        """Are the Kubernetes tools offered: a k8s:// address configured, or --kubernetes-tools."""
        return self.settings.kubernetes_tools or any(
            c.form is not None and c.form.kubernetes for c in self.connections.values()
        )

    @property
    def metrics(self) -> bool:
        """Is get_metrics offered (toolset "metrics", where a Prometheus is known): one is configured for a
        cluster, or ray-mcp may start its embedded cluster with a `prometheus` binary on PATH, or
        --metrics-tools asks for it anyway."""
        if self.settings.metrics_tools or any(c.settings.prometheus for c in self.connections.values()):
            return True
        embedded = self.settings.address is None and self.settings.embedded != "never"
        return embedded and not self.multi_cluster and prometheus_binary() is not None

    def known_dashboard_url(self, name: str) -> str | None:
        """The dashboard URL of a cluster by name once it has been found (None before: nothing is waited for)."""
        connection = self.connections.get(name)
        return connection.dashboard_url if connection is not None else None

    async def cluster_ref(self) -> ClusterRef:
        """The cluster this call acts on, by name and dashboard URL (what a confirmation is bound to)."""
        name = CURRENT_CLUSTER.get() or self.default_cluster
        api = await self.api()
        return ClusterRef(name, api.dashboard_url)

    async def aclose(self) -> None:
        for close in self.on_close:  # what runs on top of the connections (the job pollers of live.py)
            await close()
        await self.kube_contexts.aclose()
        for connection in self.connections.values():
            await connection.aclose()


def app_of(ctx: Context) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App), "ray-mcp tools need the App lifespan context (use build_server)"
    return app
