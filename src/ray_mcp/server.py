"""build_server(settings) -> MCPServer: the lifespan and the registration of tools. Never imports ray."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

import httpx
from mcp.server.mcpserver import MCPServer

from ray_mcp.context import App
from ray_mcp.ray_api import dashboard_url_from_gcs
from ray_mcp.settings import Settings
from ray_mcp.tools import actors as actor_tools
from ray_mcp.tools import cluster as cluster_tools
from ray_mcp.tools import nodes as node_tools
from ray_mcp.tools import placement_groups as pg_tools
from ray_mcp.tools import serve as serve_tools
from ray_mcp.tools import tasks as task_tools

INSTRUCTIONS = """\
ray-mcp operates and debugs one Ray cluster through Ray's own clients and dashboard.
Start with cluster_status to see nodes, resource use and anything pending.
Every list is bounded; narrow it with the filters each tool offers, and follow the hints in its answers."""


def _version() -> str:
    try:
        return version("ray-mcp")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


class RayMCPServer(MCPServer[App]):
    """An MCPServer that also carries the App, so that its runner can close it (and the embedded cluster)."""

    app: App


def build_server(
    settings: Settings | None = None,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
    gcs_lookup: Callable[[str, float], str | None] | None = dashboard_url_from_gcs,
) -> RayMCPServer:
    """Build the ray-mcp server. ``http_transport`` replaces the dashboard connection (tests inject faults)."""
    settings = settings or Settings()
    app = App(settings, http_transport=http_transport, gcs_lookup=gcs_lookup)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[App]) -> AsyncIterator[App]:
        app.cluster.start()  # resolve (or start the embedded cluster) in the background
        yield app

    server = RayMCPServer(
        name="ray-mcp",
        title="Ray",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level=settings.log_level,
    )
    server.app = app
    cluster_tools.register(server)
    # cluster state (issue 4)
    actor_tools.register(server)
    pg_tools.register(server)
    node_tools.register(server)
    task_tools.register(server)
    serve_tools.register(server)
    return server
