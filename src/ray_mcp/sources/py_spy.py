"""Local py-spy: find it, run it without blocking the loop (with a timeout, reaped on cancel), and explain
its failures; check that a pid on this host is a Ray process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from ray_mcp.child_env import tool_env
from ray_mcp.errors import RayRequestFailed
from ray_mcp.text import truncate_text

PTRACE_FIX = (
    "py-spy needs ptrace permission: run it as the same user as the Ray workers (or root), allow ptrace with "
    "`sudo sysctl kernel.yama.ptrace_scope=0`, and in a container add the SYS_PTRACE capability"
)
_PERMISSION = ("permission denied", "operation not permitted", "elevated permissions", "ptrace")
_GONE = ("no such process", "failed to find process", "process not found", "failed to open process")


def find_py_spy(configured: str | None = None) -> str | None:
    """py-spy: the configured path, else beside this Python, else on the PATH."""
    return find_tool("py-spy", configured)


def find_tool(name: str, configured: str | None = None) -> str | None:
    """A profiler (py-spy, memray): the configured path, else beside this Python (clients often start us with a
    PATH lacking our venv's bin/), else on the PATH."""
    if configured:
        return configured if Path(configured).is_file() and os.access(configured, os.X_OK) else None
    beside = Path(sys.executable).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def failure_reason(text: str) -> str:
    """One sentence for an agent from py-spy's (or the agent's) error output, with the fix when there is one."""
    low = text.lower()
    if any(p in low for p in _PERMISSION):
        return f"py-spy was refused ptrace ({stacks_excerpt(text)}): {PTRACE_FIX}"
    if any(p in low for p in _GONE):
        return f"the process exited before it could be read ({stacks_excerpt(text)})"
    if "not installed" in low or "no such file" in low:
        return f"py-spy is not installed where the process runs ({stacks_excerpt(text)}): pip install py-spy there"
    return stacks_excerpt(text, 300)


def stacks_excerpt(text: str, limit: int = 160) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("===")]
    interesting = [ln for ln in lines if "error" in ln.lower() or "denied" in ln.lower()] or lines
    joined = " | ".join(interesting[-3:])
    return truncate_text(joined, limit)


def check_local_process(pid: int) -> tuple[bool, str]:
    """(is a Ray process on this host, its title or why not). Runs in a thread: psutil and /proc reads."""
    import psutil

    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
    except psutil.NoSuchProcess:
        return False, f"no process {pid} runs on this host (it exited)"
    except psutil.AccessDenied:
        return False, f"process {pid} belongs to another user: {PTRACE_FIX}"
    title = " ".join(" ".join(cmdline).split())[:200] or proc.name()
    if cmdline and ("ray::" in cmdline[0] or any("default_worker.py" in c for c in cmdline)):
        return True, title
    try:  # a driver: a Python process that loaded Ray's core worker
        if b"_raylet" in Path(f"/proc/{pid}/maps").read_bytes():
            return True, title
    except PermissionError:
        return False, f"process {pid} cannot be inspected: {PTRACE_FIX}"
    except OSError:
        pass
    return False, f"process {pid} on this host is not a Ray worker or driver"


async def run_py_spy(cmd: list[str], timeout_s: float) -> str:
    """Run py-spy without blocking the loop; its stdout, or RayRequestFailed with the reason and the fix."""
    return await run_tool(cmd, timeout_s, tool="py-spy", reason=failure_reason)


async def run_tool(cmd: list[str], timeout_s: float, *, tool: str, reason: Callable[[str], str]) -> str:
    """Run a profiler on this host without blocking the loop (with a timeout, reaped on cancel); its stdout, or
    RayRequestFailed with ``reason`` of its error output."""
    try:
        process = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=tool_env(),  # a profiler needs none of ray-mcp's settings or tokens
        )
    except OSError as exc:
        raise RayRequestFailed(f"{tool} could not be started ({cmd[0]}): {exc}") from exc
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        await _reap(process)
        raise RayRequestFailed(
            f"{tool} did not finish within {timeout_s:g} s (a loaded node?); retry."
        ) from None
    except asyncio.CancelledError:
        await _reap(process)
        raise
    if process.returncode != 0:
        raise RayRequestFailed(reason((err or out).decode(errors="replace")))
    return out.decode(errors="replace")


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Kill a profiler that outlived its call (py-spy detaches from its target when it dies) and wait for it."""
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(Exception):
        await asyncio.shield(process.wait())
