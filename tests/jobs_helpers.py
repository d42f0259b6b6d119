"""Shared helpers of the job and log tests: submit through the real MCP client, poll with deadlines."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}


async def call_ok(client: Client, name: str, args: dict[str, Any], **kw: Any) -> Any:
    result = await client.call_tool(name, args, **kw)
    assert not result.is_error, result.content[0].text
    return result


async def submit(client: Client, **args: Any) -> str:
    result = await call_ok(client, "submit_job", args)
    return str(result.structured_content["submission_id"])


async def wait_until(client: Client, job: str, statuses: set[str], deadline_s: float = 180) -> dict[str, Any]:
    """Poll get_job until the job is in one of ``statuses`` (generous deadline: the box is slow, shared)."""
    with anyio.fail_after(deadline_s):
        while True:
            info = (await call_ok(client, "get_job", {"job": job})).structured_content
            if info["status"] in statuses:
                return dict(info)
            await anyio.sleep(0.5)


async def run_to_end(client: Client, deadline_s: float = 180, **args: Any) -> tuple[str, dict[str, Any]]:
    sid = await submit(client, **args)
    return sid, await wait_until(client, sid, TERMINAL, deadline_s)


def text_of(result: Any) -> str:
    return str(result.content[0].text)
