"""tail_logs of a node that runs on this machine reads the file itself (sources/local_logs.py) and answers
exactly what the dashboard would; secrets are masked the same way; nothing outside the node's log directory
is read; a node that is not here is still read through the dashboard.

Each test compares two real servers on the session's cluster, one reading local files (the default) and one
with ``local_logs=False``; a recording transport under the HTTP client shows which way each read went.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from tests.conftest import Cluster
from tests.support import call_ok, mcp_client, run_to_end, text_of

from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings
from ray_mcp.sources.local_logs import LogDir

PY = sys.executable


class Recording(httpx.AsyncBaseTransport):
    """The real dashboard, with the path of every request kept; ``elsewhere`` reports every node at another
    host's address (a node that does not run on this machine)."""

    def __init__(self, *, elsewhere: bool = False) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.paths: list[str] = []
        self.elsewhere = elsewhere

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        response = await self.real.handle_async_request(request)
        if not (self.elsewhere and request.url.path.startswith("/nodes/")):
            return response
        body = json.loads(await response.aread())
        body["data"]["detail"]["raylet"]["nodeManagerAddress"] = "203.0.113.9"  # TEST-NET-3: never this host
        return httpx.Response(response.status_code, json=body, request=request)

    def file_reads(self) -> int:
        return sum(1 for p in self.paths if p == "/api/v0/logs/file")

    async def aclose(self) -> None:
        await self.real.aclose()


async def _job(client: Client, tmp_path: Path, script: str, env: dict[str, str] | None = None) -> str:
    (tmp_path / "main.py").write_text(script)
    runtime_env: dict[str, Any] = {"working_dir": str(tmp_path), "env_vars": env or {}}
    sid, info = await run_to_end(client, entrypoint=f"{PY} main.py", runtime_env=runtime_env)
    assert info["status"] == "SUCCEEDED", info
    return sid


LINES = "import sys\nfor i in range(3000):\n    print(f'line {i} ' + 'y' * (i % 97))\nsys.stdout.write('no newline at the end')\n"


async def _tail(client: Client, **args: Any) -> dict[str, Any]:
    result = await call_ok(client, "tail_logs", args)
    return {"structured": result.structured_content, "text": text_of(result)}


async def _logs_dir(server: RayMCPServer, node_id: str) -> LogDir:
    api = await server.app.api()
    where = await api.logs.local_logs_dir(node_id)
    assert where is not None, "the session's head runs on this machine: its logs dir must be found"
    return where


async def test_a_local_tail_answers_exactly_what_the_dashboard_answers(
    client: Client, ray_cluster: Cluster, tmp_path: Path
) -> None:
    sid = await _job(client, tmp_path, LINES)
    local_http, remote_http = Recording(), Recording()
    server = build_server(Settings(address=ray_cluster.dashboard_url), http_transport=local_http)
    try:
        async with (
            Client(server) as local,
            mcp_client(
                Settings(address=ray_cluster.dashboard_url, local_logs=False), http_transport=remote_http
            ) as remote,
        ):
            cases = [{"lines": n, "max_bytes": b} for n in (1, 2, 100, 2000) for b in (256, 3500, 1_048_576)]
            for args in cases:
                assert await _tail(local, job=sid, **args) == await _tail(remote, job=sid, **args), args
            node_id = (await _tail(local, job=sid))["structured"]["sections"][0]["node_id"]
            # a node file of our own (a live log would change between the two reads), in a subdirectory too
            where = await _logs_dir(server, node_id)
            name = f"ray-mcp-test-{uuid.uuid4().hex}.log"
            (where.real / name).write_text("".join(f"entry {i}\n" for i in range(500)) + "partial")
            try:
                for args in (
                    {"filename": name, "lines": 10},
                    {"filename": str(where.reported / name), "lines": 600},
                ):
                    assert await _tail(local, node=node_id, **args) == await _tail(
                        remote, node=node_id, **args
                    )
            finally:
                (where.real / name).unlink()
    finally:
        await server.app.aclose()
    assert local_http.file_reads() == 0, local_http.paths
    assert remote_http.file_reads() == len(cases) + 2


SECRET_JOB = (
    "import os\nprint('the key is', os.environ['TRAINING_API_SECRET'])\n"
    "print('db password=hunter2-very-secret')\nprint('Authorization: Bearer abcdef0123456789abcdef')\n"
)


async def test_a_local_tail_masks_secrets_like_the_dashboard_path(
    client: Client, ray_cluster: Cluster, tmp_path: Path
) -> None:
    value = f"s3cr3t-{uuid.uuid4().hex[:12]}"
    sid = await _job(client, tmp_path, SECRET_JOB, {"TRAINING_API_SECRET": value})
    local_http = Recording()
    async with (
        mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=local_http) as local,
        mcp_client(Settings(address=ray_cluster.dashboard_url, local_logs=False)) as remote,
    ):
        here, there = await _tail(local, job=sid), await _tail(remote, job=sid)
    assert local_http.file_reads() == 0
    assert here == there
    answer = json.dumps(here)
    assert "the key is" in answer and "db password" in answer
    for secret in (value, "hunter2-very-secret", "abcdef0123456789abcdef"):
        assert secret not in answer


async def test_names_and_links_that_lead_out_of_the_logs_dir_are_refused_and_never_read(
    client: Client, ray_cluster: Cluster, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-THE-LOG-DIR\n")
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    try:
        async with Client(server) as local:
            node_id = (await call_ok(local, "cluster_status", {})).structured_content["nodes"][0]["node_id"]  # type: ignore[index]
            where = await _logs_dir(server, node_id)
            link = where.real / f"ray-mcp-test-link-{uuid.uuid4().hex}.log"
            link.symlink_to(outside)
            try:
                for name in (link.name, "../../../../etc/passwd", str(outside), "/etc/passwd"):
                    result = await local.call_tool("tail_logs", {"node": node_id, "filename": name})
                    assert result.is_error, (name, text_of(result))
                    assert "OUTSIDE-THE-LOG-DIR" not in text_of(result) and "root:" not in text_of(result)
                    assert "log directory" in text_of(result), text_of(result)
            finally:
                link.unlink()
    finally:
        await server.app.aclose()


async def test_a_node_that_does_not_run_here_is_read_through_the_dashboard(
    client: Client, ray_cluster: Cluster, tmp_path: Path
) -> None:
    sid = await _job(client, tmp_path, LINES)
    elsewhere = Recording(elsewhere=True)
    async with (
        mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=elsewhere) as far,
        mcp_client(Settings(address=ray_cluster.dashboard_url, local_logs=False)) as remote,
    ):
        for lines in (5, 100):
            assert await _tail(far, job=sid, lines=lines) == await _tail(remote, job=sid, lines=lines)
    assert elsewhere.file_reads() == 2
    assert sum(1 for p in elsewhere.paths if p.startswith("/nodes/")) == 1  # asked once per node


async def test_a_file_missing_on_a_node_here_is_not_found_without_asking_the_dashboard(
    ray_cluster: Cluster,
) -> None:
    recording = Recording()
    async with mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=recording) as local:
        node_id = (await call_ok(local, "cluster_status", {})).structured_content["nodes"][0]["node_id"]  # type: ignore[index]
        for name in ("nosuch.log", "old/nosuch.log"):
            result = await local.call_tool("tail_logs", {"node": node_id, "filename": name})
            assert result.is_error, text_of(result)
            assert "nosuch.log" in text_of(result) and "raylet.out" in text_of(result), text_of(result)
    assert recording.file_reads() == 0, recording.paths
