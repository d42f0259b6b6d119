"""The suite's rules (tests/rules.py) hold: a test that is not live cannot start a process."""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from tests.rules import GUARD


def test_a_test_that_is_not_live_cannot_start_a_process() -> None:
    assert GUARD.test is not None, "the guard is off: a live test ran before this one"
    with pytest.raises(RuntimeError, match="is not marked live but started a process"):
        subprocess.run(["true"])
    with pytest.raises(RuntimeError, match="mark this test live"):
        asyncio.run(asyncio.create_subprocess_exec("true"))
    assert len(GUARD.refused) == 2, GUARD.refused
    GUARD.refused.clear()  # refused on purpose: without this, the guard fails the test
