"""With no address, ray-mcp starts its own Ray head, and on exit leaves no process of it behind.

The signal tests say ``--embedded always``, so that a Ray dashboard on 127.0.0.1:8265 (which "no address"
would use instead) cannot change what they test; only the first test needs that port free.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import clean_env
from tests.rules import lacking
from tests.test_transports import RAY_MCP, free_port, wait_for_port

from ray_mcp.local_head import OWNER_FILE, sweep_abandoned_temp_dirs
from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live


def no_local_cluster() -> None:
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 8265)) == 0:
            lacking(
                "a free port",
                "a Ray dashboard answers on 127.0.0.1:8265: ray-mcp would use it, not embed one",
            )


def processes_of(session_name: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if session_name in cmdline:
            found.append(f"{proc.info['pid']}: {cmdline[:200]}")
    return found


def wait_until_gone(session_name: str, timeout_s: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := processes_of(session_name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


async def test_no_address_starts_an_embedded_cluster_and_closing_stdin_stops_all_of_it(
    tmp_path: Path,
) -> None:
    no_local_cluster()
    # ray-mcp's own credentials in its environment: no process of the embedded cluster may inherit them
    ours = {
        "RAY_MCP_AUTH_TOKEN": "emb-bearer-51c0d2",
        "RAY_MCP_DASHBOARD_HEADERS": '{"X-Probe": "emb-hdr-a93e"}',
    }
    params = StdioServerParameters(command=RAY_MCP, args=["--num-cpus", "1"], env=clean_env(**ours))
    errlog_path = tmp_path / "stderr.log"
    with open(errlog_path, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            assert [t.name for t in (await client.list_tools()).tools]  # answered before the cluster is up
            with anyio.fail_after(180):
                result = await client.call_tool("cluster_status", {}, read_timeout_seconds=170)
            assert not result.is_error, result.content
            status = result.structured_content
            assert status["source"] == "embedded" and status["resources"]["CPU"]["total"] == 1
            session_name = status["session_name"]
            assert processes_of(session_name), "the embedded cluster's processes should be running"
            for line in processes_of(session_name):
                with contextlib.suppress(psutil.Error):
                    environ = psutil.Process(int(line.split(":")[0])).environ()
                    assert not [k for k in environ if k.startswith("RAY_MCP_")], line
                    values = "\n".join(environ.values())
                    assert "emb-bearer-51c0d2" not in values and "emb-hdr-a93e" not in values, line
    log = errlog_path.read_text()
    # The client kills the server ~2 s after closing stdin; what matters is that nothing of the cluster is left.
    assert "using the embedded Ray cluster" in log and "stopping the embedded Ray cluster" in log
    temp_dir = log.split("starting a local Ray head in ")[-1].split()[0]
    assert wait_until_gone(session_name) == []
    assert not Path(temp_dir).exists()


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=["sigterm", "sigint", "sigkill"]
)
async def test_a_signal_stops_the_http_server_and_its_embedded_cluster(tmp_path: Path, signum: int) -> None:
    """SIGTERM, SIGINT: ray-mcp shuts the cluster down itself. SIGKILL: the kernel's fate-sharing does it."""
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                RAY_MCP,
                "--transport",
                "streamable-http",
                "--port",
                str(port),
                "--embedded",
                "always",
                "--num-cpus",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )
    try:
        wait_for_port(port, proc, log)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            with anyio.fail_after(180):
                result = await client.call_tool("cluster_status", {}, read_timeout_seconds=170)
        assert not result.is_error, result.content
        session_name = result.structured_content["session_name"]
        proc.send_signal(signum)
        clean = signum in (signal.SIGTERM, signal.SIGINT)
        assert proc.wait(timeout=90) == (0 if clean else -signal.SIGKILL), log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_until_gone(session_name) == [], log.read_text()[-3000:]
    if signum != signal.SIGKILL:
        assert "embedded Ray cluster stopped" in log.read_text()


def rpc(proc: subprocess.Popen[str], message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def answer_to(proc: subprocess.Popen[str], request_id: int, timeout_s: float = 180) -> dict:
    """Read stdout lines (blocking, in this thread) until the answer to ``request_id``."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, "the server closed stdout"
        message = json.loads(line)
        if message.get("id") == request_id:
            return dict(message)
    raise AssertionError(f"no answer to request {request_id} within {timeout_s} s")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_on_stdio_ends_the_server_cleanly_and_stops_its_embedded_cluster(
    tmp_path: Path, signum: int
) -> None:
    """Ctrl-C (or a supervisor's SIGTERM) while a client still holds stdin open: exit 0, no traceback, and
    nothing of the cluster left. stdin is read by a thread no cancellation interrupts, so this needs care."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [RAY_MCP, "--embedded", "always", "--num-cpus", "1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=clean_env(),
        )
    try:
        rpc(
            proc,
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
        )
        assert "result" in answer_to(proc, 1)
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "cluster_status"}})
        status = answer_to(proc, 2)["result"]
        assert not status.get("isError"), status
        session_name = status["structuredContent"]["session_name"]
        proc.send_signal(signum)
        assert proc.wait(timeout=90) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_until_gone(session_name) == [], log.read_text()[-3000:]
    text = log.read_text()
    assert f"received {signal.Signals(signum).name}" in text and "embedded Ray cluster stopped" in text
    assert "Traceback" not in text, text[-3000:]


def freeze_first_dashboard(server: RayMCPServer, done: threading.Event) -> None:
    """SIGSTOP the first embedded head's dashboard as soon as it exists: a dashboard as slow to come up as
    on a machine at load 50, where Ray's and ray-mcp's start timeouts pass before it answers."""
    while not done.is_set():
        head = server.app.cluster.embedded
        for proc in psutil.process_iter(["pid", "cmdline"]) if head is not None else []:
            with contextlib.suppress(psutil.Error, TypeError):
                cmdline = " ".join(proc.info["cmdline"] or [])
                if "dashboard/dashboard.py" in cmdline and str(head.temp_dir) in cmdline:
                    os.kill(proc.info["pid"], signal.SIGSTOP)
                    return
        time.sleep(0.02)


async def test_a_dashboard_too_slow_to_start_is_quoted_with_the_setting_and_a_later_call_starts_it() -> None:
    # The dashboard is stopped, so the first start always waits out its whole timeout: a short one (Ray's own
    # dashboard wait keeps its 60 s floor, local_head.py). The next start gets twice as long (cluster.py).
    server = build_server(Settings(embedded="always", embedded_num_cpus=1, cluster_start_timeout_s=15))
    done = threading.Event()
    freezer = threading.Thread(target=freeze_first_dashboard, args=(server, done), daemon=True)
    freezer.start()
    try:
        async with Client(server) as client:
            with anyio.fail_after(120):
                first = await client.call_tool("cluster_status", {})
            text = first.content[0].text  # type: ignore[union-attr]
            assert first.is_error and "did not become ready within 15 s" in text, text
            assert "RAY_MCP_CLUSTER_START_TIMEOUT_S=30 (now 15)" in text, text
            assert server.app.cluster.embedded is None, "the failed head is stopped, not kept"
            again = await client.call_tool("cluster_status", {})
            assert again.is_error and "The next call after" in again.content[0].text  # type: ignore[union-attr]
            # Not a failure cached for the server's life: a later call starts the cluster (polls, with a deadline).
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline:
                result = await client.call_tool("cluster_status", {})
                if not result.is_error:
                    break
                await anyio.sleep(2)
            assert not result.is_error, result.content
            assert result.structured_content["source"] == "embedded"  # type: ignore[index]
    finally:
        done.set()
        await server.app.aclose()


def test_a_start_removes_the_temp_dirs_a_killed_ray_mcp_left_and_keeps_every_other(tmp_path: Path) -> None:
    """Before: a ray-mcp killed while its embedded head started (a client giving up under load) left its
    ray-mcp-* temp dir behind for good."""
    dead = subprocess.Popen(["true"])
    dead.wait()

    def made(name: str, owner: int | None) -> Path:
        path = tmp_path / name
        path.mkdir()
        if owner is not None:
            (path / OWNER_FILE).write_text(str(owner))
        return path

    abandoned = made("ray-mcp-abandoned", dead.pid)
    in_use = made("ray-mcp-in-use", dead.pid)
    live = made("ray-mcp-live", os.getppid())
    unowned = made("ray-mcp-unowned", None)  # not one ray-mcp made, or its owner file is not written yet
    user = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", str(in_use)]
    )  # stands in for a Ray process still using its dir
    try:
        assert sweep_abandoned_temp_dirs(str(tmp_path)) == [abandoned]
    finally:
        user.kill()
        user.wait()
    assert not abandoned.exists() and in_use.exists() and live.exists() and unowned.exists()
