"""The real server process over each transport: stdio, streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import BIN, clean_env

from ray_mcp.cli import bind_listener

RAY_MCP = str(BIN / "ray-mcp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def check_cluster_status(client: Client, dashboard_url: str) -> None:
    names = [t.name for t in (await client.list_tools()).tools]
    assert "cluster_status" in names
    result = await client.call_tool("cluster_status", {})
    assert not result.is_error, result.content
    assert result.structured_content["dashboard_url"] == dashboard_url


async def test_stdio_serves_cluster_status_and_logs_only_to_stderr(ray_cluster, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", ray_cluster.dashboard_url], env=clean_env()
    )
    with open(tmp_path / "stderr.log", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await check_cluster_status(client, ray_cluster.dashboard_url)
    assert "using the Ray cluster whose dashboard is" in (tmp_path / "stderr.log").read_text()


def test_stdio_stdout_carries_nothing_but_protocol_messages(ray_cluster) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "cluster_status", "arguments": {}},
        },
    ]
    proc = subprocess.Popen(
        [RAY_MCP, "--address", ray_cluster.dashboard_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
    )
    assert proc.stdin and proc.stdout
    for request in requests:
        proc.stdin.write((json.dumps(request) + "\n").encode())
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()  # the client goes away: the server must exit by itself
    proc.stdin = None
    rest, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert [a["id"] for a in answers] == [1, 2]
    assert "node(s) alive" in json.dumps(answers[1])
    for line in rest.decode().splitlines():
        json.loads(line)  # anything else on stdout would corrupt the protocol


@contextmanager
def http_server(args: list[str], log: Path, **env: str) -> Iterator[int]:
    port = free_port()
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [RAY_MCP, *args, "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, env=clean_env(**env)
        )
    try:
        wait_for_port(port, proc, log)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def wait_for_port(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 120) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"ray-mcp did not listen on {port}: {log.read_text()}")


async def test_streamable_http_serves_cluster_status(ray_cluster, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    with http_server(args, log) as port:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await check_cluster_status(client, ray_cluster.dashboard_url)
        async with Client(f"http://127.0.0.1:{port}/mcp") as second:  # a second session on the same server
            await check_cluster_status(second, ray_cluster.dashboard_url)
    assert f"streamable HTTP at http://127.0.0.1:{port}/mcp" in log.read_text()


async def test_sse_serves_cluster_status(ray_cluster, tmp_path: Path) -> None:
    args = ["--transport", "sse", "--address", ray_cluster.dashboard_url]
    with http_server(args, tmp_path / "server.log") as port:
        with anyio.fail_after(60):
            async with Client(sse_client(f"http://127.0.0.1:{port}/sse"), mode="legacy") as client:
                await check_cluster_status(client, ray_cluster.dashboard_url)


@pytest.mark.live
def test_python_dash_m_runs_the_same_cli() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ray_mcp", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--transport" in out.stdout and "RAY_ADDRESS" in out.stdout


async def test_http_connections_send_each_write_at_once_without_waiting_for_an_ack() -> None:
    """TCP_NODELAY on every accepted connection: with Nagle's algorithm on, a response written in two parts
    (headers, then the event) waited for the client's delayed ACK, 40 ms a call."""
    listener = bind_listener("127.0.0.1", 0)
    port = listener.getsockname()[1]
    nodelay: list[int] = []

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nodelay.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listener)  # as uvicorn serves the socket
    async with server:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        with anyio.fail_after(10):
            while not nodelay:
                await anyio.sleep(0.01)
        writer.close()
    assert nodelay[0] != 0
