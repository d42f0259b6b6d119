"""Credentials stay with their cluster: each cluster of a clusters file gets only its own entry's token and
headers; Ray's ~/.ray/auth_token goes only where Ray itself would send it (token auth mode).

Two recording proxies stand in front of the real session dashboard, one per cluster name, and record the
headers of every request that reaches them: from ray-mcp's own HTTP client and from Ray's JobSubmissionClient.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import clean_env
from tests.test_transports import RAY_MCP

from ray_mcp.settings import Settings


class Recorder:
    """A plain HTTP proxy to ``upstream`` that remembers each request's path and headers."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.url = ""

    def headers(self) -> list[dict[str, str]]:
        return [h for _p, h in self.seen]


@contextmanager
def recorder(upstream: str) -> Iterator[Recorder]:
    rec = Recorder(upstream)

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            rec.seen.append((self.path, headers))
            body = self.rfile.read(int(headers.get("content-length") or 0))
            keep = {k: v for k, v in headers.items() if k not in ("host", "content-length", "connection")}
            upstream = httpx.request(
                self.command, rec.upstream + self.path, headers=keep, content=body, timeout=60
            )
            payload = upstream.content
            self.send_response(upstream.status_code)
            for key, value in upstream.headers.items():
                if key.lower() not in (
                    "content-length",
                    "transfer-encoding",
                    "connection",
                    "content-encoding",
                ):
                    self.send_header(key, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_DELETE = _forward

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()


def test_a_clusters_file_entry_does_not_inherit_the_environments_credentials(tmp_path: Path) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[clusters.a]\naddress = "http://a:8265"\nauth_token = "token-of-a"\n\n[clusters.b]\naddress = "http://b:8265"\n'
    )
    settings = Settings(
        clusters_file=clusters, ray_auth_token="global-token", dashboard_headers={"X-Global": "g"}
    )
    per = settings.cluster_settings()
    assert per["a"].dashboard_request_headers() == {"Authorization": "Bearer token-of-a"}
    assert per["b"].dashboard_request_headers() == {}
    assert settings.dashboard_request_headers() == {"X-Global": "g", "Authorization": "Bearer global-token"}


async def test_each_cluster_gets_only_its_own_credentials_even_in_token_mode(
    ray_cluster: Any, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("home-file-token\n")
    with recorder(ray_cluster.dashboard_url) as a, recorder(ray_cluster.dashboard_url) as b:
        clusters = tmp_path / "clusters.toml"
        clusters.write_text(
            f'[clusters.a]\naddress = "{a.url}"\nauth_token = "token-of-a"\nheaders = {{ X-Team = "team-a" }}\n\n'
            f'[clusters.b]\naddress = "{b.url}"\n'
        )
        env = clean_env(
            HOME=str(home),
            RAY_AUTH_MODE="token",  # Ray's own clients would now send the process token everywhere
            RAY_AUTH_TOKEN="global-env-token",
            RAY_MCP_DASHBOARD_HEADERS=json.dumps({"X-Global": "global-header"}),
        )
        params = StdioServerParameters(command=RAY_MCP, args=["--clusters-file", str(clusters)], env=env)
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                with anyio.fail_after(120):
                    for name in ("a", "b"):
                        for tool in ("cluster_status", "list_jobs", "list_actors"):
                            result = await client.call_tool(tool, {"cluster": name})
                            assert not result.is_error, (name, tool, result.content[0].text)
    assert any(path.startswith("/api/jobs") for path, _h in a.seen + b.seen)  # Ray's Jobs client was recorded
    for headers in a.headers():
        assert headers.get("authorization") == "Bearer token-of-a" and headers.get("x-team") == "team-a", (
            headers
        )
        assert "x-global" not in headers
    assert b.seen
    for headers in b.headers():
        assert "authorization" not in headers and "x-team" not in headers and "x-global" not in headers, (
            headers
        )
    for secret in ("global-env-token", "home-file-token"):
        assert all(secret not in json.dumps(h) for h in a.headers() + b.headers())


def test_the_home_token_file_is_sent_only_where_ray_would_send_it(tmp_path: Path, monkeypatch: Any) -> None:
    """Ray 2.60: RAY_AUTH_MODE=token, or (mode unset) a local cluster `ray start` put in token mode."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-file-token\n")
    for var in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_MCP_RAY_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    bearer = {"Authorization": "Bearer home-file-token"}
    assert Settings().dashboard_request_headers() == {}  # a remote cluster, mode unset: Ray sends nothing
    assert Settings().dashboard_request_headers(local_cluster=True) == bearer  # embedded or found locally
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert Settings().dashboard_request_headers() == bearer
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert Settings().dashboard_request_headers(local_cluster=True) == {}


GRPC_PROBE = """
import json, sys
from concurrent import futures
import grpc
from ray_mcp.sources.gcs import open_channel

seen = []

def record(request, context):
    seen.append(dict(context.invocation_metadata()).get("authorization"))
    return b""

handler = grpc.method_handlers_generic_handler(
    "probe.Gcs", {"Call": grpc.unary_unary_rpc_method_handler(record)}
)
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
for auth in (None, "Bearer token-of-this-cluster", "ray-default"):
    channel = open_channel(f"127.0.0.1:{port}", auth)
    channel.unary_unary("/probe.Gcs/Call")(b"", timeout=30)
    channel.close()
server.stop(0)
print(json.dumps(seen))
"""


@pytest.mark.live
def test_grpc_calls_to_a_gcs_carry_that_clusters_token_and_never_the_process_token(tmp_path: Path) -> None:
    """kill_actor and the placement group table talk to the GCS over gRPC: in token mode Ray's own channel adds
    this process's token (shown by the last call); ray-mcp's channel sends only the cluster's own."""
    import subprocess
    import sys

    env = clean_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="process-wide-token", HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", GRPC_PROBE], capture_output=True, text=True, timeout=180, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == [None, "Bearer token-of-this-cluster", "Bearer process-wide-token"], seen
