"""Several clusters from a TOML file: every tool takes `cluster`, the first being the default."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import ElicitRequestParams, ElicitResult
from tests.conftest import clean_env, local_head
from tests.support import mcp_client, text_of
from tests.test_transports import RAY_MCP

from ray_mcp.local_head import LocalHead
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings, load_clusters_file


@pytest.fixture(scope="module")
def second_cluster() -> Iterator[LocalHead]:
    with local_head(num_cpus=1) as head:
        yield head


def write_clusters(path: Path, first: str, second: str) -> Path:
    path.write_text(
        f'[clusters.main]\naddress = "{first}"\n\n'
        f'[clusters.side]\naddress = "{second}"\nheaders = {{ X-Team = "rl" }}\n',
        encoding="utf-8",
    )
    return path


async def test_each_call_reaches_the_cluster_it_names(
    ray_cluster, second_cluster: LocalHead, tmp_path: Path
) -> None:
    clusters = write_clusters(
        tmp_path / "clusters.toml", ray_cluster.dashboard_url, second_cluster.dashboard_url
    )
    async with mcp_client(Settings(clusters_file=clusters)) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "cluster_status")
        schema = tool.input_schema["properties"]["cluster"]
        assert "main" in str(schema) and "side" in str(schema)
        default = await client.call_tool("cluster_status", {})
        side = await client.call_tool("cluster_status", {"cluster": "side"})
        main = await client.call_tool("cluster_status", {"cluster": "main"})
        assert default.structured_content["dashboard_url"] == ray_cluster.dashboard_url
        assert main.structured_content["dashboard_url"] == ray_cluster.dashboard_url
        assert side.structured_content["dashboard_url"] == second_cluster.dashboard_url
        assert side.structured_content["resources"]["CPU"]["total"] == 1
        wrong = await client.call_tool("cluster_status", {"cluster": "nope"})
        assert wrong.is_error and "side" in text_of(wrong)


async def test_a_destructive_tools_confirmation_looks_in_the_cluster_it_names(
    ray_cluster, second_cluster: LocalHead, tmp_path: Path
) -> None:
    """The confirmation resolvers run before the tool body: they must see the named cluster too."""
    clusters = write_clusters(
        tmp_path / "clusters.toml", ray_cluster.dashboard_url, second_cluster.dashboard_url
    )
    server = build_server(Settings(clusters_file=clusters, allow_destructive=True))
    async with Client(server) as client:
        missing = await client.call_tool("kill_actor", {"actor_id": "ab" * 16, "cluster": "side"})
    assert missing.is_error and second_cluster.dashboard_url in text_of(missing)
    await server.app.aclose()


async def test_a_single_cluster_keeps_the_cluster_argument_off_the_schema(ray_cluster) -> None:
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, toolsets="all")) as client:
        for tool in (await client.list_tools()).tools:
            assert "cluster" not in tool.input_schema.get("properties", {}), tool.name


@pytest.mark.live
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("", "no [clusters.<name>] table"),
        ("[clusters.a]\nheaders = {}\n", "needs an address"),
        ('[clusters.a]\naddress = "x:1"\npassword = "p"\n', "unknown keys"),
        ("[clusters.a\n", "Cannot read"),
    ],
)
def test_a_bad_clusters_file_is_refused_with_what_is_wrong(
    tmp_path: Path, content: str, problem: str
) -> None:
    path = tmp_path / "clusters.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        load_clusters_file(path)
    out = subprocess.run(
        [RAY_MCP, "--clusters-file", str(path)], capture_output=True, text=True, timeout=60, env=clean_env()
    )
    assert out.returncode != 0 and problem.split()[0] in out.stderr


async def test_a_confirmation_made_on_one_cluster_never_acts_on_another(
    ray_cluster, second_cluster: LocalHead, tmp_path: Path
) -> None:
    """The same submission id on both clusters: a token from main's dry run is refused on side."""
    clusters = write_clusters(
        tmp_path / "clusters.toml", ray_cluster.dashboard_url, second_cluster.dashboard_url
    )
    server = build_server(Settings(clusters_file=clusters, allow_destructive=True))
    sid = f"twin-{uuid.uuid4().hex[:8]}"
    async with Client(server) as client:
        for name in ("main", "side"):
            done = await client.call_tool(
                "submit_job", {"entrypoint": f"echo twin-on-{name}", "submission_id": sid, "cluster": name}
            )
            assert not done.is_error, done.content[0].text
        for name in ("main", "side"):
            with anyio.fail_after(180):
                while (await client.call_tool("get_job", {"job": sid, "cluster": name})).structured_content[
                    "status"
                ] not in ("SUCCEEDED", "FAILED"):
                    await anyio.sleep(0.5)
        dry = await client.call_tool("delete_job", {"job": sid, "cluster": "main"})
        message = dry.structured_content["message"]
        assert "'main'" in message and ray_cluster.dashboard_url in message, message
        token = dry.structured_content["confirm_token"]
        crossed = await client.call_tool("delete_job", {"job": sid, "cluster": "side", "confirm": token})
        assert crossed.is_error and "does not match" in crossed.content[0].text
        assert "'side'" in crossed.content[0].text and second_cluster.dashboard_url in crossed.content[0].text
        kept = await client.call_tool("get_job", {"job": sid, "cluster": "side"})
        assert not kept.is_error and kept.structured_content["entrypoint"] == "echo twin-on-side"
        ok = await client.call_tool("delete_job", {"job": sid, "cluster": "main", "confirm": token})
        assert not ok.is_error and ok.structured_content["done"] is True

    asked: list[str] = []

    async def user(_context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="decline")

    async with Client(server, elicitation_callback=user) as client:
        declined = await client.call_tool("delete_job", {"job": sid, "cluster": "side"})
        assert not declined.is_error and declined.structured_content["done"] is False
    assert len(asked) == 1 and "'side'" in asked[0] and second_cluster.dashboard_url in asked[0], asked
    await server.app.aclose()
