"""Every prompt renders with its arguments, and every tool and resource it names exists on the server."""

from __future__ import annotations

import re

import pytest
from mcp import Client
from tests.support import mcp_client

from ray_mcp.server.prompts import prompt_files
from ray_mcp.settings import Settings

RUNBOOKS = {
    "ray-expert": ["focus"],
    "diagnose-failed-job": ["job"],
    "debug-pending-placement-group": ["placement_group"],
    "serve-deployment-unhealthy": ["app"],
    "runtime-env-failure": ["job"],
    "submit-training-job": ["script", "gpus"],
}
# Words shaped like our tool names (verb_noun with a ray-mcp verb); a typo such as `list_actor` must fail.
TOOLISH = re.compile(
    r"\b((?:list|get|submit|wait|stop|delete|tail|kill|serve|pg|cluster|summarize|diagnose)_[a-z_]+)\b"
)
NOT_TOOLS = {"wait_for", "get_log", "serve_deploy_schema", "list_of_refs"}  # Ray words and arguments


async def test_every_expected_prompt_is_listed_with_its_arguments(offline_client: Client) -> None:
    listed = {p.name: p for p in (await offline_client.list_prompts()).prompts}
    for name, arguments in RUNBOOKS.items():
        assert name in listed, name
        assert [a.name for a in listed[name].arguments or []] == arguments
        assert listed[name].description


@pytest.mark.parametrize("name", sorted(RUNBOOKS))
async def test_each_prompt_renders_with_its_arguments_and_embeds_its_reference_pages(
    offline_client: Client, name: str
) -> None:
    values = {arg: f"VALUE-{arg}" for arg in RUNBOOKS[name]}
    result = await offline_client.get_prompt(name, values)
    text = result.messages[0].content.text
    for value in values.values():
        assert value in text
    assert "{{" not in text
    prompt = next(p for p in prompt_files() if p.name == name)
    embedded = [m.content.resource.uri for m in result.messages[1:] if m.content.type == "resource"]
    assert embedded == list(prompt.resources)


async def test_every_tool_and_resource_a_prompt_names_exists() -> None:
    # a prompt may name a tool of any toolset: one that is not listed still answers (server/toolsets.py)
    async with mcp_client(Settings(address="http://127.0.0.1:9", toolsets="all")) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        resources = {r.uri for r in (await client.list_resources()).resources}
    problems = []
    for prompt in prompt_files():
        named = set(prompt.tools) | {m for m in TOOLISH.findall(prompt.body) if m not in NOT_TOOLS}
        problems += [f"{prompt.name}: tool {t}" for t in sorted(named - tools)]
        problems += [
            f"{prompt.name}: tool {t} listed but not mentioned" for t in prompt.tools if t not in prompt.body
        ]
        problems += [f"{prompt.name}: resource {r}" for r in prompt.resources if r not in resources]
        uris = set(re.findall(r"ray-docs://reference/[\w-]+", prompt.body)) - {"ray-docs://reference/index"}
        problems += [f"{prompt.name}: resource {u}" for u in sorted(uris - resources)]
    assert problems == []


async def test_a_missing_required_argument_is_an_error_not_a_crash(offline_client: Client) -> None:
    with pytest.raises(Exception, match="job"):
        await offline_client.get_prompt("diagnose-failed-job", {})
    assert (await offline_client.list_prompts()).prompts
