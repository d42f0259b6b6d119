"""Transport and startup (issue 13): the default port, a port in use, bounded headers and sessions, answers to
every stdio request, one-line usage errors, case-insensitive choices, and a quick exit on a bad address."""

from __future__ import annotations

import json
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from tests.conftest import clean_env
from tests.test_transports import RAY_MCP, free_port, http_server, wait_for_port

from ray_mcp.server.choices import normalize_choices
from ray_mcp.settings import DEFAULT_PORT

pytestmark = pytest.mark.live

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
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# Every port a Ray component listens on by default (GCS, dashboard, Ray Client, Serve HTTP and gRPC, dashboard
# agent, object manager, KubeRay's metrics port, Prometheus and Grafana), and Ray's worker port range.
RAY_PORTS = {6379, 8265, 10001, 8000, 9000, 52365, 8076, 8080, 9090, 3000, 44217, 44227}
RAY_WORKER_PORTS = range(10002, 20000)


def test_the_default_http_port_is_none_of_rays() -> None:
    assert DEFAULT_PORT not in RAY_PORTS and DEFAULT_PORT not in RAY_WORKER_PORTS
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    assert f"http://127.0.0.1:{DEFAULT_PORT}/mcp" in readme
    assert re.search(rf"^PORT \?= {DEFAULT_PORT}$", makefile, re.MULTILINE)


def test_a_port_in_use_is_one_line_naming_the_port_and_the_fix_before_any_cluster_starts(tmp_path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # --embedded always: a cluster would start if the port were bound only after it.
        out = subprocess.run(
            [RAY_MCP, "--transport", "streamable-http", "--port", str(port), "--embedded", "always"],
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
            cwd=tmp_path,
        )
    assert out.returncode == 2  # as every setting that cannot be used
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert str(port) in lines[0] and "--port" in lines[0] and "make run PORT=" in lines[0]
    # A cluster started before the port was bound would have logged "starting an embedded one" (and more lines).
    assert "embedded" not in out.stderr


REFUSE = """
import sys
from ray_mcp import cli
try:
    cli.main(sys.argv[1:])
except SystemExit as exc:
    print(f"exit={exc.code} ray={'ray' in sys.modules} mcp={'mcp' in sys.modules}", file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args, says",
    [
        (["--host", "0.0.0.0"], "needs a bearer token"),
        (["--port", "{taken}"], "already in use"),
        (["--audit-log", "/nonexistent/dir/audit.log"], "cannot write the audit log"),
    ],
)
def test_settings_that_cannot_serve_are_refused_before_ray_or_the_sdk_is_imported(args, says) -> None:
    """Before: the host and port refusals came after the whole import (43-46 s under load), with exit 1."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        argv = [a.format(taken=taken.getsockname()[1]) for a in args]
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                REFUSE,
                "--transport",
                "streamable-http",
                "--address",
                "http://127.0.0.1:9",
                "--port",
                str(taken.getsockname()[1]),
                *argv,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
        )
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and says in lines[0], out.stderr
    assert lines[1] == "exit=2 ray=False mcp=False", out.stderr


async def test_connections_that_never_finish_their_headers_are_closed(tmp_path) -> None:
    args = [
        "--transport",
        "streamable-http",
        "--address",
        "http://127.0.0.1:9",
        "--http-header-timeout-s",
        "1",
    ]
    with http_server(args, tmp_path / "server.log") as port:
        socks = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # and never the rest
            socks.append(s)
        try:
            with anyio.fail_after(20):
                for s in socks:
                    s.settimeout(20)
                    assert await anyio.to_thread.run_sync(s.recv, 100) == b""  # closed by the server
            # Trickling bytes does not keep a connection open either.
            s = socket.create_connection(("127.0.0.1", port))
            socks.append(s)
            s.settimeout(0.3)
            # Poll under a deadline well past the 1 s header timeout: a server that let trickled bytes restart
            # the clock would keep the connection open however long we waited.
            started, closed = time.monotonic(), False
            while time.monotonic() - started < 30 and not closed:
                try:
                    s.sendall(b"X")
                    closed = s.recv(100) == b""
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
            assert closed
            # The server still answers complete requests.
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"http://127.0.0.1:{port}/healthz")).text == "ok"
        finally:
            for s in socks:
                s.close()


async def test_sessions_and_connections_are_capped(tmp_path) -> None:
    args = ["--transport", "streamable-http", "--address", "http://127.0.0.1:9", "--max-sessions", "2"]
    with http_server(args, tmp_path / "server.log") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        # Sessions are the 2025 handshake's (Claude Code, Cursor); 2026 clients are stateless, capped by connections.
        async with Client(url, mode="legacy") as one, Client(url, mode="legacy") as two:
            await one.list_tools()
            await two.list_tools()
            async with (
                httpx.AsyncClient() as http
            ):  # the same client at the cap: its longest-idle session goes
                third = await http.post(
                    url, json=INITIALIZE, headers={"Accept": "application/json, text/event-stream"}
                )
            assert third.status_code == 200 and third.headers.get("mcp-session-id"), third.text
            await two.list_tools()  # the other one stays
            with pytest.raises(Exception):  # noqa: B017 - the SDK reports the closed session its own way
                await one.list_tools()
        async with Client(url, mode="legacy") as again:  # closed sessions free their slots
            await again.list_tools()
    args = [
        "--transport",
        "streamable-http",
        "--address",
        "http://127.0.0.1:9",
        "--http-max-connections",
        "3",
    ]
    with http_server(args, tmp_path / "server2.log") as port:
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
        try:
            async with httpx.AsyncClient() as http:
                assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 503
        finally:
            for s in socks:
                s.close()


async def test_http_mode_writes_nothing_to_stdout_and_logs_requests_on_stderr(tmp_path) -> None:
    port = free_port()
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        proc = subprocess.Popen(
            [
                RAY_MCP,
                "--transport",
                "streamable-http",
                "--port",
                str(port),
                "--address",
                "http://127.0.0.1:9",
            ],
            stdout=out,
            stderr=err,
            env=clean_env(),
        )
    try:
        wait_for_port(port, proc, stderr)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await client.list_tools()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert stdout.read_text() == ""
    assert '"POST /mcp HTTP/1.1" 200' in stderr.read_text()
    # The line to paste for this very server (issue 27 item 3: the README's :8265 line reached no server).
    assert f"claude mcp add --transport http ray http://127.0.0.1:{port}/mcp\n" in stderr.read_text()


def _stdio(args: list[str], lines: list[str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [RAY_MCP, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    assert proc.stdin is not None
    for line in lines:
        proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc


def test_a_client_that_leaves_mid_call_costs_one_line_on_stderr_and_exit_status_0() -> None:
    """Before: a 40-line BrokenPipeError traceback and exit status 1."""
    with socket.socket() as silent:  # a "dashboard" that accepts and never answers: the call is in flight
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"http://127.0.0.1:{silent.getsockname()[1]}"
        proc = subprocess.Popen(
            [RAY_MCP, "--address", address, "--request-timeout-s", "3"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=clean_env(),
        )
        assert proc.stdin and proc.stdout and proc.stderr
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "list_jobs", "arguments": {}},
        }
        proc.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline()
        for message in (INITIALIZED, call):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        proc.stdout.close()  # gone before the answer (the dashboard times out in 3 s)
        time.sleep(6)
        proc.stdin.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err and "closed stdout mid-answer" in err, err


def test_every_stdio_request_with_an_id_gets_an_answer() -> None:
    malformed = [
        {"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": "cluster_status"},
        {"jsonrpc": "2.0", "id": "eleven", "method": "tools/list", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 12, "method": "resources/read", "params": 7},
        {"id": 13, "method": "ping"},  # no "jsonrpc"
        {"jsonrpc": "2.0", "id": 14, "method": 5},
        {"jsonrpc": "2.0", "id": 15, "method": "tools/call", "params": {"name": 123}},
        {"jsonrpc": "2.0", "id": 16.5, "method": "ping"},  # an id the protocol does not allow
    ]
    lines = [json.dumps(INITIALIZE), json.dumps(INITIALIZED), *map(json.dumps, malformed)]
    lines += ["[" + json.dumps({"jsonrpc": "2.0", "id": 17, "method": "ping"}) + "]"]
    lines += ["{not json", json.dumps({"jsonrpc": "2.0", "id": 18, "method": "ping"})]
    proc = _stdio(["--address", "http://127.0.0.1:9"], lines)
    assert proc.stdout is not None
    # A reader thread, not select() on the pipe: readline() buffers what it read past the line, so select()
    # would wait for more while the last answer sits in the buffer.
    lines_read: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines_read.put(line) for line in proc.stdout], daemon=True).start()
    answers: list[dict] = []
    deadline = time.monotonic() + 60
    while not answers or answers[-1].get("id") != 18:
        assert time.monotonic() < deadline, answers
        try:
            answers.append(json.loads(lines_read.get(timeout=1)))
        except queue.Empty:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.kill()
    proc.wait()
    by_id = {json.dumps(a.get("id")): a for a in answers}
    for request_id in (10, "eleven", 12, 13, 14, 15):
        answer = by_id[json.dumps(request_id)]
        assert answer["error"]["code"] in (-32600, -32602), answer
    assert "must be an object" in by_id["10"]["error"]["message"]
    assert by_id["14"]["error"]["code"] == -32600
    # The float id and the batch cannot be echoed: they are answered with id null, as JSON-RPC says.
    nulls = [a for a in answers if a.get("id") is None]
    assert len(nulls) == 2 and all(a["error"]["code"] == -32600 for a in nulls)
    assert by_id["18"]["result"] == {}  # and the server still serves


@pytest.mark.parametrize(
    ("args", "env", "names"),
    [
        (["--port", "99999"], {}, ["--port", "99999", "65535"]),
        (["--num-cpus", "0"], {}, ["--num-cpus", "0"]),
        ([], {"RAY_MCP_PORT": "abc"}, ["RAY_MCP_PORT", "abc"]),
        (["--port", "x"], {}, ["--port", "'x'"]),
        (["--transport", "websocket"], {}, ["--transport", "websocket"]),
        ([], {"RAY_MCP_REQUEST_TIMEOUT_S": "-1"}, ["RAY_MCP_REQUEST_TIMEOUT_S", "-1"]),
        ([], {"RAY_MCP_ALLOWED_ORIGINS": "[oops"}, ["allowed_origins"]),
    ],
)
def test_a_bad_flag_or_environment_value_is_one_line_and_exit_status_2(args, env, names) -> None:
    out = subprocess.run([RAY_MCP, *args], capture_output=True, text=True, timeout=60, env=clean_env(**env))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert all(n in lines[0] for n in names), lines[0]


def test_host_or_port_with_stdio_warns_that_they_are_ignored() -> None:
    proc = _stdio(["--host", "0.0.0.0", "--address", "http://127.0.0.1:9"], [])
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert re.search(r"warning: --host only apply to .*streamable-http.*ignored over stdio", stderr), stderr


def _exit_time_after_stdin_closes(address: str) -> tuple[float, str]:
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "cluster_status", "arguments": {}},
    }
    proc = _stdio(["--address", address], [json.dumps(INITIALIZE), json.dumps(INITIALIZED), json.dumps(call)])
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert answers[1]["result"]["isError"] is True
    started = time.monotonic()
    proc.stdin.close()
    proc.wait(timeout=120)
    elapsed = time.monotonic() - started
    return elapsed, proc.stderr.read()


def _exits_as_quickly_as_a_plain_server(address: str) -> str:
    """The exit time after stdin closes, for ``address`` and, side by side, for a dashboard URL nothing listens
    on (no Ray client is made for it): the exit must cost about the same. A Ray GCS client left waiting holds
    the exit for its connect timeout (many seconds); the interpreter's own exit, which a loaded machine slows
    down, is in both. Returns the stderr of ``address``'s server."""
    elapsed, stderr = _exit_time_after_stdin_closes(address)
    plain, _ = _exit_time_after_stdin_closes("http://127.0.0.1:9")
    # + 2 s (the bound this test had alone): both exits take hundredths of a second, where a ratio is noise.
    assert elapsed <= 3 * plain + 2.0, (elapsed, plain, stderr[-2000:])
    return stderr


@pytest.mark.parametrize("address", ["garbage", "127.0.0.1:1", "ray://no-such-host.invalid:10001"])
def test_a_bad_address_exits_quickly_when_stdin_closes_without_ray_warnings(address) -> None:
    stderr = _exits_as_quickly_as_a_plain_server(address)
    # Ray's C++ logging (glog: "[2026-...] [W...] file.cc:123") or gRPC warnings never reach stderr.
    assert not re.search(r"\.cc:\d+|\bgrpc\b|\[W\d{4}|RpcError", stderr), stderr[-2000:]


def test_a_listening_non_gcs_port_still_exits_quickly() -> None:
    """Something accepts TCP there, so Ray's GCS client is asked: it must not hold the exit."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        _exits_as_quickly_as_a_plain_server(f"127.0.0.1:{listener.getsockname()[1]}")


def test_normalize_choices_folds_case_through_unions_lists_and_refs() -> None:
    schema = {
        "$defs": {"Kind": {"enum": ["out", "err", "both"], "type": "string"}},
        "properties": {
            "state": {"anyOf": [{"enum": ["ALIVE", "DEAD"], "type": "string"}, {"type": "null"}]},
            "states": {
                "anyOf": [{"items": {"enum": ["FAILED", "RUNNING"]}, "type": "array"}, {"type": "null"}]
            },
            "stream": {"$ref": "#/$defs/Kind"},
            "name": {"type": "string"},
            "mixed": {"enum": ["Foo", "FOO"]},
        },
    }
    given = {
        "state": "dead",
        "states": ["failed", "Running", "x"],
        "stream": "ERR",
        "name": "dead",
        "mixed": "foo",
    }
    assert normalize_choices(given, schema) == {
        "state": "DEAD",
        "states": ["FAILED", "RUNNING", "x"],
        "stream": "err",
        "name": "dead",
        "mixed": "foo",
    }


async def test_every_tool_accepts_its_choices_in_any_case(client, ray_cluster) -> None:
    calls = {
        "list_actors": {"state": "dead"},
        "list_nodes": {"state": "Alive"},
        "list_jobs": {"status": ["failed", "succeeded"]},
        "pg_status": {"state": "created"},
        "list_tasks": {"state": "finished"},
    }
    for name, arguments in calls.items():  # list_tasks is not listed by default (toolset tasks) but answers
        result = await client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
    wrong = await client.call_tool("list_nodes", {"state": "sleeping"})
    assert wrong.is_error
