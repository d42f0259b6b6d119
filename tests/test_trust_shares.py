"""Issue 26, items 1 and 3, on the real binary against the session Ray head, over stdio and streamable HTTP.

1. Nothing a caller sends decides what is a secret: a stray argument full of junk values neither flushes a
   job's secret out of the registry nor makes ordinary words masked (memory and /healthz under 100 calls of
   3 MB arguments: bench/large_arguments.py).
3. Fair shares: bare ``initialize`` requests of one client never lock other clients out; a subscription to a job that does not exist is refused; 100 ``tail_logs follow_s`` calls of one
   client leave the dashboard connections other clients need.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from tests.conftest import clean_env
from tests.support import TERMINAL, call_ok, submit, text_of, wait_until
from tests.test_transports import RAY_MCP, free_port, wait_for_port

pytestmark = [pytest.mark.live, pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")]

SECRET = "tr26-" + secrets.token_hex(8)
PRINTS_SECRET = "python -c \"import os; print('API_TOKEN=' + os.environ['API_TOKEN'], flush=True)\""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@contextmanager
def http_server(args: list[str], log: Path, **env: str) -> Iterator[tuple[int, psutil.Process]]:
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [RAY_MCP, "--transport", "streamable-http", *args, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(**env),
        )
    try:
        wait_for_port(port, proc, log)
        yield port, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@asynccontextmanager
async def client_over(transport: str, ray_cluster: Any, tmp_path: Path, **env: str) -> AsyncIterator[Client]:
    args = ["--address", ray_cluster.dashboard_url]
    if transport == "stdio":
        params = StdioServerParameters(command=RAY_MCP, args=args, env=clean_env(**env))
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                yield client
    else:
        with http_server(args, tmp_path / "server.log", **env) as (port, _):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                yield client


def junk_env(count: int, width: int = 24) -> dict[str, str]:
    return {f"JUNK_{i}": f"{i:08d}-" + secrets.token_hex(width // 2) for i in range(count)}


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_a_stray_argument_neither_flushes_a_jobs_secret_nor_masks_ordinary_words(
    ray_cluster, tmp_path: Path, transport: str
) -> None:
    async with client_over(transport, ray_cluster, tmp_path) as client:
        job = await submit(client, entrypoint=PRINTS_SECRET, runtime_env={"env_vars": {"API_TOKEN": SECRET}})
        await wait_until(client, job, TERMINAL)
        status = (await call_ok(client, "cluster_status", {})).structured_content or {}
        head = next(n for n in status["nodes"] if n["is_head"])
        driver_log = {"node": head["node_id"], "filename": f"job-driver-{job}.log", "lines": 20}
        assert "API_TOKEN=***" in text_of(await call_ok(client, "tail_logs", driver_log))
        # one read-only call whose stray argument carries 5,000 values (and an ordinary word) as env_vars
        stray = {"env_vars": {**junk_env(5000), "WORD": "alive"}, "password": "nodes"}
        await client.call_tool("list_jobs", {"limit": 1, "junk": stray})
        shown = text_of(await call_ok(client, "tail_logs", driver_log))
        assert SECRET not in shown and "API_TOKEN=***" in shown
        assert "alive" in text_of(await call_ok(client, "cluster_status", {}))  # not masked as a "secret"


async def test_bare_initializes_of_one_client_leave_room_for_others(ray_cluster, tmp_path: Path) -> None:
    """On the real binary; the grace after which unused sessions close: tests/test_session_shares.py."""
    env = {"RAY_MCP_MAX_SESSIONS": "4", "RAY_MCP_MAX_SESSIONS_PER_CLIENT": "2"}
    with http_server(["--address", ray_cluster.dashboard_url], tmp_path / "server.log", **env) as (port, _):
        url = f"http://127.0.0.1:{port}/mcp"
        # the flooding client comes from another loopback address: another caller
        flood = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"))
        async with flood:
            opened = [await flood.post(url, json=INITIALIZE, headers=MCP_HEADERS) for _ in range(6)]
            assert [o.status_code for o in opened] == [200] * 6  # each in place of its own oldest
            sessions = [o.headers["mcp-session-id"] for o in opened]
            alive = [
                (await flood.get(url, headers={"mcp-session-id": s, "accept": "text/html"})).status_code
                != 404
                for s in sessions
            ]
            assert alive == [False, False, False, False, True, True], alive  # never more than its share
            async with Client(url) as other:  # another client still gets a session at once
                await call_ok(other, "cluster_status", {})
    assert "its client's longest idle" in (tmp_path / "server.log").read_text()


@pytest.mark.parametrize("transport", ["stdio", "streamable-http"])
async def test_a_subscription_to_a_job_that_does_not_exist_is_refused(
    ray_cluster, tmp_path: Path, transport: str
) -> None:
    async with client_over(transport, ray_cluster, tmp_path) as client:
        with pytest.raises(MCPError) as raised:
            await client.subscribe_resource("ray://jobs/raysubmit_nosuchjob26")
        assert "No job 'raysubmit_nosuchjob26'" in raised.value.error.message
        assert "list_jobs" in raised.value.error.message


async def test_one_clients_hundred_follows_leave_the_dashboard_to_other_clients(
    ray_cluster, tmp_path: Path
) -> None:
    env = {"RAY_MCP_HTTP_MAX_CONNECTIONS": "400", "RAY_MCP_REQUEST_TIMEOUT_S": "5"}
    with http_server(["--address", ray_cluster.dashboard_url], tmp_path / "server.log", **env) as (port, _):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as greedy, Client(url) as other:
            job = await submit(greedy, entrypoint="echo follow-me")
            await wait_until(greedy, job, TERMINAL)
            results: list[Any] = []

            async def follow() -> None:
                results.append(await greedy.call_tool("tail_logs", {"job": job, "follow_s": 15}))

            async with anyio.create_task_group() as tg:
                for _ in range(100):
                    tg.start_soon(follow)
                # The follows are under way once every one past the share has been refused (at once); the
                # ones that got a share hold it for their follow_s.
                with anyio.fail_after(60):
                    while len(results) < 96:
                        await anyio.sleep(0.1)
                for _ in range(3):  # the other client's calls all succeed meanwhile
                    await call_ok(other, "list_jobs", {"limit": 5})
                    await call_ok(other, "tail_logs", {"job": job, "lines": 5})
            refused = [r for r in results if r.is_error]
            assert len(refused) == 96 and all("share" in text_of(r) for r in refused), text_of(refused[0])
            assert sum(1 for r in results if not r.is_error) == 4


async def test_calls_with_megabytes_of_arguments_are_refused_unread_and_cost_the_server_nothing(
    tmp_path: Path,
) -> None:
    """100 calls of 3 MB arguments: each refused with 413 before it is parsed, the server's memory stays
    within 1.2x of idle, and /healthz (probed between the calls) stays fast; a normal call still works."""
    stray = {"env_vars": junk_env(75_000), "password": "x" * 100_000}
    with http_server(["--address", "http://127.0.0.1:9"], tmp_path / "server.log") as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as client:
            await client.list_tools()
            idle = proc.memory_info().rss
            body = httpx.Request(
                "POST",
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 7,
                    "method": "tools/call",
                    "params": {"name": "list_jobs", "arguments": {"limit": 1, "junk": stray}},
                },
            ).read()
            assert len(body) > 3_000_000
            slowest = 0.0
            async with httpx.AsyncClient(timeout=30) as http:
                opened = await http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
                session = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
                await http.post(
                    url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session
                )
                for _ in range(100):
                    refused = await http.post(url, content=body, headers=session)
                    assert refused.status_code == 413, refused.status_code
                    started = anyio.current_time()
                    assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
                    slowest = max(slowest, anyio.current_time() - started)
            assert proc.memory_info().rss <= 1.2 * idle, (proc.memory_info().rss, idle)
            assert slowest <= 0.5, slowest
            assert [t.name for t in (await client.list_tools()).tools]  # the session still serves
