"""The MCP server: build_server (build.py), its transports, the App it serves, live job resources,
resources, prompts and the compact schemas of tools/list."""

from ray_mcp.server.build import RayMCPServer, build_server

__all__ = ["RayMCPServer", "build_server"]
