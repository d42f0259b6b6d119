"""The baseline for the ready time: a bare MCPServer with one trivial tool, over stdio."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    """Echo the text."""
    return text


if __name__ == "__main__":
    server.run()
