"""The one object every tool reads: settings, the cluster manager and the Ray API client for the cluster."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from mcp.server.mcpserver import Context

from ray_mcp.cluster import ClusterManager
from ray_mcp.ray_api import RayAPI, dashboard_url_from_gcs
from ray_mcp.settings import Settings


class App:
    """Process-wide state: created by build_server, closed by whoever runs the server (cli or a test)."""

    def __init__(
        self,
        settings: Settings,
        *,
        http_transport: httpx.AsyncBaseTransport | None = None,
        gcs_lookup: Callable[[str, float], str | None] | None = dashboard_url_from_gcs,
    ) -> None:
        self.settings = settings
        self.cluster = ClusterManager(settings, gcs_lookup=gcs_lookup)
        self._http_transport = http_transport
        self._api: RayAPI | None = None

    async def api(self) -> RayAPI:
        """The client for the configured cluster; waits for the embedded cluster on the first call."""
        resolved = await self.cluster.resolved()
        if self._api is None or self._api.dashboard_url != resolved.dashboard_url.rstrip("/"):
            if self._api is not None:
                await self._api.aclose()
            self._api = RayAPI(
                resolved.dashboard_url,
                timeout_s=self.settings.request_timeout_s,
                source=resolved.source,
                transport=self._http_transport,
                gcs_address=resolved.gcs_address,
            )
        return self._api

    async def aclose(self) -> None:
        if self._api is not None:
            await self._api.aclose()
            self._api = None
        await self.cluster.aclose()


def app_of(ctx: Context) -> App:
    app = ctx.request_context.lifespan_context
    assert isinstance(app, App), "ray-mcp tools need the App lifespan context (use build_server)"
    return app
