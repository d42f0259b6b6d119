"""Failures nothing anticipated, and a refused Ray token, reach the model as clear is_error results.

In mcp 2.3 any exception that is not a ToolError shows only "Error executing tool X". A wrong Ray token made the
jobs tools answer just that (Ray's AuthenticationError was not mapped). Tested against a real Ray head started
in token authentication mode (RAY_AUTH_MODE=token).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import mcp_client, text_of

from ray_mcp.errors import AuthRefused
from ray_mcp.local_head import LocalHead
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.sources.gcs import Gcs, reported_dashboard

RIGHT = "the-right-ray-token-for-this-head"
WRONG = "a-wrong-ray-token-nobody-uses"
JOB_TOOLS = [
    ("list_jobs", {}),
    ("get_job", {"job": "raysubmit_whatever"}),
    ("submit_job", {"entrypoint": "echo never"}),
    ("wait_for_job", {"job": "raysubmit_whatever", "timeout_s": 1}),
    ("stop_job", {"job": "raysubmit_whatever"}),
]


@pytest.fixture(scope="module")
def token_head() -> Iterator[LocalHead]:
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": RIGHT}
    with local_head(num_cpus=1, extra_env=env, headers={"Authorization": f"Bearer {RIGHT}"}) as head:
        yield head


@pytest.mark.live
@pytest.mark.parametrize("token", [WRONG, None], ids=["wrong-token", "no-token"])
async def test_a_refused_ray_token_says_so_in_every_tool_instead_of_a_bare_crash(
    token_head: LocalHead, token: str | None, tmp_path: Any
) -> None:
    settings = Settings(address=token_head.dashboard_url, ray_auth_token=token, request_timeout_s=30)
    async with mcp_client(settings) as client:
        for name, args in [*JOB_TOOLS, ("cluster_status", {}), ("list_actors", {})]:
            result = await client.call_tool(name, args)
            text = text_of(result)
            assert result.is_error, (name, text)
            assert "refused the token" in text and "RAY_AUTH_TOKEN" in text, (name, text)
            assert "HTTP 40" in text and WRONG not in text, (name, text)


@pytest.mark.live
async def test_the_right_ray_token_works_on_the_token_auth_head(token_head: LocalHead) -> None:
    async with mcp_client(
        Settings(address=token_head.dashboard_url, ray_auth_token=RIGHT, request_timeout_s=30)
    ) as client:
        for name in ("list_jobs", "cluster_status"):
            result = await client.call_tool(name, {})
            assert not result.is_error, (name, text_of(result))


@pytest.mark.live
async def test_the_gcs_reads_send_this_clusters_token_and_fail_clearly_without_it(
    token_head: LocalHead,
) -> None:
    """The GCS's own facts (here the placement group table) are asked with the cluster's own Authorization; a
    refused token is a clear error saying so, never an empty table."""
    right = Gcs(
        token_head.dashboard_url,
        address=token_head.gcs_address,
        lookup=None,
        authorization=f"Bearer {RIGHT}",
        timeout_s=10,
    )
    try:
        assert await right.placement_group_table() == []
    finally:
        right.close()
    assert reported_dashboard(token_head.gcs_address, 10.0, f"Bearer {RIGHT}") == token_head.dashboard_url
    for auth in (f"Bearer {WRONG}", None):
        wrong = Gcs(
            token_head.dashboard_url,
            address=token_head.gcs_address,
            lookup=None,
            authorization=auth,
            timeout_s=10,
        )
        try:
            with pytest.raises(AuthRefused, match="refused the token for the placement group table"):
                await wrong.placement_group_table()
        finally:
            wrong.close()


class Exploding(httpx.AsyncBaseTransport):
    """A dependency that fails in a way nobody mapped (not an httpx error at all)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise KeyError("internal-detail-with-a-secret-sk_live_123")


async def test_an_unmapped_exception_becomes_a_clear_error_with_its_traceback_on_stderr(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"), http_transport=Exploding())
    with caplog.at_level(logging.ERROR, logger="ray_mcp"):
        async with Client(server) as client:
            for name in ("cluster_status", "list_actors", "cluster_health"):
                result = await client.call_tool(name, {})
                text = text_of(result)
                assert text != f"Error executing tool {name}" and "unexpected KeyError" in text, text
                if name == "cluster_health":  # it reports what it could not check: UNKNOWN, never healthy
                    assert (result.structured_content or {}).get("status") == "UNKNOWN", text
                else:
                    assert result.is_error and "stderr" in text, text
                assert "sk_live_123" not in text
            assert (await client.list_tools()).tools  # the server keeps serving
    logged = [r for r in caplog.records if r.exc_info and r.name.startswith("ray_mcp")]
    assert logged and "KeyError" in logged[0].getMessage()
    await server.app.aclose()
