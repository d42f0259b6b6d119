"""Helpers shared by the tests: call tools through the real MCP client, read answers, poll jobs with deadlines."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn
from mcp import Client
from mcp.types import CallToolResult

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

TERMINAL = {"SUCCEEDED", "FAILED", "STOPPED"}
# Every toolset a Ray cluster serves without Kubernetes or a Prometheus, listed whether or not Serve and Train
# run: what a test that goes through every tool of a plain cluster names (the default set lists fewer).
RAY_TOOLSETS = "core,jobs,tasks,serve,train,profiling"


@asynccontextmanager
async def mcp_client(settings: Settings, **injected: Any) -> AsyncIterator[Client]:
    """The real in-memory MCP client of a server built from ``settings`` (``injected``: build_server's fault
    injection, such as ``http_transport``); the server's cluster connections are closed after use."""
    server = build_server(settings, **injected)
    try:
        async with Client(server) as client:
            yield client
    finally:
        await server.app.aclose()


def text_of(result: CallToolResult) -> str:
    """The text the model reads: every text block of a tool result."""
    return "\n".join(block.text for block in result.content if block.type == "text")


def whole_bytes(result: CallToolResult) -> int:
    """What a client receives: the text and the structured content (compact JSON)."""
    structured = json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
    return len(text_of(result).encode()) + len(structured.encode())


async def call_ok(client: Client, name: str, args: dict[str, Any] | None = None, **kw: Any) -> CallToolResult:
    """Call a tool and assert it succeeded (the failure shows the error text)."""
    result = await client.call_tool(name, args or {}, **kw)
    assert not result.is_error, text_of(result)
    return result


async def call(client: Client, name: str, /, **args: Any) -> CallToolResult:
    """``call_ok`` with the tool's arguments as keywords."""
    return await call_ok(client, name, args)


async def structured(client: Client, name: str, /, **args: Any) -> dict[str, Any]:
    """A successful call's structured content."""
    result = await call_ok(client, name, args)
    assert result.structured_content is not None
    return dict(result.structured_content)


async def submit(client: Client, **args: Any) -> str:
    result = await call_ok(client, "submit_job", args)
    assert result.structured_content is not None
    return str(result.structured_content["submission_id"])


async def wait_until(client: Client, job: str, statuses: set[str], deadline_s: float = 180) -> dict[str, Any]:
    """Poll get_job until the job is in one of ``statuses`` (generous deadline: the box is slow, shared)."""
    with anyio.fail_after(deadline_s):
        while True:
            info = (await call_ok(client, "get_job", {"job": job})).structured_content or {}
            if info["status"] in statuses:
                return dict(info)
            await anyio.sleep(0.5)


async def run_to_end(client: Client, deadline_s: float = 180, **args: Any) -> tuple[str, dict[str, Any]]:
    sid = await submit(client, **args)
    return sid, await wait_until(client, sid, TERMINAL, deadline_s)


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """Run an ASGI app (a stand-in server of the tests) on a free loopback port in a thread; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


@contextlib.contextmanager
def serve_ray_mcp_http(settings: Settings, **injected: Any) -> Iterator[str]:
    """ray-mcp's real HTTP stack (uvicorn, the bearer guard, the session shares, the SDK's streamable HTTP app)
    in a thread of this process, on a free loopback port, so that build_server's fault injection (a stand-in
    dashboard) still applies; yields the MCP endpoint's URL."""
    with serving_ray_mcp_http(settings, **injected) as (url, _server):
        yield url


@contextlib.contextmanager
def serving_ray_mcp_http(settings: Settings, **injected: Any) -> Iterator[tuple[str, Any]]:
    """serve_ray_mcp_http, yielding the server too (to look at what it holds without sending it a request)."""
    import asyncio

    from ray_mcp.server.transport import http_config

    server = build_server(settings, **injected)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    http = uvicorn.Server(http_config(server, settings, sock))

    async def serve() -> None:
        try:
            await http.serve(sockets=[sock])
        finally:
            await server.app.aclose()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not http.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert http.started, "ray-mcp's HTTP server did not start"
    try:
        yield f"http://127.0.0.1:{port}/mcp", server
    finally:
        http.should_exit = True
        thread.join(30)
        sock.close()
