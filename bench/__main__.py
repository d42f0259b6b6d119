"""The benchmark suite: ray-mcp against a bare server, the raw API, the CLI and the physical limits.

    python -m bench                               # full run on an embedded cluster (LocalHead); ~25 min
    python -m bench --smoke                       # small sizes, few repetitions: checks the suite still runs
    python -m bench --address http://host:8265 --gcs-address host:6379 [--logs-dir DIR]
    python -m bench --update-doc docs/benchmarks.md --plot docs/benchmarks.png

Every row is a median over repeated runs, with the subjects measured side by side (interleaved) in one
run, because this kind of machine is shared and noisy: compare the ratios, not the absolute times.
Rows: 1 ready, 2 call overhead (stdio and streamable HTTP vs a minimal MCP proxy and a raw GET), 3 the
CLI, 4 scale (cluster_health included), 5 logs (bench/logs.py), 6 memory (per call and per HTTP session),
7 payload (tools/list and whole results), 8 first calls in a fresh server. Goals are reported, never asserted;
the goals of issues 25 and 36 (ready, first call, warm call, list tools at scale) are summed up after the table.

    python -m bench --sections ready,overhead,first   # just those three goals, side by side in one run
    python -m bench --sections scale --baseline-server OTHER/.venv/bin/ray-mcp   # two builds side by side

The scale levels are measured once the load their own population made has passed (common.settle_load).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import anyio

from bench import common, payload, sections, startup
from bench import logs as logs_bench
from bench.common import (
    Results,
    Row,
    Target,
    child_pids,
    http_session,
    markdown_table,
    median,
    ms,
    ray_mcp_children,
    stdio_session,
    text_table,
)
from bench.population import PG_RESOURCE, Population


@dataclass(frozen=True)
class Plan:
    """Sizes and repetitions. Each list is the cluster size at each scale level."""

    actors: tuple[int, ...]
    tasks: tuple[int, ...]
    pgs: tuple[int, ...]
    jobs: tuple[int, ...]
    reps: int  # tool calls and raw GETs per measurement
    cli_reps: int  # CLI runs per measurement (each takes seconds)
    ready_runs: int
    memory_calls: tuple[int, int]
    http_sessions: int
    first_runs: int
    log_mb: int
    log_reps: int
    log_full_reps: int


FULL = Plan(
    actors=(10, 40, 100),
    tasks=(10, 1000, 11000),
    pgs=(10, 300, 1000),
    jobs=(10, 100, 300),
    reps=9,
    cli_reps=3,
    ready_runs=15,
    memory_calls=(10, 1000),
    http_sessions=50,
    first_runs=5,
    log_mb=500,
    log_reps=9,
    log_full_reps=3,
)
SMOKE = Plan(
    actors=(2, 4),
    tasks=(10, 40),
    pgs=(3, 10),
    jobs=(1, 3),
    reps=2,
    cli_reps=1,
    ready_runs=2,
    memory_calls=(10, 30),
    http_sessions=3,
    first_runs=1,
    log_mb=2,
    log_reps=2,
    log_full_reps=1,
)


BASELINE_SERVER = (
    ""  # --baseline-server: another build's ray-mcp, measured beside this one in the scale section
)
SECTIONS = ("ready", "overhead", "cli", "memory", "scale", "logs", "payload", "first")
PENDING_GROUPS = (
    3  # placement groups that can never fit, while the call overhead and first calls are measured
)
PENDING_NOTE = f"(cluster with {PENDING_GROUPS} pending placement groups)"


async def run(plan: Plan, target: Target, work: Path, res: Results, only: set[str]) -> None:
    if "ready" in only:
        await ready(plan, target, res)
    if only & {"overhead", "cli", "memory", "scale", "payload", "first"}:
        await populated(plan, target, work, res, only)
    if "logs" in only:
        await logs(plan, target, res)


async def ready(plan: Plan, target: Target, res: Results) -> None:
    print(f"\n== 1. ready ({plan.ready_runs} alternating runs)", flush=True)
    times = await startup.measure(plan.ready_runs, target.dashboard_url)
    bare, ours = median(times["bare MCPServer"]), median(times["ray-mcp"])
    goal = startup.READY_GOAL
    res.add(
        Row(
            "ready",
            "spawn + initialize over stdio vs a bare MCPServer",
            ms(ours),
            ms(bare),
            f"{ours / bare:.2f}x",
            f"≤{goal:.2f}x",
            ours / bare <= goal,
        )
    )


async def populated(plan: Plan, target: Target, work: Path, res: Results, only: set[str]) -> None:
    population = Population(target, work)
    try:
        print("\n== populating the cluster (first level)", flush=True)
        population.start()
        job = await population.submit_log_job()
        levels = list(zip(plan.actors, plan.tasks, plan.pgs, plan.jobs, strict=True))
        await population.grow_to(*levels[0])
        if only & {"overhead", "cli"}:
            await overhead_and_cli(plan, target, work, res, job)
        if only & {"overhead", "first"}:  # the same goals on a cluster with pending placement groups
            await population.pending_groups(PENDING_GROUPS)
            if "overhead" in only:
                await overhead_pending(plan, target, work, res, job)
            if "first" in only:
                print(f"\n== 8. first calls ({plan.first_runs} fresh servers per tool)", flush=True)
                await payload.first_calls(res, target, work, job, plan.first_runs, PENDING_NOTE)
            await population.pending_groups(0)
        if "memory" in only:
            await memory(plan, target, work, res, job)
        if "payload" in only:
            await payload_and_first(plan, target, work, res, job, only)
        if "scale" in only:
            await scale(plan, target, work, res, population, levels)
    finally:
        population.stop()


async def overhead_and_cli(plan: Plan, target: Target, work: Path, res: Results, job: str) -> None:
    async with (
        stdio_session(target.dashboard_url, work / "stdio.log") as stdio,
        http_session(target.dashboard_url, work / "http.log") as http,
        stdio_session(target.dashboard_url, work / "proxy.log", proxy=True) as proxy,
    ):
        print(f"\n== 2. call overhead ({plan.reps} interleaved runs)", flush=True)
        await sections.call_overhead(res, target, stdio, http, proxy, job, plan.reps)
        print(f"\n== 3. against the CLI ({plan.cli_reps} interleaved runs)", flush=True)
        await sections.against_cli(res, target, stdio, job, plan.cli_reps)


async def overhead_pending(plan: Plan, target: Target, work: Path, res: Results, job: str) -> None:
    async with (
        stdio_session(target.dashboard_url, work / "stdio.log") as stdio,
        http_session(target.dashboard_url, work / "http.log") as http,
        stdio_session(target.dashboard_url, work / "proxy.log", proxy=True) as proxy,
    ):
        print(f"\n== 2. call overhead {PENDING_NOTE} ({plan.reps} interleaved runs)", flush=True)
        await sections.call_overhead(res, target, stdio, http, proxy, job, plan.reps, PENDING_NOTE)


async def memory(plan: Plan, target: Target, work: Path, res: Results, job: str) -> None:
    before = child_pids()
    async with stdio_session(target.dashboard_url, work / "memory.log") as stdio:
        pid = ray_mcp_children(before)[0]
        first, total = plan.memory_calls
        print(f"\n== 6. memory ({total} mixed calls, server pid {pid})", flush=True)
        await sections.memory(res, stdio, pid, job, first, total)
    await payload.http_session_memory(res, target, work, plan.http_sessions)


async def payload_and_first(
    plan: Plan, target: Target, work: Path, res: Results, job: str, only: set[str]
) -> None:
    if "payload" in only:
        print("\n== 7. payload (tools/list, whole results at default limits)", flush=True)
        async with stdio_session(target.dashboard_url, work / "payload.log") as stdio:
            await payload.tools_list(res, stdio)
            await payload.whole_results(res, stdio, job)


async def scale(
    plan: Plan, target: Target, work: Path, res: Results, population: Population, levels: list[Any]
) -> None:
    print(f"\n== 4. scale ({len(levels)} levels)", flush=True)
    async with contextlib.AsyncExitStack() as stack:
        stdio = await stack.enter_async_context(stdio_session(target.dashboard_url, work / "scale.log"))
        baseline = None
        if BASELINE_SERVER:  # another build, measured side by side with this one
            log = work / "scale-baseline.log"
            baseline = await stack.enter_async_context(
                stdio_session(target.dashboard_url, log, command=BASELINE_SERVER)
            )
        for i, level in enumerate(levels):
            if i:
                await population.grow_to(*level)
            counts = dict(zip(("actors", "tasks", "pgs", "jobs"), level, strict=True))
            counts["jobs"] += 1  # the log job
            # Measured once the load the level's population made (its workers, drivers and tasks) has passed.
            load = await common.settle_load(f"level {i + 1}")
            await sections.scale_level(res, target, stdio, counts, plan.reps, plan.cli_reps, load, baseline)
        await payload.health_at_scale(res, stdio, levels[-1][1], plan.reps)
    sections.scale_rows(res)


async def logs(plan: Plan, target: Target, res: Results) -> None:
    print(f"\n== 5. logs ({plan.log_mb} MB job log)", flush=True)
    out = await logs_bench.run(
        target.dashboard_url, target.logs_dir, plan.log_mb, plan.log_reps, plan.log_full_reps
    )
    tail, full = out["tail_logs via MCP client"], out["JobSubmissionClient.get_job_logs (full)"]
    res.add(
        Row(
            "logs",
            f"tail_logs 100 lines of a {plan.log_mb} MB log vs full get_job_logs",
            ms(tail),
            ms(full),
            f"{full / tail:.0f}x faster",
            "≥100x faster",
            full / tail >= 100,
        )
    )
    res.add(Row("logs", "tail_logs 100 lines: absolute", ms(tail), "", "", "≤0.5 s", tail <= 0.5))
    if "tail -n 100 on the file" in out:
        file_tail = out["tail -n 100 on the file"]
        res.add(
            Row(
                "logs",
                "tail_logs 100 lines vs `tail -n 100` on the file",
                ms(tail),
                ms(file_tail),
                f"{tail / file_tail:.1f}x",
                "≤5x",
                tail / file_tail <= 5,
            )
        )


GOALS = (
    ("ready", "ready over a bare MCPServer"),
    ("first call", "first call over the same call warm"),
    ("call overhead", "warm call over a minimal MCP proxy of the same read"),
    ("scale vs GET", "list tool at the largest size over the raw GET under it"),
)


def goal_lines(res: Results) -> list[str]:
    """The goals of issues 25 and 36, one line each: pass only if every row of the goal met it."""
    lines = []
    for section, label in GOALS:
        rows = [r for r in res.rows if r.section == section and r.met is not None]
        if rows:
            verdict = "PASS" if all(r.met for r in rows) else "FAIL"
            figures = ", ".join(
                f"{r.what.split()[0] if section != 'ready' else 'ray-mcp'}"
                f"{' (pending groups)' if PENDING_NOTE in r.what else ''} {r.ratio}"
                for r in rows
            )
            lines.append(f"{verdict} {label} (goal {rows[0].goal}): {figures}")
    return lines


def machine() -> str:
    import psutil

    ray_version = _version("ray")
    mem = psutil.virtual_memory().total / 1024**3
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, Ray {ray_version}, mcp {_version('mcp')}; "
        f"load average at the end {load}"
    )


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def plot(res: Results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = [k for k in ("actors", "tasks", "pgs", "jobs") if any(p["kind"] == k for p in res.scale)]
    fig, axes = plt.subplots(2, len(kinds), figsize=(4 * len(kinds), 7), squeeze=False)
    for col, kind in enumerate(kinds):
        points = sorted((p for p in res.scale if p["kind"] == kind), key=lambda p: p["size"])
        xs = [p["size"] for p in points]
        for row, (metric, label) in enumerate((("s", "latency (ms)"), ("bytes", "output (KB)"))):
            ax = axes[row][col]
            scale = 1000 if metric == "s" else 1 / 1024
            ax.plot(xs, [p[f"tool_{metric}"] * scale for p in points], "o-", label=points[0]["tool"])
            ax.plot(xs, [p[f"cli_{metric}"] * scale for p in points], "s--", label=points[0]["cli"])
            if metric == "s" and all("raw_s" in p for p in points):
                ax.plot(xs, [p["raw_s"] * 1000 for p in points], "^:", label="raw GET (dashboard)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"{kind} in the cluster")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("ray-mcp list tools (defaults, stdio) vs the ray CLI: median latency and output size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot saved to {path}")


RESULTS_START, RESULTS_END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"


def update_doc(path: Path, res: Results, command: str, started: str, minutes: float) -> None:
    """Replace the generated block of the doc (between the markers) with this run's table."""
    block = "\n".join(
        [
            RESULTS_START,
            f"Run of {started}, {minutes:.0f} min, with `{command}`.",
            f"Machine: {machine()}.",
            "",
            markdown_table(res.rows),
            "",
            *(f"- {line}" for line in goal_lines(res)),
            "",
            RESULTS_END,
        ]
    )
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{RESULTS_START}\n{RESULTS_END}\n"
    pattern = re.compile(re.escape(RESULTS_START) + ".*?" + re.escape(RESULTS_END), re.DOTALL)
    path.write_text(pattern.sub(lambda _m: block, text))
    print(f"table written to {path}")


def start_head(attempts: int = 3) -> Any:
    """A LocalHead of our own. Retried: on a busy machine a port found free can be taken before Ray binds it."""
    from ray_mcp.errors import ClusterUnavailable
    from ray_mcp.local_head import LocalHead

    for attempt in range(1, attempts + 1):
        head = LocalHead(num_cpus=2, resources=json.dumps({PG_RESOURCE: 100_000}))
        head.spawn()
        print(f"starting an embedded Ray head in {head.temp_dir} ...", flush=True)
        try:
            anyio.run(head.wait_ready, 180.0)
            return head
        except ClusterUnavailable as exc:
            head.stop()
            if attempt == attempts:
                raise
            print(f"  the head did not start ({str(exc)[:200]}); retrying", flush=True)
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="Small sizes, few repetitions (CI).")
    parser.add_argument("--address", help="Dashboard URL of a running cluster (default: start a LocalHead).")
    parser.add_argument("--gcs-address", help="GCS host:port of that cluster (for drivers and `ray status`).")
    parser.add_argument("--logs-dir", type=Path, help="That head's Ray log dir, to time `tail` on the file.")
    parser.add_argument("--plot", type=Path, help="Save the scale plot (PNG) here (needs the bench extra).")
    parser.add_argument("--update-doc", type=Path, help="Rewrite the results block of this Markdown file.")
    parser.add_argument("--json", type=Path, help="Save every row and scale point as JSON here.")
    parser.add_argument(
        "--baseline-server",
        default="",
        help="Another build's ray-mcp executable (e.g. a worktree of main's .venv/bin/ray-mcp): the scale "
        "section measures it too, interleaved with this one, and reports both.",
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"Which to run, comma-separated: {','.join(SECTIONS)}."
    )
    args = parser.parse_args()
    if args.address and not args.gcs_address:
        parser.error("--address needs --gcs-address (drivers and `ray status` talk to the GCS)")
    plan = SMOKE if args.smoke else FULL
    common.WARMUP = common.QUIET = not args.smoke
    global BASELINE_SERVER
    BASELINE_SERVER = args.baseline_server
    started, t0 = time.strftime("%Y-%m-%d %H:%M"), time.monotonic()

    head = None
    if args.address:
        target = Target(args.address.rstrip("/"), args.gcs_address, args.logs_dir, embedded=False)
    else:
        head = start_head()
        logs_dir = head.temp_dir / "session_latest" / "logs"
        target = Target(head.dashboard_url, head.gcs_address, logs_dir, embedded=True)
    res = Results()
    try:
        with tempfile.TemporaryDirectory(prefix="ray-mcp-bench-") as work:
            anyio.run(run, plan, target, Path(work), res, set(args.sections.split(",")))
    finally:
        if head is not None:
            head.stop()
    minutes = (time.monotonic() - t0) / 60
    print(f"\nray-mcp benchmarks ({'smoke' if args.smoke else 'full'}), {minutes:.1f} min; {machine()}")
    print("medians of interleaved runs; ratios are ray-mcp / baseline unless they say 'faster'\n")
    print(text_table(res.rows))
    print("\ngoals of issues 25 and 36 (ratios are ray-mcp / baseline):")
    print("\n".join(goal_lines(res)) or "none measured in this run")
    if args.json:
        args.json.write_text(
            json.dumps({"rows": [asdict(r) for r in res.rows], "scale": res.scale}, indent=1)
        )
    if args.plot:
        plot(res, args.plot)
    if args.update_doc:
        command = " ".join(["python -m bench", *sys.argv[1:]])
        update_doc(args.update_doc, res, command, started, minutes)


if __name__ == "__main__":
    main()
