"""The floor for call overhead: a minimal MCP proxy, a bare MCPServer whose one tool GETs a dashboard path.

    python bench/proxy_server.py http://127.0.0.1:8265

It keeps one kept-alive httpx client, sends the GET and returns the body as text: everything an MCP server
must do to answer from the dashboard, and nothing that ray-mcp adds (shaping, budgets, redaction, hints).
"""

import sys
from typing import Any

import httpx
from mcp.server.mcpserver import MCPServer

server = MCPServer("proxy")
dashboard = httpx.AsyncClient(base_url=sys.argv[1], timeout=120)


@server.tool()
async def get(path: str, params: dict[str, Any] | None = None) -> str:
    """GET a dashboard path and return its body."""
    response = await dashboard.get(path, params=params)
    response.raise_for_status()
    return response.text


if __name__ == "__main__":
    server.run()
