"""A client that lists the tools is about to call them: the server then connects and imports Ray in the
background, so that a first call costs what later ones do, and a warm-up that fails changes no answer."""

from __future__ import annotations

import anyio
from mcp import Client
from tests.conftest import Cluster
from tests.support import call_ok, text_of

from ray_mcp.server import build_server
from ray_mcp.settings import Settings


async def test_listing_the_tools_makes_the_client_and_gcs_channel_before_any_call(
    ray_cluster: Cluster,
) -> None:
    address = ray_cluster.gcs_address or ray_cluster.dashboard_url
    server = build_server(Settings(address=address))
    try:
        async with Client(server) as client:
            await client.list_tools()
            warming = server.app.warm_up()  # the same task as the listing started, not a second one
            assert warming is not None
            with anyio.fail_after(120):
                await warming
            api = await server.app.api()
            assert api.gcs_connected
            await call_ok(client, "pg_status")
    finally:
        await server.app.aclose()


async def test_with_warm_up_off_a_listing_starts_nothing() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9", warm_up=False))
    try:
        async with Client(server) as client:
            await client.list_tools()
            assert server.app.warm_up() is None
    finally:
        await server.app.aclose()


async def test_a_warm_up_that_fails_leaves_the_first_call_its_own_clear_error() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9", request_timeout_s=2))
    try:
        async with Client(server) as client:
            await client.list_tools()
            warming = server.app.warm_up()
            assert warming is not None
            with anyio.fail_after(60):
                await warming  # the failure stays inside the warm-up
            result = await client.call_tool("cluster_status", {})
            assert result.is_error and "127.0.0.1:9" in text_of(result), text_of(result)
            again = await client.call_tool("list_jobs", {})
            assert again.is_error and "127.0.0.1:9" in text_of(again), text_of(again)
    finally:
        await server.app.aclose()


async def test_closing_the_server_during_a_warm_up_stops_it() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9", request_timeout_s=30))
    async with Client(server) as client:
        await client.list_tools()
        warming = server.app.warm_up()
    assert warming is not None
    with anyio.fail_after(20):
        await server.app.aclose()
    assert warming.done()
