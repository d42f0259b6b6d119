"""Write modes, the HTTP guard (token, Origin, Host), refusal to expose without a token, redaction."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.types import CallToolResult, TextContent
from starlette.requests import Request
from tests.conftest import clean_env
from tests.support import text_of
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.guard.http import transport_security
from ray_mcp.guard.modes import tool_allowed, tool_kind
from ray_mcp.guard.redaction import redact, redact_text
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, WRITE

TOKEN = "s3cret-token-for-tests"
INIT = {
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


def test_tools_are_classified_by_their_annotations() -> None:
    assert [tool_kind(a) for a in (READ_ONLY, WRITE, DESTRUCTIVE, None)] == [
        "read",
        "write",
        "destructive",
        "write",
    ]
    assert tool_allowed("write", read_only=True, allow_destructive=True)[0] is False
    assert tool_allowed("destructive", read_only=False, allow_destructive=False)[0] is False
    assert tool_allowed("destructive", read_only=False, allow_destructive=True)[0] is True
    assert tool_allowed("read", read_only=True, allow_destructive=False)[0] is True


def register_probes(server) -> None:
    def probe_write() -> str:
        """A write probe."""
        return "wrote"

    def probe_destroy() -> str:
        """A destructive probe."""
        return "destroyed"

    server.add_tool(probe_write, annotations=WRITE)
    server.add_tool(probe_destroy, annotations=DESTRUCTIVE)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {"cluster_status", "probe_write"}),
        ({"allow_destructive": True}, {"cluster_status", "probe_write", "probe_destroy"}),
        ({"read_only": True, "allow_destructive": True}, {"cluster_status"}),
    ],
)
async def test_modes_decide_which_tools_are_even_listed(settings: dict, expected: set[str]) -> None:
    server = build_server(Settings(address="http://127.0.0.1:9", **settings))
    register_probes(server)
    async with Client(server) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        assert {"cluster_status", "probe_write", "probe_destroy"} & listed == expected
        if "probe_destroy" not in listed:
            result = await client.call_tool("probe_destroy", {})
            assert result.is_error  # not callable either
    await server.app.aclose()


async def test_write_calls_are_audited_as_json_lines_without_secrets(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    server = build_server(Settings(address="http://127.0.0.1:9", audit_log=audit))

    def launch(entrypoint: str) -> CallToolResult:
        """A write probe that takes a target."""
        return CallToolResult(content=[TextContent(type="text", text=f"launched {entrypoint}")])

    server.add_tool(launch, annotations=WRITE)
    async with Client(server) as client:
        await client.call_tool("launch", {"entrypoint": "python train.py --api-key=abcdef123456"})
        await client.call_tool("cluster_status", {})  # reads are not audited
    import json

    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["started", "ok"]  # written before the call, then its outcome
    assert records[0]["call"] == records[1]["call"] and records[0]["arguments"] == records[1]["arguments"]
    record = records[1]
    assert record["tool"] == "launch" and record["kind"] == "write" and record["outcome"] == "ok"
    assert record["arguments"]["entrypoint"].startswith("python train.py --api-key=")
    assert "abcdef123456" not in json.dumps(record)
    assert record["caller"]["transport"] == "stdio" and record["caller"]["session"]
    assert record["cluster"]["name"] == "default"
    assert {"time", "duration_ms"} <= set(record)
    await server.app.aclose()


async def test_tool_results_are_redacted_before_they_leave_the_server() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"))

    def leak() -> dict:
        """Returns secrets, as a careless log line or runtime_env would."""
        return {
            "runtime_env": {"env_vars": {"HF_TOKEN": "hf_value_that_is_long_enough"}},
            "log": "PASSWORD=hunter22",
        }

    server.add_tool(leak, annotations=READ_ONLY)
    async with Client(server) as client:
        result = await client.call_tool("leak", {})
    text = str(result.content) + str(result.structured_content)
    assert "hf_value_that_is_long_enough" not in text and "hunter22" not in text and "***" in text
    await server.app.aclose()


def test_redaction_masks_secret_shapes_and_keeps_ordinary_words() -> None:
    line = "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwx; Authorization: Bearer abc.def.ghi12345; DB_PASSWORD: pw1"
    masked = redact_text(line)
    assert "hf_abc" not in masked and "abc.def" not in masked and "pw1" not in masked
    assert (
        redact_text("num_tokens=5 tokenizer=bert max_new_tokens: 100")
        == "num_tokens=5 tokenizer=bert max_new_tokens: 100"
    )
    data = redact(
        {"env_vars": {"LR": "0.0003"}, "message": "lr 0.0003 set", "aws_secret_access_key": "k", "n": 3}
    )
    assert data == {
        "env_vars": {"LR": "***"},
        "message": "lr *** set",
        "aws_secret_access_key": "***",
        "n": 3,
    }


@pytest.mark.live
def test_a_non_loopback_bind_without_a_token_is_refused() -> None:
    out = subprocess.run(
        [RAY_MCP, "--transport", "streamable-http", "--host", "0.0.0.0", "--address", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert out.returncode == 2  # as every setting that cannot be used
    assert "refusing to listen on 0.0.0.0" in out.stderr and "RAY_MCP_AUTH_TOKEN" in out.stderr


async def test_http_requires_the_bearer_token_and_rejects_foreign_origins(
    ray_cluster, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    args = [
        "--transport",
        "streamable-http",
        "--address",
        ray_cluster.dashboard_url,
        "--auth-token-file",
        str(token_file),
    ]
    with http_server(args, tmp_path / "server.log") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with httpx.AsyncClient(timeout=30) as http:
            assert (await http.post(url, json=INIT, headers=MCP_HEADERS)).status_code == 401
            wrong = {**MCP_HEADERS, "authorization": "Bearer wrong"}
            assert (await http.post(url, json=INIT, headers=wrong)).status_code == 401
            foreign = {**MCP_HEADERS, "authorization": f"Bearer {TOKEN}", "origin": "http://evil.example"}
            assert (await http.post(url, json=INIT, headers=foreign)).status_code == 403
            rebound = {**MCP_HEADERS, "authorization": f"Bearer {TOKEN}", "host": "evil.example"}
            assert (await http.post(url, json=INIT, headers=rebound)).status_code == 421
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        authed = httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        async with Client(streamable_http_client(url, http_client=authed)) as client:
            result = await client.call_tool("cluster_status", {})
            assert not result.is_error
    assert TOKEN not in (tmp_path / "server.log").read_text()


# (bind host, --allowed-origin values, Host header, Origin header, the answer: None passes, else the status)
HOST_AND_ORIGIN = [
    ("127.0.0.1", [], "127.0.0.1:8000", None, None),
    ("127.0.0.1", [], "localhost:8000", None, None),
    ("127.0.0.1", [], "[::1]:8000", None, None),
    ("127.0.0.1", [], "localhost", None, None),  # no port
    ("127.0.0.1", [], "127.0.0.1", None, None),
    ("127.0.0.1", [], "evil.example", None, 421),  # DNS rebinding
    ("127.0.0.1", [], "evil.example:8000", None, 421),
    ("127.0.0.1", [], "localhost.evil.example:80", None, 421),
    ("127.0.0.1", [], None, None, 421),  # no Host at all
    ("::1", [], "[::1]:8000", None, None),
    ("::1", [], "evil.example", None, 421),
    ("127.0.0.1", [], "localhost:8000", "http://localhost:5173", None),
    ("127.0.0.1", [], "localhost:8000", "http://127.0.0.1:9", None),
    ("127.0.0.1", [], "localhost:8000", "http://[::1]:8080", None),
    ("127.0.0.1", [], "localhost:8000", "http://localhost", None),
    ("127.0.0.1", [], "localhost:8000", "https://localhost:5173", 403),  # another scheme
    ("127.0.0.1", [], "localhost:8000", "http://localhost.evil.example", 403),
    ("127.0.0.1", [], "localhost:8000", "http://evil.example", 403),
    ("127.0.0.1", [], "localhost:8000", "null", 403),
    ("127.0.0.1", [], "evil.example", "http://evil.example", 421),  # Host first
    ("127.0.0.1", ["http://app.example:3000"], "localhost:8000", "http://app.example:3000", None),
    (
        "127.0.0.1",
        ["http://app.example:3000"],
        "localhost:8000",
        "http://app.example:3001",
        403,
    ),  # wrong port
    ("127.0.0.1", ["http://app.example:3000"], "localhost:8000", "http://app.example", 403),
    ("127.0.0.1", ["https://app.example:*"], "localhost:8000", "https://app.example:8443", None),
    ("127.0.0.1", ["https://app.example:*"], "localhost:8000", "https://app.example", None),
    # another bind needs the bearer token, which no browser page can send: Host and Origin are not checked
    ("0.0.0.0", [], "ray-mcp.default.svc:8000", None, None),
    ("0.0.0.0", ["https://app.example"], "10.0.0.5:8000", "http://evil.example", None),
]


@pytest.mark.parametrize(("bind", "allowed", "host", "origin", "answer"), HOST_AND_ORIGIN)
async def test_the_sdks_host_and_origin_check_answers_as_configured(
    bind: str, allowed: list[str], host: str | None, origin: str | None, answer: int | None
) -> None:
    headers = [(b"host", host.encode())] if host is not None else []
    headers += [(b"origin", origin.encode())] if origin is not None else []
    request = Request({"type": "http", "method": "GET", "path": "/mcp", "headers": headers})
    check = TransportSecurityMiddleware(transport_security(bind, allowed))
    response = await check.validate_request(request, is_post=False)
    assert (response.status_code if response is not None else None) == answer


class Recorder(httpx.AsyncBaseTransport):
    """Forwards to the real dashboard and keeps the headers it was sent (a real cluster can't show them)."""

    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.headers: list[httpx.Headers] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.headers.append(request.headers)
        return await self.real.handle_async_request(request)


async def test_ray_credentials_and_extra_headers_reach_the_dashboard(ray_cluster) -> None:
    recorder = Recorder()
    settings = Settings(
        address=ray_cluster.dashboard_url,
        ray_auth_token="ray-token-xyz",
        dashboard_headers={"X-Proxy-Auth": "p1"},
    )
    server = build_server(settings, http_transport=recorder)
    async with Client(server) as client:
        result = await client.call_tool("cluster_status", {})
    assert not result.is_error
    assert recorder.headers and all(h["authorization"] == "Bearer ray-token-xyz" for h in recorder.headers)
    assert all(h["x-proxy-auth"] == "p1" for h in recorder.headers)
    assert "ray-token-xyz" not in str(result.content)
    await server.app.aclose()


async def test_a_jobs_secret_env_var_never_appears_in_any_output(client: Client) -> None:
    from tests.support import call_ok, run_to_end

    secret = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
    sid, _ = await run_to_end(
        client,
        entrypoint="python -c \"import os; print('token is', os.environ['HF_TOKEN']); print('HF_TOKEN=' + os.environ['HF_TOKEN'])\"",
        runtime_env={"env_vars": {"HF_TOKEN": secret, "MODE": "fast-mode"}},
    )
    outputs = [
        await call_ok(client, "get_job", {"job": sid}),
        await call_ok(client, "list_jobs", {}),
        await call_ok(client, "tail_logs", {"job": sid}),
        await call_ok(client, "wait_for_job", {"job": sid, "timeout_s": 5}),
    ]
    for result in outputs:
        everything = str(result.content) + str(result.structured_content)
        assert secret not in everything and "fast-mode" not in everything
    job = outputs[0].structured_content
    assert job["runtime_env"]["env_vars"] == {"HF_TOKEN": "***", "MODE": "***"}
    assert "***" in text_of(outputs[2])  # the printed token line is masked, not dropped
