"""tail_logs grep on hostile input, over a real ray-mcp HTTP server and real job logs.

- A catastrophic regex, ``(a+)+$``, over lines of ``a``s ending in ``!``: Python's backtracking engine needs
  2^n steps per line and held the event loop for as long; RE2 is linear and the scan runs off the loop, so
  /healthz and another session's calls keep answering within a second.
- One 100 MB line with no newline: scanned once, in bounded memory (the server's peak RSS is measured from
  /proc), and the answer says the line was matched in pieces and shown cut.
"""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.support import call_ok, run_to_end, text_of
from tests.test_transports import http_server

from ray_mcp.models import LogTail

PY = sys.executable
# A probe during a grep may take this long, or SLOWER_THAN_QUIET times the slowest of the same probes measured
# just before it (side by side, so a loaded machine raises both): a grep on the event loop would hold a probe
# for the whole grep (seconds), and a hung one for ever.
RESPONSIVE_S = 1.0
SLOWER_THAN_QUIET = 5


def _python(script: str) -> str:
    return f'{PY} -c "{script.replace(chr(34), chr(92) + chr(34))}"'


@pytest.fixture(scope="module")
def http_port(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    log = tmp_path_factory.mktemp("grep-safety") / "server.log"
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    with http_server(args, log) as port:
        yield port, log


def _server_pid(port: int) -> int:
    import psutil

    for conn in psutil.net_connections("tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            return conn.pid
    raise AssertionError(f"no process listens on {port}")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


async def _latencies_while(busy: Any, port: int, other: Client) -> tuple[Any, list[float]]:
    """Run ``busy()``; meanwhile, every 0.2 s, time /healthz and a call of another session. Returns its result
    and the probes' latencies as shares of the bound measured side by side (below 1 is responsive)."""
    latencies: list[float] = []
    result: list[Any] = []
    async with httpx.AsyncClient(timeout=30) as http:

        async def probe_once() -> None:
            started = time.monotonic()
            assert (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
            latencies.append(time.monotonic() - started)
            started = time.monotonic()
            bad = await other.call_tool("get_job", {"job": "no/such/job"})  # answered by the server alone
            assert bad.is_error
            latencies.append(time.monotonic() - started)

        for _ in range(5):  # the same probes, just before the grep
            await probe_once()
        bound = max(RESPONSIVE_S, SLOWER_THAN_QUIET * max(latencies))
        latencies.clear()

        async def probe() -> None:
            while True:
                await probe_once()
                await anyio.sleep(0.2)

        async def run() -> None:
            result.append(await busy())
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(probe)
            tg.start_soon(run)
    return result[0], [latency / bound for latency in latencies]


async def test_a_catastrophic_grep_on_a_real_log_leaves_healthz_and_other_sessions_answering(
    http_port: tuple[int, Path],
) -> None:
    port, _log = http_port
    url = f"http://127.0.0.1:{port}/mcp"
    # 200,000 lines that make a backtracking engine try 2^40 ways each, and 3 lines that match.
    script = textwrap.dedent(
        """
        import sys
        w = sys.stdout.write
        for i in range(200000): w('a' * 40 + '!\\n')
        for i in range(3): w('a' * 5000 + '\\n')
        """
    )
    with anyio.fail_after(300):
        async with Client(url) as agent, Client(url) as other:
            sid, info = await run_to_end(agent, entrypoint=_python(script))
            assert info["status"] == "SUCCEEDED", info

            async def grep() -> Any:
                return await call_ok(agent, "tail_logs", {"job": sid, "grep": "(a+)+$", "lines": 10})

            result, latencies = await _latencies_while(grep, port, other)
    section = LogTail.model_validate(result.structured_content).sections[0]
    assert section.matches == 3 and section.scan_complete, text_of(result)
    assert section.scanned_lines is not None and section.scanned_lines >= 200_003
    assert latencies, "the probes never ran"
    assert max(latencies) < 1, sorted(latencies)[-5:]  # as a share of the side-by-side bound


async def test_grep_of_a_100_mb_line_without_newline_is_linear_and_bounded_in_memory(
    http_port: tuple[int, Path],
) -> None:
    port, _log = http_port
    url = f"http://127.0.0.1:{port}/mcp"
    script = textwrap.dedent(
        """
        import sys
        w = sys.stdout.write
        for i in range(50): w('x' * 1048576)
        w('nee' + 'dle-in-the-middle')  # spelled apart: the entrypoint itself may be logged
        for i in range(50): w('y' * 1048576)
        sys.stdout.flush()
        """
    )
    pid = _server_pid(port)
    with anyio.fail_after(600):
        async with Client(url) as agent, Client(url) as other:
            sid, info = await run_to_end(agent, entrypoint=_python(script))
            assert info["status"] == "SUCCEEDED", info
            await call_ok(agent, "tail_logs", {"job": sid, "grep": "nothing", "max_scan_mb": 1})  # warm up
            rss_before = _peak_rss_mb(pid)
            started = time.monotonic()

            async def grep() -> Any:
                return await call_ok(agent, "tail_logs", {"job": sid, "grep": "needle-in", "max_bytes": 4096})

            result, latencies = await _latencies_while(grep, port, other)
            elapsed = time.monotonic() - started
    rss_growth = _peak_rss_mb(pid) - rss_before
    section = LogTail.model_validate(result.structured_content).sections[0]
    text = text_of(result)
    print(f"100 MB newline-free grep: {elapsed:.1f} s, peak RSS growth {rss_growth:.0f} MB")  # for the notes
    assert section.matches == 1 and section.scan_complete and section.long_lines == 1, text
    assert section.scanned_bytes is not None and section.scanned_bytes >= 100 * 1048576
    assert "matched in 1 MiB pieces" in text and "shown cut" in text
    assert sum(len(line.encode()) for line in section.lines) <= 4096
    assert rss_growth < 64, f"peak RSS grew by {rss_growth:.0f} MB"
    # Linear: seconds here (the print above); a scan quadratic in the line would take hours, so the bound is loose.
    assert elapsed < 120, f"{elapsed:.1f} s"
    assert max(latencies) < 1, sorted(latencies)[-5:]  # as a share of the side-by-side bound
