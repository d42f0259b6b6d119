"""A client that lists the tools is about to call them: the server then connects and imports Ray in the
background, so that a first call costs what later ones do, and a warm-up that fails changes no answer."""

from __future__ import annotations

import anyio
from mcp import Client
from tests.conftest import Cluster
from tests.support import call_ok, run_to_end, text_of

from ray_mcp.context import WARM_UP_IDLE_WAIT_S
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


async def test_listing_the_tools_finds_the_logs_dir_of_this_machines_node_before_any_call(
    ray_cluster: Cluster,
) -> None:
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    try:
        async with Client(server) as client:
            await client.list_tools()
            warming = server.app.warm_up()
            assert warming is not None
            with anyio.fail_after(120):
                await warming
            api = await server.app.api()
            found = [where for where in api._log_dirs.values() if where is not None]
            assert found and all(where.real.name == "logs" and where.real.is_dir() for where in found)
    finally:
        await server.app.aclose()


async def test_the_warm_up_imports_ray_only_once_no_call_is_under_way(
    client: Client, ray_cluster: Cluster
) -> None:
    """Ray's import holds the GIL for ~0.5 s: a call under way would pay for it. The warm-up waits (at most
    WARM_UP_IDLE_WAIT_S) for the calls to end before it imports Ray and makes the GCS channel."""
    sid, info = await run_to_end(client, entrypoint="echo followed")
    assert info["status"] == "SUCCEEDED", info
    address = ray_cluster.gcs_address or ray_cluster.dashboard_url
    server = build_server(Settings(address=address))
    try:
        async with Client(server) as fresh, anyio.create_task_group() as tg:
            following = anyio.Event()

            async def follow() -> None:
                following.set()
                await call_ok(fresh, "tail_logs", {"job": sid, "follow_s": WARM_UP_IDLE_WAIT_S + 1})

            tg.start_soon(follow)
            await following.wait()
            await anyio.sleep(0.2)  # the call is under way
            await fresh.list_tools()
            warming = server.app.warm_up()
            assert warming is not None
            await anyio.sleep(WARM_UP_IDLE_WAIT_S / 2)
            assert not (await server.app.api()).gcs_connected  # waiting for the call to end
            with anyio.fail_after(120):
                await warming
            assert (await server.app.api()).gcs_connected
    finally:
        await server.app.aclose()


async def test_a_fresh_servers_first_answers_equal_its_warm_answers(
    client: Client, ray_cluster: Cluster
) -> None:
    sid, info = await run_to_end(client, entrypoint="echo first-and-warm")
    assert info["status"] == "SUCCEEDED", info
    calls = [("get_job", {"job": sid}), ("tail_logs", {"job": sid, "lines": 20}), ("pg_status", {})]
    for tool, args in calls:
        server = build_server(Settings(address=ray_cluster.dashboard_url))
        try:
            async with Client(server) as fresh:
                await fresh.list_tools()  # the warm-up starts; the call comes at once
                first = await call_ok(fresh, tool, args)
                warm = await call_ok(fresh, tool, args)
            assert first.structured_content == warm.structured_content, tool
            assert text_of(first) == text_of(warm), tool
        finally:
            await server.app.aclose()
