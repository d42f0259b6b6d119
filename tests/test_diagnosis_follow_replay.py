"""Issue 39's rules over the evidence their live scenarios recorded from the session head
(tests/test_diagnosis_follow.py with RAY_MCP_RECORD=1): each answer follows the first fact to what it points at,
names it in the verdict, and stays within the byte budget."""

from __future__ import annotations

import pytest
from tests.causal_support import replay
from tests.follow_checks import FOLLOW

from ray_mcp.diagnosis import registry, report


@pytest.mark.parametrize("name", sorted(FOLLOW))
def test_an_answer_follows_what_the_error_names_over_its_recording(name: str) -> None:
    model, text = report.job_report("recorded", replay(name), max_bytes=6000)
    assert text.splitlines()[0] == model.verdict and len(model.verdict.encode()) <= 300, text
    assert len(text.encode()) <= 6000, len(text.encode())
    FOLLOW[name](text)


# Each scenario's rule(s): with them taken out of the registry, its check fails over the same recording.
RULE_OF = {
    "follow_unserialisable": ("handover.driver_unserialisable",),
    "follow_missing_file": ("uploads.task_missing_file",),
    "follow_read_only": ("handover.task_handover",),
    "follow_nested_refs": ("handover.task_handover",),
    "follow_wrong_address": ("connect.never_connected",),
    "follow_async_blocking": ("async_actors.blocked_loop",),
    "follow_pg_self_deadlock": ("waiting.pg_self_deadlock",),
    "follow_train_failure": ("frameworks.framework_recorded", "frameworks.framework_teardown"),
    "follow_peer_wait": ("blocking.blocked_on",),
}


@pytest.mark.parametrize("name", sorted(RULE_OF))
def test_each_check_fails_with_its_rule_disabled(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry.discover()
    for key in RULE_OF[name]:
        monkeypatch.delitem(registry.RULES, key)
    registry._ORDERED.clear()
    try:
        _model, text = report.job_report("recorded", replay(name), max_bytes=6000)
        with pytest.raises(AssertionError):
            FOLLOW[name](text)
    finally:
        monkeypatch.undo()
        registry._ORDERED.clear()
