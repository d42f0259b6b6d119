"""The MCP Tasks extension: wait_for_job, tail_logs(follow_s) and cpu_profile as tasks for a 2026 client that
declares it, the blocking answer for every other client; real jobs on the session cluster, through the SDK's
in-memory client, stdio and streamable HTTP."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from tests.conftest import clean_env
from tests.support import call, submit, text_of, wait_until
from tests.tasks_client import TasksClient, call_as_task, cancel_task, get_task, poll_to_end
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.server.build import RayMCPServer

SLEEPER = "python -c \"import time; print('task-sleeper', flush=True); time.sleep(300)\""
SHORT = (
    "python -c \"import time; print('task-short', flush=True); time.sleep(4); print('task-end', flush=True)\""
)
REQUEST_TIMEOUT_S = 5.0  # the client's; the jobs below run longer


async def test_a_wait_outlives_the_request_timeout_survives_a_reconnect_and_is_cancelled(
    server: RayMCPServer,
) -> None:
    async with Client(server) as setup:
        sid = await submit(setup, entrypoint=SLEEPER)
        await wait_until(setup, sid, {"RUNNING"})
    async with Client(server, read_timeout_seconds=REQUEST_TIMEOUT_S) as blocking:  # no Tasks extension
        with pytest.raises(MCPError):  # the blocking wait outlasts the client's request timeout
            await blocking.call_tool("wait_for_job", {"job": sid, "timeout_s": 60})
    async with Client(server, extensions=[TasksClient()], read_timeout_seconds=REQUEST_TIMEOUT_S) as client:
        handle = await call_as_task(client.session, "wait_for_job", {"job": sid, "timeout_s": 600})
        assert handle.task_id.startswith("job:") and sid not in handle.task_id and handle.status == "working"
        await anyio.sleep(REQUEST_TIMEOUT_S + 1)
        state = await get_task(client.session, handle.task_id)
        assert state.status == "working" and "RUNNING" in (state.status_message or "")
    async with Client(server, extensions=[TasksClient()], read_timeout_seconds=REQUEST_TIMEOUT_S) as again:
        assert (await get_task(again.session, handle.task_id)).status == "working"  # after a reconnect
        await cancel_task(again.session, handle.task_id)
        state = await get_task(again.session, handle.task_id)
        assert state.status == "cancelled" and "stop_job" in (state.status_message or "")
    async with Client(server) as after:
        info = await call(after, "get_job", job=sid)
        assert info.structured_content and info.structured_content["status"] == "RUNNING"  # the job lives on
        await call(after, "stop_job", job=sid)
    await server.app.aclose()


async def test_a_finished_wait_task_holds_the_blocking_answer(server: RayMCPServer) -> None:
    async with Client(server, extensions=[TasksClient()]) as client:
        sid = await submit(client, entrypoint=SHORT)
        handle = await call_as_task(client.session, "wait_for_job", {"job": sid})
        state = await poll_to_end(client.session, handle.task_id)
        assert state.status == "completed" and state.result is not None
        assert state.result["structuredContent"]["finished"] is True
        assert state.result["structuredContent"]["job"]["status"] == "SUCCEEDED"
        # The SDK's own call_tool, with the extension's claim, polls the task to the same answer.
        again = await client.call_tool("wait_for_job", {"job": sid})
        assert again.structured_content and again.structured_content["finished"] is True
    await server.app.aclose()


async def test_a_followed_tail_runs_here_as_a_task(server: RayMCPServer) -> None:
    async with Client(server, extensions=[TasksClient()]) as client:
        sid = await submit(client, entrypoint=SHORT)
        await wait_until(client, sid, {"RUNNING", "SUCCEEDED"})
        handle = await call_as_task(client.session, "tail_logs", {"job": sid, "follow_s": 3})
        assert handle.task_id.startswith("call:") and handle.ttl_ms
        state = await poll_to_end(client.session, handle.task_id)
        assert state.status == "completed" and state.result is not None
        assert "task-short" in state.result["content"][0]["text"]
        with pytest.raises(MCPError) as unknown:
            await get_task(client.session, "call:not-a-task")
        assert unknown.value.error.code == INVALID_PARAMS and "Mcp-Name" in unknown.value.error.message
    await server.app.aclose()


async def test_clients_without_the_extension_keep_the_blocking_answer(server: RayMCPServer) -> None:
    for mode in ("legacy", "2026-07-28"):
        async with Client(server, mode=mode) as client:
            sid = await submit(client, entrypoint=SHORT)
            progress: list[float] = []
            on_progress = progress_into(progress)
            result = await client.call_tool(
                "wait_for_job", {"job": sid, "timeout_s": 120}, progress_callback=on_progress
            )
            assert not result.is_error and result.structured_content, text_of(result)
            assert result.structured_content["finished"] is True and progress
            if mode != "legacy":
                with pytest.raises(MCPError) as refused:
                    await get_task(client.session, f"job:default:{sid}")
                assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    await server.app.aclose()


def progress_into(seen: list[float]):  # type: ignore[no-untyped-def]
    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(done)

    return on_progress


@pytest.mark.live
async def test_a_task_over_stdio_and_a_reconnect_to_another_replica(ray_cluster, tmp_path: Path) -> None:
    """Over stdio, a wait is a task; over HTTP, a second server process that shares the replica key answers
    tasks/get for the first's, and one that does not answers it as a task that does not exist."""
    args = ["--address", ray_cluster.dashboard_url]
    params = StdioServerParameters(command=RAY_MCP, args=args, env=clean_env())
    with open(tmp_path / "stdio.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), extensions=[TasksClient()]) as client:
            sid = await submit(client, entrypoint=SLEEPER)
            handle = await call_as_task(client.session, "wait_for_job", {"job": sid})
            assert (await get_task(client.session, handle.task_id)).status == "working"
    key = tmp_path / "replica.key"
    key.write_bytes(b"k" * 48)
    http_args = ["--transport", "streamable-http", *args, "--replica-key-file", str(key)]
    with http_server(http_args, tmp_path / "http.log") as port:
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient()]) as client:
            handle = await call_as_task(client.session, "wait_for_job", {"job": sid})
    with http_server(http_args, tmp_path / "http2.log") as port:  # another replica, the same key
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient()]) as client:
            assert (await get_task(client.session, handle.task_id)).status == "working"
            await cancel_task(client.session, handle.task_id)
            assert (await get_task(client.session, handle.task_id)).status == "cancelled"
    with http_server(http_args[:-2], tmp_path / "http3.log") as port:  # no shared key: no such task
        async with Client(f"http://127.0.0.1:{port}/mcp", extensions=[TasksClient()]) as client:
            with pytest.raises(MCPError) as unknown:
                await get_task(client.session, handle.task_id)
            assert unknown.value.error.code == INVALID_PARAMS
            await call(client, "stop_job", job=sid)
