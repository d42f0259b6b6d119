"""Fresh servers whose very first calls come in parallel: every call answers, in the first round and after.

Each server is a real ``ray-mcp`` process (stdio or streamable HTTP) pointed at the session's cluster; its
first calls are several different tools at once, among them the ones that need Ray's own clients (the Jobs
API client, the GCS channel of pg_status and cluster_health). No log may show an import deadlock or a
partially initialized module (what importing Ray from two threads at once used to cause).
"""

from __future__ import annotations

import ast
import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.conftest import clean_env
from tests.test_transports import RAY_MCP, free_port, wait_for_port

# Each of these needs Ray itself (Jobs API client, GCS channel) or the dashboard, and some need both.
FIRST_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("cluster_health", {}),
    ("list_jobs", {}),
    ("pg_status", {}),
    ("list_actors", {}),
    ("cluster_status", {}),
    ("serve_status", {}),
]
SERVERS_PER_TRANSPORT = 4
# The dashboard of a shared 2-core test machine can take more than the default 10 s to answer; this test is
# about the import, not the dashboard.
SLOW_MACHINE = ["--request-timeout-s", "60"]
POISON = ("DeadlockError", "partially initialized module", "Error executing tool", "failed on an unexpected")


async def _all_at_once(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Call every tool at the same time; return a description of each failure."""
    failures: list[str] = []

    async def one(name: str, args: dict[str, Any]) -> None:
        result = await client.call_tool(name, args)
        if result.is_error:
            failures.append(f"{name}: {result.content[0].text}")  # type: ignore[union-attr]

    async with anyio.create_task_group() as tg:
        for name, args in calls:
            tg.start_soon(one, name, args)
    return failures


async def _stdio_server(dashboard_url: str, errlog: Path) -> list[str]:
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", dashboard_url, *SLOW_MACHINE], env=clean_env()
    )
    with open(errlog, "w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            failures = await _all_at_once(client, FIRST_CALLS)
            failures += [f"second round {f}" for f in await _all_at_once(client, FIRST_CALLS)]
    return failures


@contextlib.contextmanager
def _spawned_http(dashboard_url: str, log: Path) -> Iterator[int]:
    """A ray-mcp over streamable HTTP; up to 2 minutes to listen (8 of them start at once on 2 cores)."""
    port = free_port()
    args = [
        RAY_MCP,
        "--transport",
        "streamable-http",
        "--address",
        dashboard_url,
        "--port",
        str(port),
        *SLOW_MACHINE,
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=clean_env())
    try:
        wait_for_port(port, proc, log, timeout_s=120)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=60)


async def _http_server(dashboard_url: str, log: Path) -> list[str]:
    failures: list[str] = []
    with contextlib.ExitStack() as stack:
        port = await anyio.to_thread.run_sync(lambda: stack.enter_context(_spawned_http(dashboard_url, log)))
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url) as first, Client(url) as second:  # two sessions, their first calls together

            async def session(client: Client, calls: list[tuple[str, dict[str, Any]]]) -> None:
                failures.extend(await _all_at_once(client, calls))

            async with anyio.create_task_group() as tg:
                tg.start_soon(session, first, FIRST_CALLS[::2])
                tg.start_soon(session, second, FIRST_CALLS[1::2])
            failures += [f"second round {f}" for f in await _all_at_once(first, FIRST_CALLS)]
    return failures


async def test_fresh_servers_answer_parallel_first_calls_over_stdio_and_http(
    ray_cluster, tmp_path: Path
) -> None:
    results: dict[str, list[str]] = {}
    logs: dict[str, Path] = {}

    async def run(label: str, coro_fn: Any, log: Path) -> None:
        logs[label] = log
        results[label] = await coro_fn(ray_cluster.dashboard_url, log)

    with anyio.fail_after(600):  # up to 8 processes importing Ray at once on a 2-core machine
        async with anyio.create_task_group() as tg:
            for i in range(SERVERS_PER_TRANSPORT):
                tg.start_soon(run, f"stdio-{i}", _stdio_server, tmp_path / f"stdio-{i}.log")
                tg.start_soon(run, f"http-{i}", _http_server, tmp_path / f"http-{i}.log")

    problems = {label: failures for label, failures in results.items() if failures}
    assert not problems, problems
    for label, log in logs.items():
        text = log.read_text()
        assert not [p for p in POISON if p in text], f"{label}: {text[-3000:]}"
    assert len(results) == 2 * SERVERS_PER_TRANSPORT


def _ray_imports(nodes: list[ast.stmt] | list[ast.AST]) -> list[ast.Import | ast.ImportFrom]:
    out = []
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        if any(n == "ray" or n.startswith("ray.") for n in names):
            out.append(node)
    return out


def test_ray_is_imported_at_module_level_only_and_only_by_the_sources() -> None:
    """Ray's modules are imported once, with the server's, in the main thread: an import inside a function
    would run in whatever worker thread calls it, and two threads importing Ray at once deadlock Python's
    import locks. And only sources/ talks to Ray (answers/jobs.py still holds the Jobs SDK client until it moves there),
    with Ray's private names in sdk_private.py, the module of every dependency's private names."""
    root = Path(__file__).resolve().parents[1] / "src" / "ray_mcp"
    in_functions, outside = [], []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        top = set(map(id, _ray_imports(tree.body)))
        for node in _ray_imports(list(ast.walk(tree))):
            if id(node) not in top:
                in_functions.append(f"{path.relative_to(root)}:{node.lineno}")
        if (
            top
            and path.relative_to(root).parts[0] != "sources"
            and path.relative_to(root).as_posix() not in ("answers/jobs.py", "sdk_private.py")
        ):
            outside.append(str(path.relative_to(root)))
    assert not in_functions, in_functions
    assert not outside, outside
