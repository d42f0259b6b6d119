"""MCP task state: unguessable ids, owned by the caller that made them, and no state left that changes later calls.

ray-mcp's real HTTP stack serves (in this process, so that the dashboard can be a stand-in: an
httpx.MockTransport whose job runs until the test ends), and two real MCP clients call it from two peer
addresses (127.0.0.1 and 127.0.0.2, both loopback): two callers the server can tell apart without trusting
anything they send.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from tests.support import serve_ray_mcp_http
from tests.tasks_client import TasksClient, call_as_task, cancel_task, get_task

from ray_mcp.server.mcp_tasks import TaskSeal
from ray_mcp.settings import Settings

SID = "raysubmit_owned_wait_1"
JOB = {
    "type": "SUBMISSION",
    "job_id": "05000000",
    "submission_id": SID,
    "status": "RUNNING",
    "entrypoint": "python long.py",
    "start_time": 1796173200000,
}


def dashboard(request: httpx.Request) -> httpx.Response:
    """A dashboard with one job, running for as long as the test lasts."""
    if request.url.path in (f"/api/jobs/{SID}", "/api/jobs/05000000"):
        return httpx.Response(200, json=JOB)
    if request.url.path == "/api/jobs/":
        return httpx.Response(200, json=[JOB])
    return httpx.Response(404, text="not here")


@asynccontextmanager
async def caller(url: str, peer: str) -> AsyncIterator[Client]:
    """A real MCP client that declares the Tasks extension, connecting from ``peer``."""
    http = httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=peer), timeout=30)
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), extensions=[TasksClient()]) as client,
    ):
        yield client


async def refused_as_unknown(client: Client, task_id: str, *, cancel: bool = False) -> str:
    with pytest.raises(MCPError) as refused:
        if cancel:
            await cancel_task(client.session, task_id)
        else:
            await get_task(client.session, task_id)
    assert refused.value.error.code == INVALID_PARAMS, refused.value.error
    return refused.value.error.message.replace(task_id, "<id>")


@pytest.fixture
def url() -> AsyncIterator[str]:
    settings = Settings(address="http://127.0.0.1:9", transport="streamable-http", host="127.0.0.1")
    with serve_ray_mcp_http(settings, http_transport=httpx.MockTransport(dashboard), gcs_lookup=None) as url:
        yield url


async def test_a_wait_task_is_unguessable_owned_and_its_cancel_changes_no_other_wait(url: str) -> None:
    async with caller(url, "127.0.0.1") as owner, caller(url, "127.0.0.2") as other:
        first = await call_as_task(owner.session, "wait_for_job", {"job": SID})
        second = await call_as_task(owner.session, "wait_for_job", {"job": SID})
        assert first.task_id != second.task_id  # each wait its own id
        assert SID not in first.task_id and not re.fullmatch(r"job:[\w.-]+:[\w.-]+", first.task_id)
        assert (await get_task(owner.session, first.task_id)).status == "working"

        # another caller, the old guessable form, and a forged id: all answered as a task that does not exist
        unknown = await refused_as_unknown(other, "job:no-such-task.0")
        assert await refused_as_unknown(other, first.task_id) == unknown
        assert await refused_as_unknown(other, first.task_id, cancel=True) == unknown
        assert await refused_as_unknown(owner, f"job:default:{SID}") == unknown
        forged = first.task_id[:-1] + ("0" if first.task_id[-1] != "0" else "1")
        assert await refused_as_unknown(owner, forged) == unknown

        # the owner cancels one wait: that one is cancelled, the other and every later wait are not
        await cancel_task(owner.session, first.task_id)
        assert (await get_task(owner.session, first.task_id)).status == "cancelled"
        assert (await get_task(owner.session, second.task_id)).status == "working"
        later = await call_as_task(other.session, "wait_for_job", {"job": SID})
        assert (
            later.status == "working" and (await get_task(other.session, later.task_id)).status == "working"
        )


async def test_a_call_running_here_as_a_task_belongs_to_its_caller(url: str) -> None:
    async with caller(url, "127.0.0.1") as owner, caller(url, "127.0.0.2") as other:
        handle = await call_as_task(owner.session, "tail_logs", {"job": SID, "follow_s": 60})
        assert handle.task_id.startswith("call:")
        unknown = await refused_as_unknown(other, "call:no-such-task")
        assert await refused_as_unknown(other, handle.task_id) == unknown
        assert await refused_as_unknown(other, handle.task_id, cancel=True) == unknown
        assert (await get_task(owner.session, handle.task_id)).status in ("working", "completed", "failed")
        await cancel_task(owner.session, handle.task_id)


def test_a_sealed_job_task_opens_only_for_its_owner_and_under_its_key() -> None:
    key = b"replica-key-of-this-test"
    seal = TaskSeal(key)
    task_id = seal.seal("10.0.0.7/abc", "default", SID)
    assert seal.unseal("10.0.0.7/abc", task_id) == ("default", SID)
    assert TaskSeal(key).unseal("10.0.0.7/abc", task_id) == ("default", SID)  # another replica, same key
    assert seal.unseal("10.0.0.8/abc", task_id) is None  # another caller
    assert TaskSeal(b"another key").unseal("10.0.0.7/abc", task_id) is None
    assert TaskSeal().unseal("10.0.0.7/abc", task_id) is None  # a process's own key
    assert seal.seal("10.0.0.7/abc", "default", SID) != task_id  # a fresh nonce each time
