"""Driver processes that put things in the test cluster (actors, placement groups, tasks), for state tests.

Each driver is a ``python -c`` subprocess connected with ``ray.init(address=<gcs>)``. It prints ``ready`` once its
objects exist, then sleeps so that they stay alive while the test asserts; the test kills it afterwards.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

PRELUDE = textwrap.dedent(
    """
    import os, sys, time, ray
    from ray.util.placement_group import placement_group
    ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False)
    """
)
READY = b"RAY_MCP_DRIVER_READY"
EPILOGUE = '\nprint("RAY_MCP_DRIVER_READY", flush=True)\ntime.sleep(3600)\n'


@contextmanager
def driver(
    gcs_address: str, body: str, namespace: str, timeout_s: float = 180.0, args: Sequence[str] = ()
) -> Iterator[str]:
    """Run a driver script until it prints the ready marker; kill it (and only it) on exit. ``args`` come after
    the GCS address and the namespace (sys.argv[3:]); it yields what the driver printed before the marker.

    Ray's own threads print to the driver's stdout too ("(raylet) A worker died ..."), sometimes in the same
    line as ours, so the marker is searched in the raw bytes rather than line by line; stderr goes to a file so
    that a full pipe can never block the driver.
    """
    script = PRELUDE + textwrap.dedent(body) + EPILOGUE
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", script, gcs_address, namespace, *args], stdout=subprocess.PIPE, stderr=err
        )
        try:
            assert proc.stdout is not None
            fd = proc.stdout.fileno()
            seen = b""
            deadline = time.monotonic() + timeout_s
            while READY not in seen and time.monotonic() < deadline:
                readable, _, _ = select.select([fd], [], [], 0.5)
                if readable:
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        break  # the driver died
                    seen = (seen + chunk)[-65536:]
            if READY not in seen:
                proc.kill()
                proc.wait(timeout=30)
                err.seek(0)
                raise AssertionError(f"driver failed: {seen[-2000:]!r} {err.read()[-3000:]!r}")
            yield seen.split(READY, 1)[0].decode(errors="replace")
        finally:
            proc.kill()
            proc.wait(timeout=30)


@contextmanager
def driver_with_args(gcs: str, body: str, *args: str) -> Iterator[str | None]:
    """``driver`` with argv after its own (sys.argv[3:]); yields the job id the body printed on a line
    "JOB <id>", if it did."""
    with driver(gcs, body, "prom-tests", timeout_s=300, args=args) as printed:
        marker = "JOB "
        yield next((ln[len(marker) :].strip() for ln in printed.splitlines() if ln.startswith(marker)), None)
