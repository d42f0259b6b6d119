"""The embedded head and Prometheus are started by spawn_owned: in their own process group, and killed by the
kernel when the process that started them dies (tested with `sleep` in place of them: nothing of Ray runs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live  # it starts processes (no Ray)

STARTER = """
import sys, time
from ray_mcp.local_head import spawn_owned
child = spawn_owned(["sleep", "300"])
print(child.pid, flush=True)
time.sleep(300)
"""


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody reaps (its parent died)."""
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_started_process_has_its_own_group_and_dies_with_its_starter() -> None:
    starter = subprocess.Popen([sys.executable, "-c", STARTER], stdout=subprocess.PIPE)
    assert starter.stdout is not None
    pid = int(starter.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":  # setpriv has exec'd
            assert time.monotonic() < deadline, Path(f"/proc/{pid}/cmdline").read_bytes()
            time.sleep(0.05)
        assert os.getpgid(pid) == pid  # its own group: a killpg of the starter's group leaves it alone
        starter.kill()
        starter.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not gone(pid):
            assert time.monotonic() < deadline, "the started process outlived its starter"
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        starter.kill()
