"""Shared pieces of the suite: timing, result rows, the table, and the MCP sessions under test."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN = Path(sys.executable).parent
RAY = str(BIN / "ray")
RAY_MCP = str(BIN / "ray-mcp")
WARMUP = True  # one unmeasured run of each subject first; the smoke mode skips it (it checks, not measures)
QUIET = True  # the scale levels wait for a quiet machine (settle_load); the smoke mode does not


@dataclass
class Target:
    """The cluster under test."""

    dashboard_url: str
    gcs_address: str
    logs_dir: Path | None  # the head's log dir, when it is on this machine
    embedded: bool


@dataclass
class Row:
    """One line of the table. ``ours`` and ``base`` are already formatted; ``ratio`` is ours / base."""

    section: str
    what: str
    ours: str
    base: str = ""
    ratio: str = ""
    goal: str = ""
    met: bool | None = None


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    scale: list[dict[str, Any]] = field(default_factory=list)  # points for the plot
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        mark = {True: "OK", False: "MISSED", None: ""}[row.met]
        print(f"  [{row.section}] {row.what}: {row.ours} vs {row.base} {row.ratio} {mark}", flush=True)


def clean_env() -> dict[str, str]:
    """The environment of every spawned server and CLI: no inherited Ray or ray-mcp settings."""
    drop = ("RAY_MCP_", "RAY_ADDRESS", "RAY_API_SERVER")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def size(n: float) -> str:
    if n >= 1024**2:
        return f"{n / 1024**2:,.1f} MB"
    return f"{n / 1024:,.1f} KB" if n >= 1024 else f"{int(n)} B"


async def clock(fn: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = await fn()
    return time.perf_counter() - start, out


async def interleaved(
    subjects: dict[str, Callable[[], Awaitable[Any]]], reps: int
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Time each subject ``reps`` times, round-robin (rotating the order each round), after one warm-up each.

    Returns the times per subject and the last output of each (reps must be >= 1 without the warm-up).
    """
    names = list(subjects)
    times: dict[str, list[float]] = {n: [] for n in names}
    last: dict[str, Any] = {}
    for name in names if WARMUP else ():
        last[name] = await subjects[name]()
    for rep in range(reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            elapsed, last[name] = await clock(subjects[name])
            times[name].append(elapsed)
    return times, last


# -- a quiet machine: the scale levels are measured once the load their own population made has passed --------

QUIET_LOAD = float(os.cpu_count() or 1)  # a 1-minute load average at or below this counts as quiet
QUIET_WINDOW_S = 30.0  # ... or one that fell less than QUIET_FALL over this long (the rest is not ours)
QUIET_FALL = 0.05
QUIET_POLL_S = 5.0
QUIET_WAIT_S = 420.0  # the longest a level waits (from 54, the 1-minute average needs about 3 min to reach 2)


def load1() -> float:
    return os.getloadavg()[0]


async def settle_load(what: str) -> float:
    """Wait until the 1-minute load average is at most QUIET_LOAD, or no longer falling (other work on a shared
    machine), under QUIET_WAIT_S; return the load then. Polled: the wait ends as soon as the machine is quiet."""
    started = time.monotonic()
    seen: list[tuple[float, float]] = [(started, load1())]
    with anyio.move_on_after(QUIET_WAIT_S if QUIET else 0):
        while seen[-1][1] > QUIET_LOAD:
            await anyio.sleep(QUIET_POLL_S)
            now = time.monotonic()
            seen.append((now, load1()))
            past = [load for at, load in seen if at <= now - QUIET_WINDOW_S]
            if past and seen[-1][1] >= past[-1] * (1 - QUIET_FALL):
                break
    load = load1()
    print(
        f"  {what}: load {seen[0][1]:.1f} -> {load:.1f} after {time.monotonic() - started:.0f} s of waiting",
        flush=True,
    )
    return load


# -- what a tool call or a CLI run costs in context -----------------------------------------------------------


def text_bytes(result: Any) -> int:
    """Bytes of the text content of a tool result: what the model reads."""
    return sum(len(c.text.encode()) for c in result.content if getattr(c, "type", "") == "text")


def result_bytes(result: Any) -> int:
    """Bytes of the whole result as sent on the wire (text and structured content)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def run_cli(args: list[str]) -> bytes:
    """Run the ``ray`` CLI and return its stdout (what an agent in a shell would read)."""
    out = await anyio.run_process([RAY, *args], env=clean_env(), check=False)
    if out.returncode != 0:
        raise RuntimeError(f"ray {' '.join(args)} failed ({out.returncode}): {out.stderr.decode()[-500:]}")
    return bytes(out.stdout)


async def call(client: Client, tool: str, args: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, args)
    if result.is_error:
        raise RuntimeError(f"{tool}({args}) failed: {result.content}")
    return result


# -- the servers under test ----------------------------------------------------------------------------------


@asynccontextmanager
async def stdio_session(
    address: str | None, errlog_path: Path, *, proxy: bool = False, command: str = RAY_MCP
) -> AsyncIterator[Client]:
    """ray-mcp over stdio on ``address``; None: the bare MCPServer of bench/bare_server.py. ``proxy``: the
    minimal MCP proxy of bench/proxy_server.py in front of the dashboard at ``address``. ``command``: another
    build's ``ray-mcp`` (--baseline-server)."""
    if proxy:
        script = str(Path(__file__).with_name("proxy_server.py"))
        params = StdioServerParameters(command=sys.executable, args=[script, str(address)], env=clean_env())
    elif address is None:
        bare = str(Path(__file__).with_name("bare_server.py"))
        params = StdioServerParameters(command=sys.executable, args=[bare], env=clean_env())
    else:
        params = StdioServerParameters(command=command, args=serve_args(address), env=clean_env())
    with open(errlog_path, "a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


def serve_args(address: str, *transport: str) -> list[str]:
    """ray-mcp's arguments for a bench server on ``address``: every toolset, because the bench calls tools
    (list_tasks, summarize_tasks) outside a plain cluster's default set."""
    return [*transport, "--address", address, "--toolsets", "all"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def http_session(address: str, log_path: Path) -> AsyncIterator[Client]:
    """ray-mcp over streamable HTTP, as its own process; one client session on it."""
    port = free_port()
    with open(log_path, "a") as out:
        proc = subprocess.Popen(
            [RAY_MCP, *serve_args(address, "--transport", "streamable-http", "--port", str(port))],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )
    try:
        with anyio.fail_after(60):
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"ray-mcp over HTTP exited: {log_path.read_text()[-2000:]}")
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await anyio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def ray_mcp_children(before: set[int]) -> list[int]:
    """Pids of ray-mcp processes spawned by this process since ``before`` was taken."""
    import psutil

    out = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in before:
            continue
        try:
            if any("ray-mcp" in part for part in child.cmdline()):
                out.append(child.pid)
        except psutil.Error:
            continue
    return out


def child_pids() -> set[int]:
    import psutil

    return {c.pid for c in psutil.Process().children(recursive=True)}


# -- the table -------------------------------------------------------------------------------------------------

HEADER = ("Section", "Measurement", "ray-mcp", "Baseline", "Ratio", "Goal", "Met")


def cells(row: Row) -> tuple[str, ...]:
    met = {True: "yes", False: "**no**", None: ""}[row.met]
    return (row.section, row.what, row.ours, row.base, row.ratio, row.goal, met)


def text_table(rows: list[Row]) -> str:
    table = [HEADER, *(tuple(c.replace("**", "") for c in cells(r)) for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |" for r in rows]
    return "\n".join(lines)
