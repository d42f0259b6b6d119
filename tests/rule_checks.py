"""The checks of issue 31's rules, shared by their live scenarios (test_causal_chains.py, which record the
evidence with RAY_MCP_RECORD=1) and their unit tests over those recordings (test_diagnosis_rules.py)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ray_mcp.diagnosis import registry, report
from ray_mcp.diagnosis.graph import GraphInputs


def job_answer(ev: GraphInputs) -> tuple[str, str]:
    model, text = report.job_report("recorded", ev, max_bytes=6000)
    assert text.splitlines()[0] == model.verdict and len(model.verdict.encode()) <= 300
    return model.verdict, text


@contextmanager
def without(rule_key: str) -> Iterator[None]:
    """The registry without one rule (to show a check fails when its rule is disabled)."""
    registry.discover()
    taken = registry.RULES.pop(rule_key)
    registry._ORDERED.clear()
    try:
        yield
    finally:
        registry.RULES[rule_key] = taken
        registry._ORDERED.clear()


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


def dead_nodes(ev: GraphInputs) -> list[str]:
    """The ids of the DEAD nodes, the last to die first."""
    dead = [n for n in ev.nodes or [] if n.get("state") == "DEAD"]
    return [str(n["node_id"]) for n in sorted(dead, key=lambda n: -int(n.get("end_time_ms") or 0))]


def node_affinity(ev: GraphInputs) -> None:
    """Pattern 1 and 2: work bound by hard node affinity to a node that died names that node and its death (Ray's
    error does not name it), not contention."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("FAILED") and "read_local_shard" in verdict, text
    assert "hard node affinity" in verdict and dead_nodes(ev)[0][:12] in verdict and "died at" in verdict, (
        text
    )
    assert "held by" not in text and "contention" not in text, text
    assert re.search(
        r'actor "ShardCache" \(\w+\) could not be scheduled: hard node affinity \(soft=False\) to a '
        f"gone node; the last node to die: node {dead_nodes(ev)[0][:12]}",
        text,
    ), text


def worker_killed(ev: GraphInputs) -> None:
    """Ray users' issue: a worker SIGKILLed in a task is said to be killed (Ray records no signal: its stderr is
    empty and its exit record says only that the socket closed)."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("FAILED") and "decode_batch" in verdict, text
    assert "killed" in verdict and "SIGKILL" in verdict, text
    assert "nothing in its stderr" in text, text


def serve_health_loop(ev: GraphInputs) -> None:
    """Pattern 1 and Ray users' issue: a Serve replica failing its health check and replaced in a loop, with
    the deployment, the loop and its health-check settings; nothing about its replicas ranks above it (the
    replacement being started is the loop's next turn). Other problems of the cluster (a dead node) may lead."""
    model, text = report.health_report("http://recorded:8265", ev, max_bytes=6000)
    loop = [f for f in model.findings if f.kind == "serve_loop"]
    assert loop, text
    assert "Reranker" in loop[0].title and "replaced" in loop[0].title and "health check" in loop[0].title, (
        text
    )
    assert "health_check_period_s 1" in loop[0].title and "health_check_timeout_s 2" in loop[0].title, text
    above = [f for f in model.findings if f.severity > loop[0].severity]
    assert not any("ServeReplica" in f.title or "Reranker" in f.title for f in above), text


def serve_health_loop_job(ev: GraphInputs) -> None:
    """The same loop, from diagnose_job of the job that deployed the app: the loop first, not its sleeping
    driver, nor the replicas Serve stopped as "ended on request"."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("RUNNING") and "Reranker" in verdict and "health check" in verdict, text
    assert "health_check_period_s 1" in text and "health_check_timeout_s 2" in text, text


def node_drained(ev: GraphInputs) -> None:
    """Ray users' issue: a node drained (preempted) while work ran on it: the work died with it, after a drain."""
    verdict, text = job_answer(ev)
    assert verdict.startswith("FAILED") and "ReplayBuffer" in verdict and "died with its node" in verdict, (
        text
    )
    assert dead_nodes(ev)[0][:12] in verdict and "drained" in verdict, text
    assert "spot instance reclaimed" in text, text


EXPECT: dict[str, Callable[[GraphInputs], None]] = {
    "progressing": progressing,
    "label_selector": label_selector,
    "release_first": release_first,
    "runtime_env_failed": runtime_env_failed,
    "data_stall": data_stall,
    "node_affinity": node_affinity,
    "worker_killed": worker_killed,
    "serve_health_loop": serve_health_loop,
    "serve_health_loop_job": serve_health_loop_job,
    "node_drained": node_drained,
}
