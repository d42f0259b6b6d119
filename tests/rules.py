"""The suite's rules, as a pytest plugin (tests/conftest.py loads it).

``live``: a test that needs a Ray head or a subprocess is marked live, and ``pytest -m "not live"`` is the
quick loop a developer runs after every edit. A test is live if it uses the session head (``ray_cluster``,
also through ``server`` and ``client``: marked here), or if its module says ``pytestmark = pytest.mark.live``
or the test ``@pytest.mark.live`` (heads of their own, a spawned ray-mcp, npm clients, installers, a fresh
interpreter). A test not marked live that starts a process fails with "mark this test live" (``SpawnGuard``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

# The audit events (PEP 578) that starting a process raises: subprocess and asyncio (both through Popen),
# os.posix_spawn, os.system, os.exec*, os.spawn* and os.fork (also multiprocessing's default start method).
SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.system", "os.exec", "os.spawn", "os.fork", "os.forkpty"}
)
MARK_IT = "mark this test live (pytestmark = pytest.mark.live in its module, or @pytest.mark.live)"


class SpawnGuard:
    """Refuses to start a process while a test that is not live runs, and makes that test fail.

    Not-live tests run before every live one (sorted in ``pytest_collection_modifyitems``), so a test gets the
    same verdict in a full run as under ``-m "not live"``. Once the first live test starts, the guard is off
    for the rest of the session: nothing a live test started can be blamed on a later test, and no live run
    can be broken by it.
    """

    def __init__(self) -> None:
        self.test: pytest.Item | None = None  # the not-live test running now, while the guard is on
        self.off = False
        self.refused: list[str] = []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.test is None or event not in SPAWN_EVENTS:
            return
        what = f"{event} {args[1] if event == 'subprocess.Popen' else args[0]!r}"[:300]
        self.refused.append(what)
        raise RuntimeError(f"{self.test.nodeid} is not marked live but started a process ({what}): {MARK_IT}")


GUARD = SpawnGuard()
sys.addaudithook(
    GUARD.audit
)  # an audit hook stays for the process's life; it does nothing while test is None


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: the sort below comes after every other reordering
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    # Before pytest's own hooks, so that the -m deselection sees these marks.
    for item in items:
        if "ray_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.live)
    yield
    # After them: the not-live tests first, each group in pytest's order (grouped by fixture).
    items.sort(key=lambda item: item.get_closest_marker("live") is not None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[object]:
    if item.get_closest_marker("live") is not None:
        GUARD.off = True
    GUARD.test = None if GUARD.off else item
    try:
        return (yield)
    finally:
        GUARD.test = None
        GUARD.refused.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    if GUARD.refused and GUARD.test is item:  # also when the test caught the error, or skipped after it
        report.outcome = "failed"
        report.longrepr = f"{item.nodeid} started a process but is not live: {MARK_IT}\n" + "\n".join(
            f"  refused: {what}" for what in GUARD.refused
        )
        GUARD.refused.clear()
    return report
