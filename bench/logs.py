"""Benchmark: tail_logs (100 lines) on a huge job log vs a full download vs `tail -n 100` on the file.

A job writes a log of --size-mb MB (default 500). Then, in one run, each way of getting its last 100 lines is
timed --reps times (median reported; the tool call and `tail` side by side, interleaved):

* tail_logs through the MCP client (in memory), and the raw RayAPI.logs.tail call under it;
* JobSubmissionClient.get_job_logs (what `ray job logs` does: downloads the whole log);
* `tail -n 100` on the file itself (only when the file is on this machine).

Goals: tail_logs <= 0.5 s, >= 100x faster than the full download, within 5x of `tail`.

    python bench/logs.py                      # starts its own local head (ray_mcp.local_head.LocalHead)
    python bench/logs.py --address http://127.0.0.1:8265 --logs-dir /tmp/ray/session_latest/logs
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from ray_mcp.answers import RayAPI
from ray_mcp.answers.targets import LogTarget
from ray_mcp.local_head import LocalHead
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

WRITER = """
import sys
line = ("x" * 90 + "\\n").encode()
block = line * 10_000
n = int(sys.argv[1]) * 1024 * 1024 // len(block) + 1
out = sys.stdout.buffer
for i in range(n):
    out.write(block)
out.write(b"LAST-LINE-OF-THE-BIG-LOG\\n")
out.flush()
"""


def verdict(ok: bool) -> str:
    return "OK" if ok else "MISSED"


async def timed(fn: Callable[[], Awaitable[Any]], reps: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


async def interleaved(subjects: dict[str, Callable[[], Awaitable[Any]]], reps: int) -> dict[str, float]:
    """The median time of each subject over ``reps`` round-robin rounds (the order rotates), after one warm-up
    each (the first tail_logs connects and looks up the job and its node)."""
    names = list(subjects)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:
        await subjects[name]()
    for rep in range(reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            start = time.perf_counter()
            await subjects[name]()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


async def run(
    address: str, logs_dir: Path | None, size_mb: int, reps: int, full_reps: int
) -> dict[str, float]:
    """Write the big log, time each way of reading its tail, print the verdicts; return the medians (s)."""
    from ray.job_submission import JobSubmissionClient

    jobs = JobSubmissionClient(address)
    script = Path(__file__).with_name("_log_writer.py")
    script.write_text(WRITER)
    print(f"writing a {size_mb} MB job log ...", flush=True)
    start = time.perf_counter()
    sid = jobs.submit_job(
        entrypoint=f"{sys.executable} _log_writer.py {size_mb}",
        runtime_env={"working_dir": str(script.parent), "excludes": ["*.png", "__pycache__"]},
    )
    with anyio.fail_after(1800):
        while (status := jobs.get_job_status(sid)) not in ("SUCCEEDED", "FAILED", "STOPPED"):
            await anyio.sleep(1)
    script.unlink()
    assert status == "SUCCEEDED", jobs.get_job_info(sid).message
    print(f"job {sid} wrote its log in {time.perf_counter() - start:.1f} s", flush=True)

    log_file = (logs_dir / f"job-driver-{sid}.log") if logs_dir else None
    if log_file is not None and log_file.exists():
        print(f"log file: {log_file} ({log_file.stat().st_size / 1024**2:.0f} MiB)")

    server = build_server(Settings(address=address))
    results: dict[str, float] = {}
    local_file = log_file is not None and log_file.exists()
    async with Client(server) as client:

        async def via_mcp() -> None:
            r = await client.call_tool("tail_logs", {"job": sid, "lines": 100})
            assert not r.is_error and "LAST-LINE-OF-THE-BIG-LOG" in r.content[0].text

        async def tail_file() -> None:
            out = subprocess.run(["tail", "-n", "100", str(log_file)], capture_output=True, check=True).stdout
            assert out.rstrip().endswith(b"LAST-LINE-OF-THE-BIG-LOG")

        # side by side, interleaved (the machine is shared): the tool call and `tail` on the same file
        subjects = {"tail_logs via MCP client": via_mcp}
        subjects.update({"tail -n 100 on the file": tail_file} if local_file else {})
        results.update(await interleaved(subjects, reps))
    await server.app.aclose()

    api = RayAPI(address, timeout_s=60)
    target = LogTarget(job=sid)

    async def via_api() -> None:
        tail = await api.logs.tail(target, lines=100, max_bytes=16_384)
        assert tail.sections[0].lines[-1] == "LAST-LINE-OF-THE-BIG-LOG"

    await via_api()
    results["RayAPI.logs.tail (raw)"], _ = await timed(via_api, reps)
    await api.aclose()

    async def full_download() -> None:
        text = await anyio.to_thread.run_sync(jobs.get_job_logs, sid)
        assert text.rstrip().endswith("LAST-LINE-OF-THE-BIG-LOG")
        "\n".join(text.splitlines()[-100:])

    print(f"full downloads ({full_reps}) ...", flush=True)
    results["JobSubmissionClient.get_job_logs (full)"], full_times = await timed(full_download, full_reps)

    print(f"\n{size_mb} MB job log, median of {reps} runs ({full_reps} for the full download):")
    for name, seconds in results.items():
        print(f"  {name:42s} {seconds * 1000:10.1f} ms")
    mcp_s = results["tail_logs via MCP client"]
    full_s = results["JobSubmissionClient.get_job_logs (full)"]
    print(f"\n  tail_logs <= 0.5 s:                 {mcp_s:.3f} s  {'OK' if mcp_s <= 0.5 else 'MISSED'}")
    print(f"  speed-up over the full download:   {full_s / mcp_s:.0f}x  {verdict(full_s / mcp_s >= 100)}")
    if "tail -n 100 on the file" in results:
        tail_s = results["tail -n 100 on the file"]
        raw_s = results["RayAPI.logs.tail (raw)"]
        print(f"  vs tail -n 100 (MCP):              {mcp_s / tail_s:.1f}x  {verdict(mcp_s / tail_s <= 5)}")
        print(f"  vs tail -n 100 (raw RayAPI call):  {raw_s / tail_s:.1f}x")
    print(f"  full download times: {', '.join(f'{t:.2f} s' for t in full_times)}")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--address", help="Dashboard URL of a running cluster (default: start a LocalHead).")
    parser.add_argument("--logs-dir", type=Path, help="The head's Ray log dir, to time `tail` on the file.")
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--full-reps", type=int, default=3)
    args = parser.parse_args()
    head = None
    address, logs_dir = args.address, args.logs_dir
    if address is None:
        head = LocalHead(num_cpus=2)
        head.spawn()
        anyio.run(head.wait_ready, 120.0)
        address, logs_dir = head.dashboard_url, head.temp_dir / "session_latest" / "logs"
    try:
        anyio.run(run, address, logs_dir, args.size_mb, args.reps, args.full_reps)
    finally:
        if head is not None:
            head.stop()


if __name__ == "__main__":
    main()
