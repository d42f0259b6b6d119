"""The icon of the server, its resources and its prompts: Ray's mark, by URL.

By URL rather than inline: a 2026-07-28 result carries the server's info, icons included, in its ``_meta``, so
an inline SVG would ride on every answer. Tools carry none: 22 copies in tools/list would cost more than its
budget has left (tests/test_tool_listing.py), and a client shows a tool under its server's icon anyway.
"""

from mcp_types import Icon

RAY_ICONS = [Icon(src="https://github.com/ray-project.png", mime_type="image/png")]
