"""The checks of issue 31's rules, shared by their live scenarios (test_causal_chains.py, which record the
evidence with RAY_MCP_RECORD=1) and their unit tests over those recordings (test_diagnosis_rules.py)."""

from __future__ import annotations

from collections.abc import Callable

from ray_mcp.diagnosis import report
from ray_mcp.diagnosis.graph import GraphInputs


def job_answer(ev: GraphInputs) -> tuple[str, str]:
    model, text = report.job_report("recorded", ev, max_bytes=6000)
    assert text.splitlines()[0] == model.verdict and len(model.verdict.encode()) <= 300
    return model.verdict, text


def progressing(ev: GraphInputs) -> None:
    """Pattern 4: a driver waiting in ray.get while its tasks finish is healthy, said first."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("RUNNING") and "healthy: its tasks are finishing" in verdict, text
    assert "not healthy" not in verdict and "blocked" not in verdict, text


def label_selector(ev: GraphInputs) -> None:
    """Pattern 2: an actor whose label selector no alive node matches waits forever, whatever is free."""
    verdict, text = job_answer(ev)
    assert "Trainer" in verdict and "label_selector" in verdict and "accelerator=H100" in verdict, text
    assert "no alive node matches" in verdict and "held by" not in text, text


def release_first(ev: GraphInputs) -> None:
    """Pattern 3: the holder to release is named, a detached actor of a job that ended."""
    verdict, text = job_answer(ev)
    assert "Learner" in verdict and "detached Keeper actor(s)" in verdict and "which ended" in verdict, text
    assert 'releasing actor "Keeper"' in text and "of a job that ended first would let it start" in text, text


def runtime_env_failed(ev: GraphInputs) -> None:
    """Pattern 1 and Ray users' issue 1: a runtime_env that could not be set up, with the field that decided."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("FAILED") and "runtime_env failed to set up" in verdict, text
    assert "[runtime_env] what it installs or uploads: conda" in text, text


def data_stall(ev: GraphInputs) -> None:
    """Issue 29: a Ray Data pipeline that stalls with no error names its bottleneck operator, though Ray Data's
    bookkeeping tasks keep finishing."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("RUNNING") and "not healthy" in verdict, text
    assert "makes no progress" in verdict and "MapBatches(slow)" in verdict and "bottleneck" in verdict, text
    assert "healthy: its tasks are finishing" not in text, text


def autoscaler_infeasible(ev: GraphInputs) -> None:
    """Issue 29 item 7: cluster_health ranks a shape no node type can hold among its problems, with the
    autoscaler's own words (the events cluster_status shows as its decisions)."""
    model, text = report.health_report("recorded", ev, max_bytes=6000)
    assert model.status == "PROBLEMS_FOUND", text
    infeasible = [f for f in model.findings if f.kind == "infeasible"]
    assert infeasible and "GPU" in infeasible[0].title, text
    assert "the autoscaler has no node type that can hold it" in text, text
    assert "No available node types can fulfill" in text, text


EXPECT: dict[str, Callable[[GraphInputs], None]] = {
    "progressing": progressing,
    "label_selector": label_selector,
    "release_first": release_first,
    "runtime_env_failed": runtime_env_failed,
    "data_stall": data_stall,
}
