"""The rules of the four patterns and of Ray users' most frequent debugging pains, each over the evidence
recorded from a real cluster (tests/recorded/, by the live tests in test_causal_chains.py with RAY_MCP_RECORD=1):
what an error names followed one more step, every constraint of pending work checked before contention, the
holder whose release unblocks the wait, progress before a blocked-looking driver."""

from __future__ import annotations

import copy

import pytest
from tests.causal_support import replay
from tests.rule_checks import EXPECT

from ray_mcp.diagnosis.facts import PROBLEM
from ray_mcp.diagnosis.graph import GraphInputs


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_a_rule_over_its_recording_from_a_real_cluster(name: str) -> None:
    EXPECT[name](replay(name))


def test_cluster_health_tells_an_infeasible_shape_with_the_autoscalers_words() -> None:
    from tests.rule_checks import autoscaler_infeasible

    autoscaler_infeasible(replay("autoscaler_infeasible"))


def failed_launch(ev: GraphInputs, ago_s: float) -> GraphInputs:
    """The recording with one event a real cluster of this machine cannot make (a cloud's launch failure), in
    the shape Ray's v1 node launcher writes it."""
    ev = copy.deepcopy(ev)
    at = ev.now_ms / 1000 - ago_s
    message = (
        "Failed to launch 2 node(s) of type gpu_worker. (InsufficientInstanceCapacity): We currently do not "
        "have sufficient p4d.24xlarge capacity in the Availability Zone you requested."
    )
    ev.events = [
        *(ev.events or []),
        {"message": message, "severity": "ERROR", "source_type": "AUTOSCALER", "timestamp": at, "time": "?"},
    ]
    return ev


def test_cluster_health_ranks_a_recent_failed_launch_among_its_problems() -> None:
    from ray_mcp.diagnosis import report

    model, text = report.health_report(
        "recorded", failed_launch(replay("autoscaler_infeasible"), 60), max_bytes=6000
    )
    [failed] = [f for f in model.findings if f.kind == "autoscaler_failed"]
    assert failed.severity >= PROBLEM and "InsufficientInstanceCapacity" in failed.title, text
    assert "gpu_worker" in failed.title and "list_events source=AUTOSCALER" in failed.next_steps, text


def test_a_failed_launch_over_an_hour_old_is_only_a_warning() -> None:
    from ray_mcp.diagnosis import report

    model, text = report.health_report(
        "recorded", failed_launch(replay("autoscaler_infeasible"), 7200), max_bytes=6000
    )
    [failed] = [f for f in model.findings if f.kind == "autoscaler_failed"]
    assert failed.severity < PROBLEM and "over an hour ago" in failed.title, text
