"""A server lists its tools from catalog.json and builds each on first use: the same tools, listed the same,
answering the same, in any order and in parallel; a catalog that does not match is never used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.conftest import Cluster
from tests.support import call_ok, mcp_client, text_of

from ray_mcp import catalog
from ray_mcp.reference.pages import data_dir, front_matter_text, parse_front_matter, parse_yaml
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

OFFLINE = "http://127.0.0.1:9"
MODES = [{}, {"read_only": True}, {"allow_destructive": True}, {"read_only": True, "allow_destructive": True}]


def listing(tools: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def test_the_packaged_catalog_matches_this_copy_of_ray_mcp() -> None:
    assert catalog.load() is not None, (
        "src/ray_mcp/catalog.json does not match the sources: run `python -m ray_mcp.catalog` (make catalog) "
        "and commit it"
    )


@pytest.mark.parametrize("mode", MODES, ids=lambda m: ",".join(m) or "default")
async def test_a_server_listing_from_the_catalog_lists_what_building_every_tool_lists(
    mode: dict[str, bool],
) -> None:
    settings = Settings(address=OFFLINE, **mode)
    built, listed = build_server(settings, catalog=None), build_server(settings)
    assert listed.listed is not None and built.listed is None
    async with Client(built) as a, Client(listed) as b:  # as a client receives them, over the protocol
        assert listing((await b.list_tools()).tools) == listing((await a.list_tools()).tools)
    assert listed.tool_kinds == built.tool_kinds and listed.hidden_tools == built.hidden_tools
    for server in (built, listed):
        await server.app.aclose()


async def test_a_tool_listed_from_the_catalog_is_built_on_its_first_call_and_validates_like_a_built_one() -> (
    None
):
    settings = Settings(address=OFFLINE, warm_up=False)  # only calls build tools
    built, listed = build_server(settings, catalog=None), build_server(settings)
    assert "get_job" in listed.unbuilt
    async with Client(built) as a, Client(listed) as b:
        for name, args in [
            ("get_job", {}),
            ("get_job", {"job": ""}),
            ("no_such_tool", {}),
            ("tail_logs", {}),
        ]:
            expected, got = await a.call_tool(name, args), await b.call_tool(name, args)
            assert got.is_error and expected.is_error, (name, args)
            assert text_of(got) == text_of(expected), (name, args)
    assert "get_job" not in listed.unbuilt and "tail_logs" not in listed.unbuilt
    assert "list_actors" in listed.unbuilt  # only what was called
    for server in (built, listed):
        await server.app.aclose()


def test_a_catalog_that_does_not_match_or_cannot_be_read_is_never_used(tmp_path: Path) -> None:
    data = json.loads(catalog.PATH.read_text(encoding="utf-8"))
    cases = {
        "stale.json": json.dumps({**data, "fingerprint": "0" * 32}),
        "malformed.json": "{not json",
        "not-a-dict.json": "[1, 2]",
        "unknown-kind.json": json.dumps({**data, "tools": [{**data["tools"][0], "kind": "harmless"}]}),
        "unknown-area.json": json.dumps({**data, "tools": [{**data["tools"][0], "area": "os"}]}),
        "no-tools.json": json.dumps({"fingerprint": data["fingerprint"]}),
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert catalog.load(tmp_path / name) is None, name
    assert catalog.load(tmp_path / "missing.json") is None
    (tmp_path / "same.json").write_text(json.dumps(data), encoding="utf-8")
    assert catalog.load(tmp_path / "same.json") is not None  # the cases above fail for their one change


async def test_a_multi_cluster_server_builds_every_tool_at_startup(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[clusters.a]\naddress = "http://127.0.0.1:9"\n\n[clusters.b]\naddress = "http://127.0.0.1:10"\n',
        encoding="utf-8",
    )
    server = build_server(Settings(clusters_file=clusters))
    assert server.listed is None and not server.unbuilt  # its tools take a `cluster` argument
    names = {t.name for t in await server.list_tools()}
    assert {"get_job", "cluster_status"} <= names
    await server.app.aclose()


async def test_parallel_first_calls_of_every_tool_each_build_it_once(ray_cluster: Cluster) -> None:
    server = build_server(Settings(address=ray_cluster.dashboard_url, warm_up=False))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("cluster_status", {}), ("list_nodes", {}), ("list_actors", {}), ("pg_status", {}),
        ("list_jobs", {}), ("summarize_tasks", {}), ("list_tasks", {"limit": 3}), ("cluster_status", {}),
        ("list_actors", {"limit": 1}), ("serve_status", {}),
    ]  # fmt: skip
    results: dict[int, Any] = {}
    async with Client(server) as client:

        async def run(i: int, name: str, args: dict[str, Any]) -> None:
            results[i] = await client.call_tool(name, args)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for i, (name, args) in enumerate(calls):
                    tg.start_soon(run, i, name, args)
        for i, (name, _) in enumerate(calls):
            assert not results[i].is_error, (name, text_of(results[i]))
        registered = [tool.name for tool in server._tool_manager.list_tools()]
        assert sorted(registered) == sorted({name for name, _ in calls})  # each once, nothing else
        assert not {name for name, _ in calls} & set(server.unbuilt)
    await server.app.aclose()


async def test_the_warm_up_builds_every_listed_tool_when_no_call_is_under_way(ray_cluster: Cluster) -> None:
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    async with Client(server) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        await call_ok(client, "cluster_status")
        with anyio.fail_after(60):
            while server.unbuilt:
                await anyio.sleep(0.05)
        assert {tool.name for tool in server._tool_manager.list_tools()} == listed
        await call_ok(client, "list_nodes")  # a tool the warm-up built answers like any other
    await server.app.aclose()


async def test_prompts_are_listed_from_front_matter_known_by_its_exact_text() -> None:
    async with mcp_client(Settings(address=OFFLINE)) as client:
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    files = sorted(data_dir("prompts").glob("*.md"))
    headers = [h for h in (front_matter_text(p.read_text(encoding="utf-8")) for p in files) if h is not None]
    assert headers and all(h in catalog.known_front_matter() for h in headers)  # no YAML parsed to list them
    for header in headers:
        meta = parse_yaml(header)
        if "name" not in meta:
            continue
        listed = prompts[meta["name"]]
        assert (listed.title, listed.description) == (
            meta.get("title", meta["name"]),
            meta.get("description", ""),
        )
        assert [a.name for a in listed.arguments or []] == [a["name"] for a in meta.get("arguments") or []]
    # A file whose front matter changed is parsed again: the key is the text itself.
    changed = headers[0].replace("description:", "description: Changed.", 1)
    assert changed not in catalog.known_front_matter()
    assert parse_front_matter(f"---\n{changed}\n---\nbody\n")[0]["description"].startswith("Changed.")
