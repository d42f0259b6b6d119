"""Rows about what a session costs before and around the calls: tools/list bytes, whole results, first calls
in a fresh server, cluster_health at scale, and memory per streamable HTTP session."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.common import (
    RAY_MCP,
    Results,
    Row,
    Target,
    call,
    clean_env,
    clock,
    free_port,
    median,
    ms,
    result_bytes,
    size,
    stdio_session,
)

TOOLS_LIST_GOAL = 16 * 1024  # the default toolsets' tools/list (issue 36; tests/test_toolsets.py holds it)
RESULT_GOAL = 8 * 1024
FIRST_CALL_GOAL_S = 0.05


async def tools_list(res: Results, client: Client) -> None:
    listing = await client.list_tools()
    tools = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing.tools]
    total = len(json.dumps(tools, separators=(",", ":")).encode())
    outputs = sum(len(json.dumps(t.get("outputSchema", {}), separators=(",", ":"))) for t in tools)
    res.add(
        Row(
            "payload",
            f"tools/list of the default toolsets, compact JSON ({len(tools)} tools; output schemas {size(outputs)})",
            size(total),
            "",
            "",
            f"≤{size(TOOLS_LIST_GOAL)}",
            total <= TOOLS_LIST_GOAL,
        )
    )


def default_calls(job: str) -> list[tuple[str, dict[str, Any]]]:
    """Every read tool with its defaults (and the target it needs)."""
    return [
        ("cluster_status", {}),
        ("cluster_health", {}),
        ("diagnose_job", {"job": job}),
        ("get_job", {"job": job}),
        ("list_jobs", {}),
        ("tail_logs", {"job": job}),
        ("list_actors", {}),
        ("pg_status", {}),
        ("list_nodes", {}),
        ("list_tasks", {}),
        ("summarize_tasks", {}),
        ("serve_status", {}),
    ]


async def whole_results(res: Results, client: Client, job: str) -> None:
    sizes: dict[str, int] = {}
    for tool, args in default_calls(job):
        sizes[tool] = result_bytes(await call(client, tool, args))
    worst = max(sizes, key=lambda t: sizes[t])
    res.add(
        Row(
            "payload",
            f"whole result (text + structured content) at default limits, largest: {worst}",
            size(sizes[worst]),
            "",
            "",
            f"≤{size(RESULT_GOAL)}",
            sizes[worst] <= RESULT_GOAL,
        )
    )
    print("    " + ", ".join(f"{t} {size(n)}" for t, n in sizes.items()), flush=True)


async def first_calls(res: Results, target: Target, work: Path, job: str, runs: int, note: str = "") -> None:
    """A job, a log and a placement-group tool as the first call of a fresh server, right after tools/list,
    against the same call warm (three more calls in the same server)."""
    cases = [("get_job", {"job": job}), ("tail_logs", {"job": job, "lines": 100}), ("pg_status", {})]
    for tool, args in cases:
        first: list[float] = []
        warm: list[float] = []
        for _ in range(runs):
            async with stdio_session(target.dashboard_url, work / "first.log") as client:
                await client.list_tools()
                elapsed, _ = await clock(lambda: call(client, tool, args))  # noqa: B023 - awaited at once
                first.append(elapsed)
                for _ in range(3):
                    elapsed, _ = await clock(lambda: call(client, tool, args))  # noqa: B023
                    warm.append(elapsed)
        extra = median(first) - median(warm)
        res.add(
            Row(
                "first call",
                f"{tool} as a fresh server's first call, right after tools/list, over the same call warm"
                + (f" {note}" if note else ""),
                ms(median(first)),
                ms(median(warm)),
                f"+{ms(extra)} ({median(first) / median(warm):.2f}x)",
                f"≤+{ms(FIRST_CALL_GOAL_S)}",
                extra <= FIRST_CALL_GOAL_S,
            )
        )


async def health_at_scale(res: Results, client: Client, tasks: int, reps: int) -> None:
    """cluster_health against cluster_status, interleaved, on the cluster at its largest size."""
    times: dict[str, list[float]] = {"cluster_health": [], "cluster_status": []}
    for _ in range(max(1, reps)):
        for tool in times:
            elapsed, _ = await clock(lambda: call(client, tool, {}))  # noqa: B023
            times[tool].append(elapsed)
    health, status = median(times["cluster_health"]), median(times["cluster_status"])
    res.add(
        Row(
            "scale",
            f"cluster_health at {tasks:,} tasks vs cluster_status",
            ms(health),
            ms(status),
            f"{health / status:.2f}x",
            "≤0.5 s",
            health <= 0.5,
        )
    )


async def http_session_memory(res: Results, target: Target, work: Path, sessions: int) -> None:
    """RSS that one more open streamable HTTP session costs: the server's RSS with ``sessions`` client sessions
    open, then with twice as many, over ``sessions``. The first batch pays what the first calls make once (the
    clients of the cluster), the second does not."""
    import psutil

    port = free_port()
    with open(work / "sessions.log", "a") as out:
        proc = subprocess.Popen(
            [
                RAY_MCP,
                "--transport",
                "streamable-http",
                "--port",
                str(port),
                "--address",
                target.dashboard_url,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(),
        )
    url = f"http://127.0.0.1:{port}/mcp"
    clients: list[Client] = []
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    async with Client(url) as warmup:
                        await warmup.list_tools()
                        await call(warmup, "pg_status", {})  # opens the GCS channel
                    break
                except Exception:
                    await anyio.sleep(0.2)
        rss = []
        for _ in range(2):
            for _ in range(sessions):
                client = Client(url)
                await client.__aenter__()
                clients.append(client)
                await client.list_tools()
            rss.append(psutil.Process(proc.pid).memory_info().rss)
        before, after = rss
    finally:
        for client in reversed(clients):
            await client.__aexit__(None, None, None)
        proc.terminate()
        proc.wait(timeout=60)
    per = (after - before) / sessions
    label = f"server RSS per open streamable HTTP session (sessions {sessions + 1}-{2 * sessions} over 1-{sessions})"
    res.add(Row("memory", label, size(per)))
