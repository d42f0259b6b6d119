"""ray-mcp: a Model Context Protocol server for operating and debugging Ray clusters."""
