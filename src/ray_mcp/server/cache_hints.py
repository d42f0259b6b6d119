"""The 2026-07-28 cache hints (``ttlMs``, ``cacheScope``) of every list and read result.

The lists (tools, prompts, resources, templates) are the same for every caller; tools/list changes only when the
offered toolsets do (server/toolsets.py), and a tools list_changed event says so;
the reference pages are package data, the API reference is read from the installed Ray; a job resource and
anything read from the cluster are live, never cached. A 2025 result carries no hints (not in its revision).
"""

from __future__ import annotations

from typing import Any

from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp_types.methods import CacheableMethod
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from ray_mcp.limits import LIST_CACHE_MS, REFERENCE_CACHE_MS

LISTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=LIST_CACHE_MS, scope="public"),
    "prompts/list": CacheHint(ttl_ms=LIST_CACHE_MS, scope="public"),
    "resources/list": CacheHint(ttl_ms=LIST_CACHE_MS, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=LIST_CACHE_MS, scope="public"),
}
LIVE = CacheHint(ttl_ms=0, scope="private")
# By URI prefix: what a resources/read answer may be cached for (anything else: LIVE).
READS: tuple[tuple[str, CacheHint], ...] = (
    ("ray-docs://reference/", CacheHint(ttl_ms=REFERENCE_CACHE_MS, scope="public")),
    ("ray-docs://api/", CacheHint(ttl_ms=REFERENCE_CACHE_MS, scope="public")),
)


def read_hint(uri: str) -> CacheHint:
    return next((hint for prefix, hint in READS if uri.startswith(prefix)), LIVE)


class ReadCacheHints(ServerMiddleware[Any]):
    """Stamps each resources/read result with its URI's hint (the SDK's cache_hints are per method only)."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "resources/read" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return result
        uri = (ctx.params or {}).get("uri")
        hint = read_hint(uri if isinstance(uri, str) else "")
        if isinstance(result, BaseModel):
            return result.model_copy(update={"ttl_ms": hint.ttl_ms, "cache_scope": hint.scope})
        if isinstance(result, dict) and result.get("resultType", "complete") == "complete":
            return {**result, "ttlMs": hint.ttl_ms, "cacheScope": hint.scope}
        return result
