"""A client that lists the tools is about to call them: the server then connects and imports Ray in the
background, so that a first call costs what later ones do, and a warm-up that fails changes no answer."""

from __future__ import annotations

import uuid

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import Cluster, clean_env
from tests.state_drivers import driver
from tests.support import call_ok, run_to_end, text_of
from tests.test_transports import RAY_MCP

from ray_mcp.server.build import build_server
from ray_mcp.server.context import WARM_UP_IDLE_WAIT_S, WARM_UP_QUIET_S
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


async def test_the_warm_up_waits_while_calls_follow_each_other_and_goes_on_once_they_stop(
    client: Client, ray_cluster: Cluster
) -> None:
    """An agent's calls often come back to back: the warm-up's next GIL-heavy step (Ray's import, the GCS
    lookup) waits until none has been under way for WARM_UP_QUIET_S, so it slows none of them."""
    sid, info = await run_to_end(client, entrypoint="echo back-to-back")
    assert info["status"] == "SUCCEEDED", info
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    try:
        async with Client(server) as fresh:
            await fresh.list_tools()
            warming = server.app.warm_up()
            assert warming is not None
            busy_until = anyio.current_time() + WARM_UP_IDLE_WAIT_S / 2
            while anyio.current_time() < busy_until:  # gaps between calls far below WARM_UP_QUIET_S
                await call_ok(fresh, "get_job", {"job": sid})
            assert not (await server.app.api()).gcs_connected, "the warm-up went on between two calls"
            with anyio.fail_after(120):
                await warming
            assert (await server.app.api()).gcs_connected
    finally:
        await server.app.aclose()


async def test_a_list_actors_page_smaller_than_the_match_answers_at_once_in_a_fresh_server(
    ray_cluster: Cluster,
) -> None:
    """Before the warm-up has opened the GCS channel, the counts of a partial page come from the State API's
    summary (no wait for Ray's import): the same answer as once the channel is open."""
    namespace = f"first-{uuid.uuid4().hex[:8]}"
    body = """
        @ray.remote(num_cpus=0)
        class Waiter:
            def ping(self):
                return 1
        waiters = [Waiter.remote() for _ in range(3)]
        ray.get([w.ping.remote() for w in waiters])
    """
    with driver(ray_cluster.gcs_address, body, namespace):
        args = {"namespace": namespace, "limit": 1}
        server = build_server(Settings(address=ray_cluster.gcs_address or ray_cluster.dashboard_url))
        try:
            async with Client(server) as fresh:
                await fresh.list_tools()
                first = await call_ok(fresh, "list_actors", args)
                warming = server.app.warm_up()
                assert warming is not None
                with anyio.fail_after(120):
                    await warming
                assert (await server.app.api()).gcs_connected
                warm = await call_ok(fresh, "list_actors", args)
        finally:
            await server.app.aclose()
    assert first.structured_content == warm.structured_content
    assert text_of(first) == text_of(warm)
    assert (first.structured_content or {}).get("matched") == 3, first.structured_content


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


async def test_a_listing_counts_as_activity_so_a_call_right_after_it_runs_before_the_gil_heavy_steps(
    ray_cluster: Cluster,
) -> None:
    """A client that lists the tools often calls one at once: the GCS channel (and Ray's import, in a fresh
    process) wait until WARM_UP_QUIET_S after the listing, as after a call. With the GCS address given, nothing
    else delays the channel."""
    assert ray_cluster.gcs_address is not None
    server = build_server(Settings(address=ray_cluster.gcs_address))
    try:
        async with Client(server) as fresh:
            await (
                server.app.api()
            )  # the cluster found and the HTTP client made: the channel is all that is left
            listed = anyio.current_time()
            await fresh.list_tools()
            warming = server.app.warm_up()
            assert warming is not None
            with anyio.fail_after(120):
                while not (await server.app.api()).gcs_connected:
                    await anyio.sleep(0.005)
            assert anyio.current_time() - listed >= WARM_UP_QUIET_S
            await warming
    finally:
        await server.app.aclose()
