"""Ready: spawn the server over stdio until it has answered `initialize`; ray-mcp against a bare MCPServer.

Both are measured alternately in one run, and the medians compared. ray-mcp gets an explicit dashboard
address and connects to it on its first tool call, so neither side waits for a cluster. ray-mcp imports Ray,
every tool area and every model before it reads its first message: that is what the ratio costs.

    python -m bench.startup [--runs 15] [--address http://127.0.0.1:8265]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


READY_GOAL = 3.0  # ray-mcp's ready time over a bare MCPServer's (issue 25)


async def ready(params: StdioServerParameters) -> float:
    """Seconds from spawn to the answer of `initialize` (the SDK's Client sends it on entry)."""
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        async with Client(stdio_client(params, errlog=devnull)) as client:
            elapsed = time.perf_counter() - start
            tools = await client.list_tools()
    assert tools.tools
    return elapsed


def compile_bytecode() -> None:
    """Write the .pyc files of ray_mcp and the bare server, as a pip install does.

    Without them (an editable install under PYTHONDONTWRITEBYTECODE=1, as on our CI machines) every start
    compiles ray_mcp's sources again, ~50 ms that no installed copy pays; the mcp SDK is compiled already.
    """
    import compileall

    import ray_mcp

    for path in (Path(ray_mcp.__file__).parent, HERE / "bare_server.py"):
        if path.is_dir():
            compileall.compile_dir(str(path), quiet=1)
        else:
            compileall.compile_file(str(path), quiet=1)


async def measure(runs: int, address: str) -> dict[str, list[float]]:
    """Ready times of the bare server and ray-mcp, alternating, after one unmeasured warm-up each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_MCP_", "RAY_ADDRESS"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
    subjects = {
        "bare MCPServer": StdioServerParameters(
            command=sys.executable, args=[str(HERE / "bare_server.py")], env=env
        ),
        "ray-mcp": StdioServerParameters(command=str(BIN / "ray-mcp"), args=["--address", address], env=env),
    }
    times: dict[str, list[float]] = {name: [] for name in subjects}
    compile_bytecode()
    for params in subjects.values():  # warm the page cache once, unmeasured
        await ready(params)
    for _ in range(runs):
        for name, params in subjects.items():
            times[name].append(await ready(params))
    return times


async def main(runs: int, address: str) -> None:
    times = await measure(runs, address)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"ready (spawn + initialize over stdio), median of {runs} alternating runs")
    for name, median in medians.items():
        spread = f"{min(times[name]):.3f}-{max(times[name]):.3f}"
        print(f"  {name:<16} {median:.3f} s  (range {spread})")
    ratio = medians["ray-mcp"] / medians["bare MCPServer"]
    print(f"  ratio ray-mcp / bare: {ratio:.2f}x (goal <= {READY_GOAL:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--address", default="http://127.0.0.1:8265")
    args = parser.parse_args()
    anyio.run(main, args.runs, args.address)
