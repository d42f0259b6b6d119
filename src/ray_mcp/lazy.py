"""Our modules that a server imports after it has started: off the event loop, one import at a time.

A server lists its tools before it has imported them (catalog.py) and imports the HTTP client, the adapter and
each tool's area when a call (or the warm-up) first needs them. Those imports run in worker threads, and two
threads importing modules that import each other can wait on each other forever (``_DeadlockError``): so they
hold one process-wide lock.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

import anyio
import anyio.to_thread

IMPORTING = threading.RLock()


def import_sync(name: str) -> ModuleType:
    """``importlib.import_module`` under the lock (in a worker thread, or before the server serves)."""
    with IMPORTING:
        return importlib.import_module(name)


async def import_module(name: str) -> ModuleType:
    """The module, imported in a worker thread if it is not yet (an import can take tens of milliseconds)."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if module is not None and not getattr(spec, "_initializing", False):
        return module
    return await anyio.to_thread.run_sync(import_sync, name)
