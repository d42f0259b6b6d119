"""The rules of the four patterns and of Ray users' most frequent debugging pains, each over the evidence
recorded from a real cluster (tests/recorded/, by the live tests in test_causal_chains.py with RAY_MCP_RECORD=1):
what an error names followed one more step, every constraint of pending work checked before contention, the
holder whose release unblocks the wait, progress before a blocked-looking driver."""

from __future__ import annotations

import pytest
from tests.causal_support import replay
from tests.rule_checks import EXPECT


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_a_rule_over_its_recording_from_a_real_cluster(name: str) -> None:
    EXPECT[name](replay(name))
