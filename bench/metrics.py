"""Benchmark: get_metrics (a named question, answered as summaries) vs the same range query sent raw over HTTP.

In one run, side by side (interleaved, median of --reps): for each question, the tool call through the in-memory
MCP client, and the raw HTTP range query of each of its panels' PromQL (what an agent without ray-mcp would send
to Prometheus, then read as JSON). Reported: the times and their ratio, and the bytes an agent reads (the whole
tool result vs the raw JSON answers), with their ratio.

    python -m bench.metrics               # starts a head (LocalHead) and a Prometheus beside it (1 s scrape)
    python -m bench.metrics --address http://127.0.0.1:8265 --prometheus http://127.0.0.1:9090
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime
from typing import Any

import anyio
import httpx
from mcp import Client

from bench.common import interleaved, result_bytes
from ray_mcp.local_head import LocalHead
from ray_mcp.local_prometheus import LocalPrometheus
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

QUESTIONS = ("node_cpu", "node_memory", "tasks", "worker_memory", "object_store")
LOAD = """
import ray, sys, time
ray.init(address=sys.argv[1])
@ray.remote
def tick(i):
    return bytearray(1_000_000) if i % 50 == 0 else i
end = time.time() + float(sys.argv[2])
while time.time() < end:
    ray.get([tick.remote(i) for i in range(40)])
    time.sleep(0.2)
"""


async def run(address: str, prometheus: str, reps: int, last: str) -> list[dict[str, Any]]:
    server = build_server(Settings(address=address, prometheus=prometheus))
    async with Client(server) as client, httpx.AsyncClient(base_url=prometheus, timeout=30) as http:
        rows = [await measure(client, http, question, reps, last) for question in QUESTIONS]
    await server.app.aclose()
    return rows


async def measure(
    client: Client, http: httpx.AsyncClient, question: str, reps: int, last: str
) -> dict[str, Any]:
    """One question: the tool call and the raw queries of its panels, over one fixed window, interleaved."""
    first = await client.call_tool("get_metrics", {"question": question, "last": last})
    assert not first.is_error, first.content
    answer = first.structured_content or {}
    window = answer["window"]
    span = {"start": _epoch(window["start"]), "end": _epoch(window["end"]), "step": window["step_s"]}
    exprs = [p["promql"] for p in answer["panels"]]
    arguments = {"question": question, "since": window["start"], "until": window["end"]}

    async def tool() -> Any:
        return await client.call_tool("get_metrics", arguments)

    async def raw() -> int:
        size = 0
        for expr in exprs:  # what an agent would send: each panel's query, read as JSON
            response = await http.get("/api/v1/query_range", params={"query": expr, **span})
            response.raise_for_status()
            json.loads(response.content)
            size += len(response.content)
        return size

    times, last_out = await interleaved({"tool": tool, "raw": raw}, reps)
    tool_s, raw_s = statistics.median(times["tool"]), statistics.median(times["raw"])
    return {
        "question": question,
        "series": answer.get("total"),
        "tool_ms": tool_s * 1000,
        "raw_ms": raw_s * 1000,
        "time_ratio": tool_s / raw_s,
        "tool_bytes": result_bytes(last_out["tool"]),
        "raw_bytes": last_out["raw"],
    }


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def report(rows: list[dict[str, Any]], reps: int, last: str) -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"get_metrics vs the raw range queries over HTTP, window last={last}, median of {reps} interleaved runs; "
        f"Python {platform.python_version()}, load average at the end {load}.",
        "",
        "| question | series | get_metrics | raw HTTP | time ratio | answer bytes | raw JSON bytes | size ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['question']} | {r['series']} | {r['tool_ms']:.1f} ms | {r['raw_ms']:.1f} ms | "
            f"{r['time_ratio']:.2f}x | {r['tool_bytes']:,} | {r['raw_bytes']:,} | "
            f"{r['tool_bytes'] / max(1, r['raw_bytes']):.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--address", help="Dashboard URL of a running cluster (default: start a LocalHead).")
    parser.add_argument("--prometheus", help="Its Prometheus (default: start one beside the LocalHead).")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--last", default="5m")
    parser.add_argument("--warm-s", type=float, default=150.0, help="Load time before measuring (own head).")
    args = parser.parse_args()
    head = prom = None
    address, prometheus = args.address, args.prometheus
    try:
        if address is None:
            head = LocalHead(num_cpus=2)
            head.spawn()
            anyio.run(head.wait_ready, 180.0)
            address = head.dashboard_url
            prom = LocalPrometheus(
                head.temp_dir / "session_latest", head.temp_dir / "prometheus", scrape_interval_s=1
            )
            anyio.run(prom.start, 60.0)
            prometheus = prom.url
            print(f"loading the head for {args.warm_s:g} s ...", flush=True)
            started = time.monotonic()
            anyio.run(_load, head.gcs_address, args.warm_s)
            print(f"loaded in {time.monotonic() - started:.0f} s", flush=True)
        assert prometheus, "--prometheus is needed with --address"
        rows = anyio.run(run, address, prometheus, args.reps, args.last)
        print(report(rows, args.reps, args.last))
    finally:
        if prom is not None:
            prom.stop()
        if head is not None:
            head.stop()


async def _load(gcs: str, seconds: float) -> None:
    await anyio.run_process([sys.executable, "-c", LOAD, gcs, str(seconds)], check=True)


if __name__ == "__main__":
    main()
