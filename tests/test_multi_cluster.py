"""Several clusters from a TOML file: every tool takes `cluster`, the first being the default."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from tests.conftest import clean_env, local_head
from tests.support import text_of
from tests.test_transports import RAY_MCP

from ray_mcp.cluster import LocalHead
from ray_mcp.server import build_server
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
    server = build_server(Settings(clusters_file=clusters))
    async with Client(server) as client:
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
    await server.app.aclose()


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
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    async with Client(server) as client:
        for tool in (await client.list_tools()).tools:
            assert "cluster" not in tool.input_schema.get("properties", {}), tool.name
    await server.app.aclose()


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
