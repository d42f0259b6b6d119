"""The 2026-07-28 surface that needs no cluster: cache hints, icons, links from errors to the reference, the
deprecated SSE transport; through the in-memory client in both eras, and a server process over stdio and
streamable HTTP (pointed at no cluster)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.caching import CacheHint
from tests.conftest import clean_env
from tests.support import text_of
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.limits import LIST_CACHE_MS, REFERENCE_CACHE_MS
from ray_mcp.server.build import build_server
from ray_mcp.server.cache_hints import read_hint
from ray_mcp.settings import Settings

NOWHERE = "http://127.0.0.1:9"
pytestmark = pytest.mark.filterwarnings("ignore:ping is removed")


async def check_2026_surface(client: Client, *, modern: bool) -> None:
    tools = await client.list_tools()
    names = [t.name for t in tools.tools]
    assert names == [t.name for t in (await client.list_tools()).tools]  # the same order every time
    resources = await client.list_resources()
    assert resources.resources[0].icons, "the reference index has the server's icon"
    prompts = (await client.list_prompts()).prompts
    assert all(p.icons for p in prompts)
    page = await client.read_resource("ray-docs://reference/12-job-submission")
    if modern:
        assert (tools.ttl_ms, tools.cache_scope) == (LIST_CACHE_MS, "public")
        assert (resources.ttl_ms, resources.cache_scope) == (LIST_CACHE_MS, "public")
        assert (page.ttl_ms, page.cache_scope) == (REFERENCE_CACHE_MS, "public")
    else:
        assert tools.ttl_ms != LIST_CACHE_MS and page.ttl_ms != REFERENCE_CACHE_MS  # not in 2025 revisions
    # An error that names a Ray concept links to the reference page that explains it.
    failed = await client.call_tool("get_job", {"job": "raysubmit_nothing"})
    assert failed.is_error
    links = [c.uri for c in failed.content if c.type == "resource_link"]
    assert "ray-docs://reference/13-dashboard-observability" in links, text_of(failed)


def test_job_resources_and_anything_unknown_are_never_cached() -> None:
    assert read_hint("ray://jobs/raysubmit_x") == read_hint("ray://anything") == CacheHint(0, "private")
    assert read_hint("ray-docs://api/ray.remote") == CacheHint(REFERENCE_CACHE_MS, "public")


async def test_tools_list_is_the_same_on_every_replica() -> None:
    """Two servers built alike list their tools in the same order, byte for byte (a cache shared by
    replicas, and the client's tools/list hash in 2026 requests, rely on it)."""
    listings = []
    for _ in range(2):
        server = build_server(Settings(address=NOWHERE))
        try:
            async with Client(server) as client:
                tools = (await client.list_tools()).tools
                listings.append([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools])
        finally:
            await server.app.aclose()
    assert listings[0] == listings[1]


def test_a_replica_key_must_be_long_enough(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_text("too-short")
    with pytest.raises(ValueError, match="at least 32"):
        Settings(address=NOWHERE, replica_key_file=short).replica_key()
    good = tmp_path / "good.key"
    good.write_text("k" * 40 + "\n")
    assert Settings(address=NOWHERE, replica_key_file=good).replica_key() == b"k" * 40


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_cache_hints_icons_and_error_links_in_both_eras(mode: str) -> None:
    server = build_server(Settings(address=NOWHERE, request_timeout_s=2))
    try:
        async with Client(server, mode=mode) as client:
            await check_2026_surface(client, modern=mode != "legacy")
            if mode == "legacy":
                assert client.server_info and client.server_info.icons
    finally:
        await server.app.aclose()


@pytest.mark.live
async def test_the_2026_surface_over_stdio_and_streamable_http(tmp_path: Path) -> None:
    args = ["--address", NOWHERE, "--request-timeout-s", "2"]
    params = StdioServerParameters(command=RAY_MCP, args=args, env=clean_env())
    with open(tmp_path / "stdio.log", "w") as errlog:
        for mode in ("legacy", "2026-07-28"):
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                await check_2026_surface(client, modern=mode != "legacy")
    with http_server(["--transport", "streamable-http", *args], tmp_path / "http.log") as port:
        for mode in ("legacy", "2026-07-28"):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                await check_2026_surface(client, modern=mode != "legacy")
    assert "one replica: 2026-07-28 requests are stateless" in (tmp_path / "http.log").read_text()


@pytest.mark.live
def test_help_marks_sse_deprecated_and_names_streamable_http() -> None:
    out = subprocess.run(
        [RAY_MCP, "--help"], capture_output=True, text=True, env=clean_env(), check=True
    ).stdout
    assert "sse is deprecated" in " ".join(out.split())
    assert "streamable-http" in out
