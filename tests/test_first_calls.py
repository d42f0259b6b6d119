"""A fresh server's first call of a tool answers exactly what the same call answers warm."""

from __future__ import annotations

import uuid

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import Cluster, clean_env
from tests.state_drivers import driver
from tests.support import call_ok, run_to_end, text_of
from tests.test_health_at_scale import Counting
from tests.test_transports import RAY_MCP

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings


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
                await fresh.list_tools()
                first = await call_ok(fresh, tool, args)
                warm = await call_ok(fresh, tool, args)
            assert first.structured_content == warm.structured_content, tool
            assert text_of(first) == text_of(warm), tool
        finally:
            await server.app.aclose()


async def test_a_list_actors_page_smaller_than_the_match_counts_the_same_in_a_fresh_server(
    ray_cluster: Cluster,
) -> None:
    """A page of 1 out of 3 matching actors: the first call counts all 3 from its one request, as the warm
    call does, whether it counts through the dashboard (a namespace filter) or from the GCS's actor table (a
    class filter: the GCS filters by class, job and state)."""
    suffix = uuid.uuid4().hex[:8]
    namespace, cls = f"first-{suffix}", f"Waiter{suffix}"
    body = f"""
        @ray.remote(num_cpus=0)
        class {cls}:
            def ping(self):
                return 1
        waiters = [{cls}.remote() for _ in range(3)]
        ray.get([w.ping.remote() for w in waiters])
    """
    with driver(ray_cluster.gcs_address, body, namespace):
        for args in ({"namespace": namespace, "limit": 1}, {"class_name": cls, "limit": 1}):
            counting = Counting()
            server = build_server(
                Settings(address=ray_cluster.gcs_address or ray_cluster.dashboard_url),
                http_transport=counting,
            )
            try:
                async with Client(server) as fresh:
                    await fresh.list_tools()
                    first = await call_ok(fresh, "list_actors", args)
                    counting.requests.clear()
                    warm = await call_ok(fresh, "list_actors", args)
            finally:
                await server.app.aclose()
            if "class_name" in args:  # the warm call asks the dashboard for its page only
                listed = [r for r in counting.requests if r.startswith("/api/v0/actors?")]
                assert len(listed) == 1 and "limit=1&" in listed[0], counting.requests
            assert first.structured_content == warm.structured_content, args
            assert text_of(first) == text_of(warm), args
            data = first.structured_content or {}
            assert data.get("matched") == 3 and data.get("by_state") == {"ALIVE": 3}, data
            assert cls in text_of(first), text_of(first)


async def test_first_answers_in_a_fresh_server_process_equal_its_warm_answers(
    client: Client, ray_cluster: Cluster
) -> None:
    """In a fresh ``ray-mcp`` process, the first call of each tool right after tools/list answers exactly what
    the same call answers warm, with the secret in the job's log redacted both times."""
    sid, info = await run_to_end(client, entrypoint="echo api_key=AKIAIOSFODNN7EXAMPLE first-in-process")
    assert info["status"] == "SUCCEEDED", info
    calls = [("get_job", {"job": sid}), ("tail_logs", {"job": sid, "lines": 20}), ("pg_status", {})]
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", ray_cluster.dashboard_url], env=clean_env()
    )
    for tool, args in calls:
        with anyio.fail_after(180):
            async with Client(stdio_client(params)) as fresh:
                await fresh.list_tools()
                first = await call_ok(fresh, tool, args)
                warm = await call_ok(fresh, tool, args)
        assert first.structured_content == warm.structured_content, tool
        assert text_of(first) == text_of(warm), tool
        assert "AKIAIOSFODNN7EXAMPLE" not in text_of(first), tool
