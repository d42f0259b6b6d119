"""The suite's rules (tests/rules.py) hold: a test that is not live cannot start a process, a live one can,
and a skip for anything but what the machine lacks fails the run."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tests.npm_tools import REPO
from tests.rules import GUARD, allowed, lacking


def test_a_test_that_is_not_live_cannot_start_a_process() -> None:
    assert GUARD.test is not None, "the guard is off: a live test ran before this one"
    with pytest.raises(RuntimeError, match="is not marked live but started a process"):
        subprocess.run(["true"])
    with pytest.raises(RuntimeError, match="mark this test live"):
        asyncio.run(asyncio.create_subprocess_exec("true"))
    assert len(GUARD.refused) == 2, GUARD.refused
    GUARD.refused.clear()  # refused on purpose: without this, the guard fails the test


def test_only_a_skip_for_what_the_machine_lacks_is_allowed() -> None:
    assert allowed("Skipped: this machine lacks npm: no `npm` on PATH")
    assert allowed("this machine lacks a free port: 8265 is in use")
    assert not allowed("Skipped: Serve already runs on this cluster")
    assert not allowed("Skipped: this machine lacks patience: it is late")
    with pytest.raises(ValueError, match="MAY_LACK"):
        lacking("a GPU", "no CUDA device")


INNER_CONFTEST = """
import pytest

pytest_plugins = ["tests.rules"]


@pytest.fixture(scope="session")
def ray_cluster():  # stands for the session head: what uses it is live
    return None


@pytest.fixture
def server(ray_cluster):
    return ray_cluster
"""

INNER_TESTS = """
import subprocess

import pytest
from tests.rules import lacking


def test_forgot_the_mark():
    subprocess.run(["true"])


def test_forgot_the_mark_and_caught_the_error():
    try:
        subprocess.run(["true"])
    except RuntimeError:
        pass


@pytest.mark.live
def test_marked_live():
    subprocess.run(["true"], check=True)


def test_live_through_the_session_head(server):
    subprocess.run(["true"], check=True)


def test_lacks_npm():
    lacking("npm", "no `npm` on PATH")


def test_skips_for_no_good_reason():
    pytest.skip("the cluster is busy")


@pytest.mark.xfail(reason="known bug")
def test_expected_to_fail():
    assert False
"""


def inner_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only tests.rules: quicker
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfs", "-p", "no:cacheprovider", *args],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.live
def test_a_run_fails_on_an_unmarked_spawn_and_an_unexpected_skip_but_not_on_a_machines_lack(
    tmp_path: Path,
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(INNER_CONFTEST)
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS))

    run = inner_pytest(tmp_path)
    out = run.stdout
    assert run.returncode == 1, out
    assert "2 failed, 2 passed, 2 skipped, 1 xfailed" in out, out
    assert "FAILED test_inner.py::test_forgot_the_mark - " in out
    assert "FAILED test_inner.py::test_forgot_the_mark_and_caught_the_error" in out
    assert "mark this test live" in out
    unexpected = out.split("unexpected skips fail this run")[1]
    assert "test_skips_for_no_good_reason: Skipped: the cluster is busy" in unexpected
    assert "test_expected_to_fail: xfail (known bug)" in unexpected
    assert "test_lacks_npm" not in unexpected
    assert "SKIPPED [1] test_inner.py:28: this machine lacks npm: no `npm` on PATH" in out  # at the test

    quick = inner_pytest(tmp_path, "-m", "not live")  # without the marked test and the one on the head
    assert "2 failed, 2 skipped, 2 deselected, 1 xfailed" in quick.stdout, quick.stdout
    allowed_only = inner_pytest(tmp_path, "-k", "lacks or live")
    assert allowed_only.returncode == 0, allowed_only.stdout
    assert "2 passed, 1 skipped" in allowed_only.stdout and "unexpected" not in allowed_only.stdout
