"""What a call gets wrong is refused, saying what to send instead: an argument the tool does not have (never
ignored: an ignored filter widens the answer), a refused value (the field, the value, what is allowed), and a
tool this server does not offer (the flag that offers it)."""

from __future__ import annotations

import pytest
from mcp import Client
from tests.support import mcp_client, text_of

from ray_mcp.settings import Settings


async def refusal(client: Client, name: str, **args: object) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, text_of(result)
    return text_of(result)


@pytest.mark.parametrize(
    "mode", [{}, {"allow_destructive": True}, {"read_only": True}], ids=["default", "destr", "ro"]
)
async def test_every_tool_refuses_an_unknown_argument_and_lists_the_valid_ones(mode: dict[str, bool]) -> None:
    async with mcp_client(Settings(address="http://127.0.0.1:9", toolsets="all", **mode)) as client:
        for tool in (await client.list_tools()).tools:
            text = await refusal(client, tool.name, job_id_typo="x")
            assert f'{tool.name} has no argument "job_id_typo"' in text, text
            valid = ", ".join(tool.input_schema.get("properties") or {}) or "none"
            assert f"Its arguments: {valid}." in text, text


async def test_following_a_wrong_hint_is_refused_not_widened(offline_client: Client) -> None:
    text = await refusal(offline_client, "list_tasks", job_id="raysubmit_1", state="FAILED")
    assert 'list_tasks has no argument "job_id"' in text and "job," in text, text


async def test_a_hidden_tool_names_the_flag_that_offers_it() -> None:
    async with mcp_client(Settings(address="http://127.0.0.1:9")) as client:
        assert "--allow-destructive" in await refusal(client, "kill_actor", actor_id="a" * 32)
    async with mcp_client(Settings(address="http://127.0.0.1:9", read_only=True)) as client:
        assert "--read-only" in await refusal(client, "submit_job", entrypoint="python x.py")


async def test_a_refused_value_names_the_field_the_value_and_what_is_allowed(offline_client: Client) -> None:
    text = await refusal(offline_client, "list_actors", state="bogus")
    assert text.startswith('list_actors: state="bogus" is refused: expected') and "'DEAD'" in text, text
    assert "pydantic" not in text and "validation error" not in text, text
    assert "get_job: job is required" in await refusal(offline_client, "get_job")
    text = await refusal(offline_client, "tail_logs", job="raysubmit_1", follow_s="soon")
    assert 'follow_s="soon" is refused: expected a valid number' in text, text
    # a number is shown as the number sent, not as a string
    text = await refusal(offline_client, "tail_logs", job="raysubmit_1", lines=10**9)
    assert "lines=1000000000 is refused: expected less than or equal to" in text, text
    text = await refusal(offline_client, "submit_job", entrypoint="python x.py", metadata={"team": 7})
    assert "metadata.team=7 is refused: expected a valid string" in text, text
