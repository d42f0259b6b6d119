"""A client that lists the tools is about to call them: the server then connects and imports Ray in the
background, so that a first call costs what later ones do, and a warm-up that fails changes no answer."""

from __future__ import annotations

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import Cluster, clean_env
from tests.support import call_ok, run_to_end, text_of
from tests.test_transports import RAY_MCP

from ray_mcp.server.build import build_server
from ray_mcp.server.context import WARM_UP_QUIET_S
from ray_mcp.settings import Settings


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


async def test_first_answers_in_a_fresh_server_process_equal_its_warm_answers_whenever_they_come(
    client: Client, ray_cluster: Cluster
) -> None:
    """In a fresh process (Ray not imported yet), the first call of each tool right after tools/list, or while
    the warm-up imports Ray (WARM_UP_QUIET_S later), answers exactly what the same call answers warm."""
    sid, info = await run_to_end(client, entrypoint="echo api_key=AKIAIOSFODNN7EXAMPLE first-in-process")
    assert info["status"] == "SUCCEEDED", info
    calls = [("get_job", {"job": sid}), ("tail_logs", {"job": sid, "lines": 20}), ("pg_status", {})]
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", ray_cluster.dashboard_url], env=clean_env()
    )
    for pause in (0.0, WARM_UP_QUIET_S + 0.05):
        for tool, args in calls:
            with anyio.fail_after(180):
                async with Client(stdio_client(params)) as fresh:
                    await fresh.list_tools()
                    await anyio.sleep(pause)
                    first = await call_ok(fresh, tool, args)
                    warm = await call_ok(fresh, tool, args)
            assert first.structured_content == warm.structured_content, (tool, pause)
            assert text_of(first) == text_of(warm), (tool, pause)
            assert "AKIAIOSFODNN7EXAMPLE" not in text_of(first), (tool, pause)
