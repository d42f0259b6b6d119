"""Benchmark: the server's memory and /healthz latency while one client sends 100 calls carrying 3 MB of
arguments each (issue 26: a caller's arguments must not grow the server or stall other sessions).

Starts the real binary over streamable HTTP (``--address`` names the cluster; any address works, the calls
may fail: what is measured is the server taking the arguments in), makes one small call, reads the server's
RSS (idle), then sends the calls, each a read-only list_jobs with a stray argument of 75,000 env_vars-like
values and a 100 kB secret-named field, while /healthz is probed every 50 ms. Prints idle and final RSS,
their ratio, and the slowest probe.

    python -m bench.large_arguments --address http://127.0.0.1:8265 [--calls 100]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import secrets
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx
import psutil
from mcp import Client

from bench.common import RAY_MCP, clean_env, free_port


def stray_argument() -> dict[str, Any]:
    env = {f"JUNK_{i}": f"{i:08d}-" + secrets.token_hex(6) for i in range(75_000)}
    return {"env_vars": env, "password": "x" * 100_000}


def probe(port: int, stop: Any, slowest: Any) -> None:
    """GET /healthz every 50 ms until ``stop``; the slowest answer's seconds into ``slowest``."""
    with httpx.Client() as http:
        while not stop.is_set():
            started = time.monotonic()
            http.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
            slowest.value = max(slowest.value, time.monotonic() - started)
            time.sleep(0.05)


async def measure(address: str, calls: int) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen(
        [RAY_MCP, "--transport", "streamable-http", "--address", address, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=clean_env(),
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            await anyio.sleep(0.1)
        proc = psutil.Process(server.pid)
        stray = stray_argument()
        refused = 0
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await client.call_tool("list_jobs", {"limit": 1})
            idle = proc.memory_info().rss

            # The probe runs in a process of its own: in this one, the client's own encoding of each 3 MB call
            # would hold the GIL and be counted as the server's latency.
            stop = multiprocessing.Event()
            slowest = multiprocessing.Value("d", 0.0)
            prober = multiprocessing.Process(target=probe, args=(port, stop, slowest))
            prober.start()
            for _ in range(calls):
                try:
                    await client.call_tool("list_jobs", {"limit": 1, "junk": stray})
                except Exception:  # refused whole (413) by the request-size bound: what is measured
                    refused += 1
            stop.set()
            prober.join(timeout=30)
            after = proc.memory_info().rss
        return {
            "argument_mb": len(json.dumps(stray)) / 1e6,
            "idle_mib": idle / 2**20,
            "after_mib": after / 2**20,
            "ratio": after / idle,
            "slowest_healthz_s": slowest.value,
            "refused_calls": refused,
            "load": os.getloadavg()[0],
        }
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    figures = anyio.run(measure, args.address, args.calls)
    json.dump({k: round(v, 3) for k, v in figures.items()}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
