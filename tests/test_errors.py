"""Failures become is_error results that say what failed and what to do; the server keeps serving."""

from __future__ import annotations

import re

import httpx
from mcp import Client
from tests.support import RAY_TOOLSETS, mcp_client, text_of

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

BARE_CRASH = re.compile(r"^Error executing tool \S+$")


async def test_an_unreachable_address_gives_an_error_naming_it_and_the_server_keeps_serving() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"))  # discard port: nothing listens
    async with Client(server) as client:
        for _ in range(2):
            result = await client.call_tool("cluster_status", {})
            assert result.is_error
            text = text_of(result)
            assert "http://127.0.0.1:9" in text and "--address" in text
            assert not BARE_CRASH.match(text)
        assert (await client.list_tools()).tools
    await server.app.aclose()


async def test_an_unreachable_gcs_address_names_the_address_it_tried() -> None:
    async with mcp_client(Settings(address="127.0.0.1:9", request_timeout_s=2)) as client:
        result = await client.call_tool("cluster_status", {})
        assert result.is_error
        assert "127.0.0.1:9" in text_of(result) and "--dashboard-url" in text_of(result)


async def test_a_refused_connection_says_what_is_lost_if_the_cluster_is_gone_and_where_the_rest_is() -> None:
    async with mcp_client(Settings(address="http://127.0.0.1:9")) as client:  # discard port: refused
        result = await client.call_tool("get_job", {"job": "raysubmit_abc"})
    text = text_of(result)
    assert result.is_error and "http://127.0.0.1:9" in text
    assert "lost" in text and "State API" in text and "fault tolerant" in text  # what goes with the head
    assert "/tmp/ray/session_*/logs" in text and "history+http://" in text  # where what is left is kept


class FlakyDashboard(httpx.AsyncBaseTransport):
    """A dashboard that times out, then answers 500, then recovers (forwarding to the real one)."""

    def __init__(self) -> None:
        self.mode = "timeout"
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.mode == "timeout":
            raise httpx.ReadTimeout(
                "simulated: the dashboard accepted the request and never answered", request=request
            )
        if self.mode == "500":
            return httpx.Response(500, text="Internal Server Error: simulated", request=request)
        return await self.real.handle_async_request(request)


async def test_a_dashboard_that_times_out_or_fails_gives_clear_errors_then_recovers(ray_cluster) -> None:
    flaky = FlakyDashboard()
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url, request_timeout_s=3), http_transport=flaky
    ) as client:
        result = await client.call_tool("cluster_status", {})
        assert result.is_error and "did not answer" in text_of(result) and "3 s" in text_of(result)

        flaky.mode = "500"
        result = await client.call_tool("cluster_status", {})
        assert (
            result.is_error and "HTTP 500" in text_of(result) and ray_cluster.dashboard_url in text_of(result)
        )

        flaky.mode = "real"
        result = await client.call_tool("cluster_status", {})
        assert not result.is_error, text_of(result)


async def test_no_tool_ever_answers_with_the_bare_crash_text(ray_cluster) -> None:
    """Call every tool on a dead and a live cluster with empty and hostile arguments: no bare crash text."""
    hostile: list[dict] = [
        {},
        {"max_nodes": -1},
        {"max_nodes": "many"},
        {"limit": 10**12},
        {"unknown": "x" * 5000},
    ]
    for address in ("http://127.0.0.1:9", ray_cluster.dashboard_url):
        async with mcp_client(
            Settings(address=address, request_timeout_s=3, toolsets=RAY_TOOLSETS)
        ) as client:
            for tool in (await client.list_tools()).tools:
                for args in hostile:
                    result = await client.call_tool(tool.name, args)
                    if result.is_error:
                        assert not BARE_CRASH.match(text_of(result)), (tool.name, args, text_of(result))
