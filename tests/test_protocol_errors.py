"""Protocol-level errors carry the JSON-RPC codes the MCP spec gives them (see docs/conformance.md)."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings


async def test_an_unknown_prompt_is_invalid_params_and_names_the_prompts_that_exist(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.get_prompt("no-such-prompt")
    assert caught.value.code == INVALID_PARAMS
    assert "'no-such-prompt'" in caught.value.message and "Prompts:" in caught.value.message


async def test_a_prompt_without_its_required_argument_is_invalid_params() -> None:
    server = build_server(Settings(address="http://127.0.0.1:1"))
    server.add_prompt(
        Prompt(
            name="needs-job",
            description="A prompt with a required argument.",
            arguments=[PromptArgument(name="job_id", required=True)],
            fn=lambda job_id: f"Look at {job_id}.",
        )
    )
    async with Client(server) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("needs-job", {})
        assert caught.value.code == INVALID_PARAMS and "job_id" in caught.value.message
        got = await client.get_prompt("needs-job", {"job_id": "raysubmit_1"})
        assert "raysubmit_1" in got.messages[0].content.text  # type: ignore[union-attr]
    await server.app.aclose()


async def test_an_unknown_resource_is_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as caught:
        await client.read_resource("ray-docs://nothing/here")
    assert caught.value.code == INVALID_PARAMS
