"""One cluster's sources, made once and shared by every answer: its dashboard (and the APIs it serves) and
its GCS."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.gcs import Gcs, GcsLookup
from ray_mcp.sources.jobs import JobsAPI
from ray_mcp.sources.logs import LogsAPI
from ray_mcp.sources.node_metrics import NodeMetrics
from ray_mcp.sources.prometheus import Configured, PrometheusLocator
from ray_mcp.sources.routes import Routes
from ray_mcp.sources.serve import ServeAPI
from ray_mcp.sources.state import StateAPI


class ClusterSources:
    """``dashboard`` is the HTTP client every dashboard API shares; ``state``, ``jobs``, ``serve``, ``logs`` and
    ``routes`` are those APIs; ``gcs`` answers only what the dashboard does not serve; ``prometheus`` finds the
    cluster's Prometheus (history), ``node_metrics`` reads the nodes' metrics endpoints (now, without one)."""

    def __init__(
        self,
        dashboard_url: str,
        *,
        timeout_s: float,
        source: str,
        headers: Mapping[str, str] | None,
        verify: bool | str,
        transport: httpx.AsyncBaseTransport | None,
        gcs_address: str | None,
        gcs_lookup: GcsLookup | None,
        gcs_out_of_reach: str | None,
        prometheus: Configured | None = None,
    ) -> None:
        self.dashboard = dashboard = Dashboard(
            dashboard_url,
            timeout_s=timeout_s,
            source=source,
            headers=headers,
            verify=verify,
            transport=transport,
        )
        self.dashboard_url = dashboard.dashboard_url
        self.state = StateAPI(dashboard)
        self.jobs = JobsAPI(dashboard)
        self.serve = ServeAPI(dashboard)
        self.logs = LogsAPI(dashboard)
        self.routes = Routes(dashboard)
        self.gcs = Gcs(
            dashboard.dashboard_url,
            address=gcs_address,
            lookup=gcs_lookup,
            authorization=dashboard.authorization(),
            timeout_s=timeout_s,
            out_of_reach=gcs_out_of_reach,
        )

        self.prometheus = PrometheusLocator(
            prometheus,
            dashboard.dashboard_url,
            dashboard_answers=self.routes.prometheus_health,
            verify=verify,
        )
        self.node_metrics = NodeMetrics()

    async def aclose(self) -> None:
        await self.prometheus.aclose()
        await self.node_metrics.aclose()
        await self.dashboard.aclose()
        self.gcs.close()
