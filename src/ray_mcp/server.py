"""build_server(settings) -> MCPServer: the lifespan and the registration of tools. Never imports ray."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, GetPromptResult, InputRequiredResult

from ray_mcp import prompts, resources
from ray_mcp.context import App
from ray_mcp.ray_api import dashboard_url_from_gcs
from ray_mcp.settings import Settings
from ray_mcp.tools import cluster as cluster_tools

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

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[App, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """MCPServer's, except that an unknown prompt or a missing argument is the spec's -32602 (Invalid params).

        MCPServer 2.3 answers both with error code 0; the MCP spec (server/prompts, "Error Handling") and the
        conformance suite's clients expect -32602.
        """
        prompts = {p.name: p for p in await self.list_prompts()}
        if name not in prompts:
            raise MCPError(INVALID_PARAMS, f"No prompt {name!r}. Prompts: {', '.join(sorted(prompts))}.")
        given = arguments or {}
        missing = [a.name for a in prompts[name].arguments or [] if a.required and a.name not in given]
        if missing:
            raise MCPError(INVALID_PARAMS, f"Prompt {name!r} needs the argument(s): {', '.join(missing)}.")
        return await super().get_prompt(name, arguments, context)


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
    resources.register(server)
    prompts.register(server)
    return server
