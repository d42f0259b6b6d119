"""Ray reference docs as MCP resources, from package data; and the live API reference of the installed Ray.

URIs:
    ray-docs://reference/index            every page with its one-line summary
    ray-docs://reference/{topic}          one page, e.g. ray-docs://reference/12-job-submission
    ray-docs://api/{qualified_name}       signature and docstring of a public Ray symbol, e.g. ray.remote,
                                          parsed from the installed source, never imported (api_reference)
"""

from __future__ import annotations

import functools

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from ray_mcp.reference.api import read_symbol
from ray_mcp.reference.pages import INDEX_URI, MARKDOWN, index_text, page_text, reference_pages
from ray_mcp.server.icons import RAY_ICONS


def register(server: MCPServer) -> None:
    server.add_resource(
        FunctionResource(
            uri=INDEX_URI,
            name="ray-reference-index",
            title="Ray reference: index",
            description="Every Ray reference page with a one-line summary. Start here.",
            mime_type=MARKDOWN,
            icons=RAY_ICONS,
            fn=index_text,
        )
    )
    for page in reference_pages():
        server.add_resource(
            FunctionResource(
                uri=page.uri,
                name=page.topic,
                title=f"Ray reference: {page.title}",
                description=page.summary,
                mime_type=MARKDOWN,
                fn=functools.partial(page_text, page.topic),
            )
        )

    @server.resource(
        "ray-docs://api/{qualified_name}",
        name="ray-api",
        title="Ray API reference (live)",
        description="Signature, docstring and members of any public Ray symbol, read from the source of the Ray "
        "installed next to the server (nothing is imported or run), e.g. "
        "ray-docs://api/ray.util.placement_group.placement_group.",
        mime_type=MARKDOWN,
        icons=RAY_ICONS,
    )
    async def api_reference(qualified_name: str) -> str:
        try:
            return await read_symbol(qualified_name)
        except LookupError as exc:  # unknown, private, refused or unreadable: invalid params (-32602)
            raise ResourceNotFoundError(str(exc)) from None
        except TimeoutError as exc:
            raise ResourceError(str(exc)) from None
