"""Local memray: attach it to one Ray worker on this host for a window, detach it, and read its flame graph
report; explain its failures. The same three steps Ray's agent runs for ``/memory_profile``
(dashboard/modules/reporter/profile_manager.py), for a head whose profiling routes are off.

memray attaches through gdb (or lldb), so it needs ptrace permission on the worker, and the worker's Python
must import memray too (the attach runs ``import memray`` inside it).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio

from ray_mcp.sources.py_spy import PTRACE_FIX, find_tool, run_tool, stacks_excerpt

# What memray (and the gdb it runs) say, lower-cased, and what each means for an agent.
_NO_DEBUGGER = ("cannot find a debugger", "no debugger", "debugger is not installed", "gdb: not found")
_NO_MODULE = ("no module named 'memray'", "no module named memray")
_PERMISSION = ("operation not permitted", "permission denied", "ptrace")
_GONE = ("no such process", "process not found", "does not exist")


def find_memray(configured: str | None = None) -> str | None:
    """memray: the configured path, else beside this Python, else on the PATH."""
    return find_tool("memray", configured)


def failure_reason(text: str) -> str:
    """One sentence from memray's error output, with the fix when there is one."""
    low = text.lower()
    if any(p in low for p in _NO_DEBUGGER):
        return f"memray found no debugger to attach with ({stacks_excerpt(text)}): install gdb on this host"
    if any(p in low for p in _NO_MODULE):
        return (
            f"the worker's Python cannot import memray ({stacks_excerpt(text)}): pip install memray in the "
            "environment that runs Ray"
        )
    if any(p in low for p in _GONE):
        return f"the process exited before memray attached ({stacks_excerpt(text)})"
    if any(p in low for p in _PERMISSION):
        return f"memray's debugger was refused ptrace ({stacks_excerpt(text)}): {PTRACE_FIX}"
    return stacks_excerpt(text, 300)


async def _run(cmd: list[str], timeout_s: float) -> str:
    return await run_tool(cmd, timeout_s, tool="memray", reason=failure_reason)


async def flamegraph(
    memray: str, pid: int, *, duration_s: int, leaks: bool, native: bool, step_timeout_s: float
) -> str:
    """memray attached to ``pid`` for ``duration_s`` seconds, then detached (also when the call is cancelled,
    so the worker does not go on tracking), and its ``flamegraph`` page: the report Ray's route answers."""
    with tempfile.TemporaryDirectory(prefix="ray-mcp-memray-") as tmp:
        capture, page = Path(tmp) / "capture.bin", Path(tmp) / "flamegraph.html"
        # pymalloc allocations too (as Ray's route asks): a list of small objects is a leak as well.
        attach = [memray, "attach", str(pid), "-o", str(capture), "--trace-python-allocators"]
        await _run([*attach, "--native"] if native else attach, step_timeout_s)
        try:
            await anyio.sleep(duration_s)  # the profile's window: memray records in the worker meanwhile
        finally:
            with anyio.CancelScope(shield=True):
                await _run([memray, "detach", str(pid)], step_timeout_s)
        report = [memray, "flamegraph", "-f", "-o", str(page)]
        await _run([*report, "--leaks", str(capture)] if leaks else [*report, str(capture)], step_timeout_s)
        return page.read_text(errors="replace")
