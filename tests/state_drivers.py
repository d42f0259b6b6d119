"""Driver processes that put things in the test cluster (actors, placement groups, tasks), for state tests.

Each driver is a ``python -c`` subprocess connected with ``ray.init(address=<gcs>)``. It prints ``ready`` once its
objects exist, then sleeps so that they stay alive while the test asserts; the test kills it afterwards.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

PRELUDE = textwrap.dedent(
    """
    import os, sys, time, ray
    from ray.util.placement_group import placement_group
    ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False)
    """
)
EPILOGUE = '\nprint("ready", flush=True)\ntime.sleep(3600)\n'


@contextmanager
def driver(gcs_address: str | None, body: str, namespace: str, timeout_s: float = 180.0) -> Iterator[None]:
    """Run a driver script until it prints ready; kill it (and only it) on exit."""
    if gcs_address is None:
        pytest.skip("needs the session's own cluster (GCS address)")
    script = PRELUDE + textwrap.dedent(body) + EPILOGUE
    proc = subprocess.Popen(
        [sys.executable, "-c", script, gcs_address, namespace],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        line = "?"
        while line and line.strip() != "ready" and time.monotonic() < deadline:
            line = proc.stdout.readline()  # blocks until a line (or the driver dies: then "")
        if line.strip() != "ready":
            proc.kill()
            _out, err = proc.communicate(timeout=30)
            raise AssertionError(f"driver failed: {line!r} {err[-3000:]}")
        yield
    finally:
        proc.kill()
        proc.wait(timeout=30)
