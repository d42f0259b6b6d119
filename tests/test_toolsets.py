"""Toolsets: tools/list offers what fits the cluster, --toolsets and RAY_MCP_TOOLSETS choose others, and every
tool and parameter is described in words. (Serve's part, on a real cluster: tests/test_serve.py.)"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest
from mcp import Client
from tests.npm_tools import REPO
from tests.support import mcp_client, text_of

from ray_mcp.cli import BadUsage, parse_settings
from ray_mcp.server.build import TOOL_AREAS, build_server
from ray_mcp.settings import Settings
from ray_mcp.toolsets import Toolset

PLAIN = "http://127.0.0.1:9"  # a cluster that runs no Serve or Train (nothing answers there)
DEFAULT_LIST_BUDGET = 16 * 1024  # the default tools/list of a plain cluster (issue 36); core and jobs pay it
CORE_AND_JOBS = {Toolset.CORE, Toolset.JOBS}


async def listing(**settings: Any) -> tuple[list[dict[str, Any]], dict[str, Toolset]]:
    """tools/list as a real client receives it, and every registered tool's toolset."""
    server = build_server(Settings(**{"address": PLAIN, "embedded": "never", **settings}))
    try:
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
        of = dict(server.toolsets.of)
    finally:
        await server.app.aclose()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], of


def toolsets_of(tools: list[dict[str, Any]], of: dict[str, Toolset]) -> set[Toolset]:
    return {of[t["name"]] for t in tools}


async def test_a_plain_clusters_default_list_is_the_core_and_job_tools_within_16_kb() -> None:
    tools, of = await listing()
    assert toolsets_of(tools, of) == CORE_AND_JOBS
    assert {t["name"] for t in tools} == {name for name, ts in of.items() if ts in CORE_AND_JOBS}
    size = len(json.dumps(tools, separators=(",", ":")).encode())
    assert size <= DEFAULT_LIST_BUDGET, f"the default tools/list is {size} bytes for {len(tools)} tools"


@pytest.mark.parametrize(
    ("settings", "added"),
    [
        ({"address": "k8s://ray/raycluster-a"}, Toolset.KUBERNETES),
        ({"kubernetes_tools": True}, Toolset.KUBERNETES),
        ({"prometheus": "http://127.0.0.1:9"}, Toolset.METRICS),
        ({"metrics_tools": True}, Toolset.METRICS),
    ],
)
async def test_the_default_list_adds_what_the_cluster_can_use(
    settings: dict[str, Any], added: Toolset
) -> None:
    tools, of = await listing(**settings)
    assert toolsets_of(tools, of) == CORE_AND_JOBS | {added}


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [
        ("profiling", {Toolset.PROFILING}),
        ("default, Profiling", CORE_AND_JOBS | {Toolset.PROFILING}),
        ("jobs,serve", {Toolset.JOBS, Toolset.SERVE}),
        ("all", set(Toolset)),
        ("core,all", set(Toolset)),
    ],
)
async def test_toolsets_chosen_by_flag_are_what_is_listed(chosen: str, expected: set[Toolset]) -> None:
    tools, of = await listing(toolsets=chosen)
    assert toolsets_of(tools, of) == expected


async def test_the_environment_chooses_toolsets_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_MCP_TOOLSETS", "train,tasks")
    assert Settings().toolset_selection() == ("train", "tasks")
    tools, of = await listing(toolsets=Settings().toolsets)
    assert toolsets_of(tools, of) == {Toolset.TRAIN, Toolset.TASKS}


@pytest.mark.parametrize("given", [["--toolsets", "core,bogus"], ["--toolsets", " , "]])
def test_an_unknown_toolset_is_a_clear_startup_error(given: list[str]) -> None:
    with pytest.raises(BadUsage) as refused:
        parse_settings(given)  # what `ray-mcp --toolsets ...` runs first: exit status 2 with this one line
    assert refused.value.code == 2
    line = refused.value.message
    assert "\n" not in line and line.startswith(
        "ray-mcp: invalid setting: --toolsets (or RAY_MCP_TOOLSETS)"
    ), line
    assert "core, jobs, tasks, serve, train, profiling, kubernetes, metrics" in line and "all" in line, line


async def test_a_tool_the_flag_left_out_is_refused_with_the_flag_that_offers_it() -> None:
    async with mcp_client(Settings(address=PLAIN, toolsets="core")) as client:
        result = await client.call_tool("list_jobs", {})
    assert result.is_error
    text = text_of(result)
    assert "list_jobs is in the toolset 'jobs'" in text and "--toolsets core,jobs" in text, text


async def test_a_tool_outside_the_default_set_is_not_listed_but_still_answers() -> None:
    # the answers' hints name tools of every toolset: under the default set such a call reaches the cluster
    async with mcp_client(Settings(address=PLAIN, request_timeout_s=2)) as client:
        assert "list_tasks" not in {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("list_tasks", {})
    text = text_of(result)
    assert "toolset" not in text and "127.0.0.1:9" in text, text  # the cluster's error, not a refusal


def test_every_tool_area_names_its_toolset_where_its_tools_are_defined() -> None:
    for area in TOOL_AREAS:
        module = importlib.import_module(f"ray_mcp.tools.{area}")
        assert isinstance(getattr(module, "TOOLSET", None), Toolset), f"ray_mcp.tools.{area} names no TOOLSET"


async def test_every_tool_and_every_parameter_is_described_in_words() -> None:
    tools, _ = await listing(toolsets="all", allow_destructive=True)
    for tool in tools:
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", tool["description"].strip()) if s]
        assert 1 <= len(sentences) <= 2, (tool["name"], sentences)
        for name, prop in tool["inputSchema"].get("properties", {}).items():
            words = prop.get("description", "").split()
            assert len(words) >= 3, f"{tool['name']}.{name} is not described in words: {words}"


def readme_toolsets() -> dict[str, set[str]]:
    """The README's toolset table: toolset -> the tools its row names."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| toolset | tools | in the default set |") :].split("\n\n", 1)[0]
    rows = [line.split("|") for line in table.splitlines()[2:] if line.startswith("|")]
    return {row[1].strip().strip("`"): set(re.findall(r"`(\w+)`", row[2])) for row in rows}


async def test_the_readme_says_which_toolset_holds_each_tool_and_how_to_choose() -> None:
    _, of = await listing(toolsets="all", allow_destructive=True)
    expected = {ts.value: {name for name, t in of.items() if t is ts} for ts in Toolset}
    assert readme_toolsets() == expected
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`--toolsets`" in readme and "`RAY_MCP_TOOLSETS`" in readme and "default,profiling" in readme


async def test_the_readme_counts_the_tools_and_bytes_of_the_default_list_and_of_every_toolset() -> None:
    """The README's figures are measured ones: "(N tools, X KB of tools/list, against M tools and Y KB in all"."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    said = re.search(
        r"\((\d+) tools, (\d+) KB of tools/list, against (\d+) tools and (\d+) KB in all", readme
    )
    assert said, "the README no longer says how big the default tools/list is"
    for (tools, _), n, kb in ((await listing(), 1, 2), (await listing(toolsets="all"), 3, 4)):
        size = len(json.dumps(tools, separators=(",", ":")).encode())
        assert (int(said[n]), int(said[kb])) == (len(tools), round(size / 1024)), (len(tools), size)
