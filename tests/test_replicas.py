"""Two ray-mcp processes behind a round-robin load balancer on loopback serve one 2026-07-28 client through a
job's life: submit, get, wait as a task (its polls reach both replicas), tail, diagnose."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from mcp import Client
from tests.support import call, submit, text_of
from tests.tasks_client import TasksClient, call_as_task, poll_to_end
from tests.test_transports import free_port, http_server

pytestmark = pytest.mark.live
HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


class RoundRobin:
    """An ASGI reverse proxy that sends each HTTP request to the next backend in turn (no affinity at all)."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self.served = [0] * len(backends)
        self.turn = 0
        self.http = httpx.AsyncClient(timeout=None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.http.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        index = self.turn % len(self.backends)
        self.turn += 1
        self.served[index] += 1
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        url = self.backends[index] + scope["path"] + (f"?{query}" if query else "")
        headers = [
            (k.decode(), v.decode()) for k, v in scope["headers"] if k.decode().lower() not in HOP_BY_HOP
        ]
        request = self.http.build_request(scope["method"], url, headers=headers, content=body)
        response = await self.http.send(request, stream=True)
        try:
            kept = [
                (k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in HOP_BY_HOP
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


@asynccontextmanager
async def load_balancer(backends: list[str]) -> AsyncIterator[tuple[str, RoundRobin]]:
    proxy = RoundRobin(backends)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(proxy, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", proxy
    finally:
        server.should_exit = True
        await serving


async def test_two_replicas_serve_a_2026_client_through_a_jobs_life(ray_cluster, tmp_path: Path) -> None:
    key = tmp_path / "replica.key"
    key.write_bytes(os.urandom(48).hex().encode())
    args = [
        "--transport",
        "streamable-http",
        "--address",
        ray_cluster.dashboard_url,
        "--replica-key-file",
        str(key),
    ]
    with ExitStack() as stack:
        ports = [stack.enter_context(http_server(args, tmp_path / f"replica-{i}.log")) for i in range(2)]
        async with load_balancer([f"http://127.0.0.1:{p}" for p in ports]) as (url, proxy):
            async with Client(f"{url}/mcp", mode="2026-07-28", extensions=[TasksClient()]) as client:
                script = "import time; print('replica-job', flush=True); time.sleep(6); print('replica-end', flush=True)"
                sid = await submit(client, entrypoint=f'python -c "{script}"')
                assert (await call(client, "get_job", job=sid)).structured_content
                handle = await call_as_task(client.session, "wait_for_job", {"job": sid, "timeout_s": 300})
                state = await poll_to_end(client.session, handle.task_id)
                assert state.status == "completed" and state.result, state
                assert state.result["structuredContent"]["job"]["status"] == "SUCCEEDED"
                assert "replica-end" in text_of(await call(client, "tail_logs", job=sid))
                diagnosis = await call(client, "diagnose_job", job=sid)
                assert sid in text_of(diagnosis)
            assert min(proxy.served) >= 3, proxy.served  # both replicas answered several requests
    for i in range(2):
        assert "2026-07-28 clients: any replica" in (tmp_path / f"replica-{i}.log").read_text()
