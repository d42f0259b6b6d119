"""Load: concurrent tool calls over streamable HTTP, from several client sessions, against one ray-mcp process.

Starts ``ray-mcp --transport streamable-http`` (one process), opens ``--sessions`` MCP client sessions, and fires
``--calls`` read-only tool calls at once, spread round-robin over the sessions, for ``--rounds`` rounds.
Reports failures (is_error results, protocol errors, timeouts), latency percentiles, and the server's RSS
before, at its peak, and after each round (so that growth across rounds shows).

    python -m bench.load [--address http://127.0.0.1:8265] [--calls 200] [--sessions 4] [--rounds 3]

Without --address it starts a private one-CPU Ray head and stops exactly that head afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
from mcp import Client

from bench.common import RAY_MCP, free_port, serve_args

CALL_TIMEOUT_S = 120.0
# Read-only calls that all succeed on any cluster; together they touch the State API, the Jobs SDK,
# the autoscaler status and Serve.
MIX: list[tuple[str, dict[str, Any]]] = [
    ("cluster_status", {}),
    ("list_jobs", {"limit": 5}),
    ("list_actors", {"limit": 10}),
    ("list_nodes", {}),
    ("summarize_tasks", {}),
    ("pg_status", {"limit": 5}),
    ("serve_status", {}),
    ("list_tasks", {"limit": 10}),
]


@contextmanager
def ray_mcp_http(address: str, log: Path) -> Iterator[tuple[int, psutil.Process]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_MCP_", "RAY_ADDRESS"))}
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [RAY_MCP, *serve_args(address, "--transport", "streamable-http", "--port", str(port))],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray-mcp did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield port, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def rss_mb(proc: psutil.Process) -> float:
    return round(proc.memory_info().rss / 2**20, 1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def one_round(clients: list[Client], calls: int, proc: psutil.Process) -> dict[str, Any]:
    latencies: list[float] = []
    failures: list[str] = []
    peak = rss_mb(proc)
    before = peak
    done = anyio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb(proc))
            await anyio.sleep(0.05)

    async def call(i: int) -> None:
        name, args = MIX[i % len(MIX)]
        client = clients[i % len(clients)]
        started = time.perf_counter()
        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool(name, args)
            if result.is_error:
                failures.append(f"{name}: {result.content[0].text[:200]}")
        except Exception as exc:  # a protocol error or a timeout is a failure too
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
        latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        async with anyio.create_task_group() as calls_tg:
            for i in range(calls):
                calls_tg.start_soon(call, i)
        done.set()
    wall = time.perf_counter() - started
    return {
        "calls": calls,
        "failures": len(failures),
        "failure_examples": failures[:5],
        "wall_s": round(wall, 2),
        "calls_per_s": round(calls / wall, 1),
        "latency_ms": {
            "p50": round(percentile(latencies, 0.50) * 1000),
            "p90": round(percentile(latencies, 0.90) * 1000),
            "p99": round(percentile(latencies, 0.99) * 1000),
            "max": round(max(latencies) * 1000),
            "mean": round(statistics.fmean(latencies) * 1000),
        },
        "rss_mb": {"before": before, "peak": peak, "after": rss_mb(proc)},
    }


async def run_load(
    address: str, *, calls: int = 200, sessions: int = 4, rounds: int = 3, log: Path
) -> dict[str, Any]:
    with ray_mcp_http(address, log) as (port, proc):
        url = f"http://127.0.0.1:{port}/mcp"
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(Client(url)) for _ in range(sessions)]
            for client in clients:  # unmeasured: the first calls open the dashboard and GCS connections
                for name, args in MIX:
                    await client.call_tool(name, args)
            idle = rss_mb(proc)
            results = [await one_round(clients, calls, proc) for _ in range(rounds)]
        return {"sessions": sessions, "rss_mb_after_warmup": idle, "rounds": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="Dashboard URL; default: start a private one-CPU head.")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--log", type=Path, default=Path("/tmp/ray-mcp-load.log"))
    args = parser.parse_args()
    head = None
    address = args.address
    if address is None:
        from ray_mcp.local_head import LocalHead

        head = LocalHead(num_cpus=1)
        head.spawn()
        anyio.run(head.wait_ready, 180.0)
        address = head.dashboard_url
    try:
        report = anyio.run(
            lambda: run_load(
                address, calls=args.calls, sessions=args.sessions, rounds=args.rounds, log=args.log
            )
        )
    finally:
        if head is not None:
            head.stop()
    print(json.dumps(report, indent=2))
    failed = sum(r["failures"] for r in report["rounds"])
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
