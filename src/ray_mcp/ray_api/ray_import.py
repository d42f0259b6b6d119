"""Import Ray once, in one thread, whatever the concurrency of the calls that need it.

Python's import locks are per module: two threads that import ``ray`` at the same time can each hold a lock
the other needs, and one gets ``_DeadlockError`` (seen on ``ray.core.generated``), which leaves a partially
initialized ``ray`` in ``sys.modules`` and breaks every later call. So every import of Ray by ray-mcp goes
through this gate:

- ``await ensure(group)``: the first caller starts one worker thread that imports the group's modules;
  every other caller awaits the same result (no thread held while waiting). A failure is reported to all of
  them as ``RayUnavailable`` with the cause; the next call tries again.
- ``load_sync(group)``: the same, for code already running in a thread; all imports share one process-wide
  lock, so two of our threads never import Ray at once.

The server never imports Ray at startup (``initialize`` stays fast); the first call that needs it pays once.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
from typing import Literal

import anyio.to_thread

from ray_mcp.errors import RayUnavailable

log = logging.getLogger(__name__)

Group = Literal["gcs", "core", "serve", "state"]

# Every Ray module ray-mcp uses, in groups, each imported together by the first call that needs one of them.
MODULES: dict[str, tuple[str, ...]] = {
    # What the GCS calls use (gcs.py): pg_status, list_actors' counts, kill_actor (~0.4 s).
    "gcs": (
        "ray",
        "ray._raylet",
        "ray._private.services",
        "ray._private.grpc_utils",
        "ray._private.authentication.authentication_utils",
        "ray._common.tls_utils",
        "google.protobuf.json_format",
        "ray.core.generated.common_pb2",
        "ray.core.generated.gcs_pb2",
        "ray.core.generated.gcs_service_pb2",
        "ray.core.generated.gcs_service_pb2_grpc",
        "grpc",
    ),
    # Ray's Jobs client and runtime_env packaging: submit_job and its checks (another ~0.4 s).
    "core": ("ray.runtime_env", "ray._private.runtime_env.packaging", "ray.job_submission"),
    # Ray Serve's schema imports ray.serve (and its dependencies): only for serve_deploy.
    "serve": ("ray.serve.schema",),
    # The State API's own conversion of task events (cluster_health reads unfinished tasks from the GCS).
    "state": ("ray.util.state.common",),
}
NEEDS: dict[str, tuple[str, ...]] = {"gcs": (), "core": ("gcs",), "serve": ("core",), "state": ("gcs",)}

_lock = threading.RLock()  # held by the one thread that imports; re-entrant for NEEDS
_loaded: set[str] = set()
_pending: dict[str, asyncio.Future[None]] = {}  # per group: the import under way, awaited by every caller


def load_sync(group: Group) -> None:
    """Import the group's modules in this thread (one thread at a time in the whole process)."""
    if group in _loaded:
        return
    with _lock:
        if group in _loaded:
            return
        for need in NEEDS[group]:
            load_sync(need)  # type: ignore[arg-type]
        for name in MODULES[group]:
            try:
                importlib.import_module(name)
            except Exception as exc:  # ImportError, or anything a module raises while it initializes
                raise RayUnavailable(
                    f"ray-mcp could not import {name} in its environment ({type(exc).__name__}: {exc}). "
                    "Check that the server's Python has ray[default] installed at the cluster's version "
                    "(pip install 'ray[default]'); calls that need no Ray import still work, and the next "
                    "call retries the import."
                ) from exc
        _loaded.add(group)
        log.debug("ray-mcp: imported Ray modules of group %s", group)


async def ensure(group: Group) -> None:
    """Make sure the group's modules are imported, importing them once, off the event loop."""
    loop = asyncio.get_running_loop()
    while group not in _loaded:
        future = _pending.get(group)
        if future is not None and future.get_loop() is loop:
            try:
                await asyncio.shield(future)  # another call is importing: wait for its result
            except asyncio.CancelledError:
                if future.cancelled():
                    continue  # that call was cancelled, not this one: take over
                raise
            continue
        future = _pending[group] = loop.create_future()
        try:
            await anyio.to_thread.run_sync(load_sync, group)
        except BaseException as exc:
            if _pending.get(group) is future:
                del _pending[group]  # the next call retries
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            else:
                future.cancel()
            raise
        future.set_result(None)


def is_loaded(group: Group) -> bool:
    return group in _loaded
