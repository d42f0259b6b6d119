"""The icon of the server, its resources and its prompts: a small SVG, inline, so no client fetches anything.

Tools carry none: 22 copies in tools/list would cost more than the whole budget has left (tests/test_tool_listing.py),
and a client shows a tool under its server's icon anyway.
"""

from urllib.parse import quote

from mcp_types import Icon

# Ray's mark, simplified: three linked nodes on a blue disc.
_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><circle cx="16" cy="16" r="16" fill="#028CF0"/>'
    '<path d="M9 21 16 9l7 12z" fill="none" stroke="#fff" stroke-width="2"/><g fill="#fff">'
    '<circle cx="16" cy="9" r="3"/><circle cx="9" cy="21" r="3"/><circle cx="23" cy="21" r="3"/></g></svg>'
)
RAY_ICONS = [Icon(src="data:image/svg+xml," + quote(_SVG), mime_type="image/svg+xml", sizes=["any"])]
