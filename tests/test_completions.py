"""completion/complete through real clients, in both protocol eras: reference topics, API module names,
cluster names and prompt arguments offline, and the job ids of the session cluster over the in-memory client,
stdio and streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import PromptReference, ResourceTemplateReference
from tests.conftest import clean_env
from tests.support import submit
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings

API = ResourceTemplateReference(uri="ray-docs://api/{qualified_name}")
JOB = ResourceTemplateReference(uri="ray://jobs/{submission_id}")
FAILED_JOB = PromptReference(name="diagnose-failed-job")
ERAS = ("legacy", "2026-07-28")
pytestmark = pytest.mark.filterwarnings("ignore:ping is removed")


async def values(
    client: Client, ref: PromptReference | ResourceTemplateReference, name: str, value: str
) -> list[str]:
    return (await client.complete(ref, {"name": name, "value": value})).completion.values


@pytest.mark.parametrize("mode", ERAS)
async def test_offline_completions_in_both_eras(mode: str, tmp_path: Path) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[clusters.prod]\naddress = "http://127.0.0.1:9"\n[clusters.staging]\naddress = "http://127.0.0.1:9"\n'
    )
    server = build_server(Settings(clusters_file=clusters))
    try:
        async with Client(server, mode=mode) as client:
            if mode == "legacy":  # the in-memory 2026 client synthesizes its discovery
                assert client.server_capabilities.completions is not None
            assert await values(client, API, "qualified_name", "ray.util.place") == [
                "ray.util.placement_group"
            ]
            assert "ray.util" in await values(client, API, "qualified_name", "ray.u")
            assert await values(client, API, "qualified_name", "r") == ["ray"]
            assert await values(client, FAILED_JOB, "cluster", "st") == ["staging"]
            assert await values(client, FAILED_JOB, "topic", "12") == ["12-job-submission"]
            # The clusters cannot be reached: nothing to complete, and no error.
            assert await values(client, FAILED_JOB, "job", "raysubmit_") == []
            assert await values(client, FAILED_JOB, "focus", "any") == []
    finally:
        await server.app.aclose()


async def test_job_ids_complete_by_prefix_from_one_read(server: RayMCPServer) -> None:
    async with Client(server) as client:
        sid = await submit(client, entrypoint="echo completion", submission_id="raysubmit_complete_me_1")
        assert sid in await values(client, JOB, "submission_id", "raysubmit_complete_")
        assert await values(client, JOB, "submission_id", "RAYSUBMIT_COMPLETE_ME") == [
            sid
        ]  # case-insensitive
        assert await values(client, FAILED_JOB, "job", "zzz-no-such") == []
    await server.app.aclose()


@pytest.mark.live
async def test_completions_over_stdio_and_streamable_http(ray_cluster, tmp_path: Path) -> None:
    args = ["--address", ray_cluster.dashboard_url]
    params = StdioServerParameters(command=RAY_MCP, args=args, env=clean_env())
    with open(tmp_path / "stdio.log", "w") as errlog:
        for mode in ERAS:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                assert await values(client, API, "qualified_name", "ray.util.place") == [
                    "ray.util.placement_group"
                ]
    with http_server(["--transport", "streamable-http", *args], tmp_path / "http.log") as port:
        for mode in ERAS:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
                assert await values(client, FAILED_JOB, "topic", "06") == ["06-ray-serve"]
                assert isinstance(await values(client, JOB, "submission_id", "raysubmit_"), list)
