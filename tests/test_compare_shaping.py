"""compare_jobs' weighing (shaping/compare.py, pure), over task rows and job details written as Ray's State and
Jobs APIs give them: which difference explains the most, and env_vars compared by name only."""

from __future__ import annotations

from typing import Any

from ray_mcp.shaping import compare as shape

START = 1_800_000_000_000


def task(name: str, i: int, took_s: float, state: str = "FINISHED", attempt: int = 0) -> dict[str, Any]:
    start = START + i * 10_000
    return {
        "task_id": f"{name}-{i}",
        "func_or_class_name": name,
        "type": "NORMAL_TASK",
        "state": state,
        "attempt_number": attempt,
        "node_id": "n1",
        "start_time_ms": start,
        "end_time_ms": start + took_s * 1000,
    }


def details(status: str, took_s: float, env: dict[str, str], **more: Any) -> dict[str, Any]:
    return {
        "submission_id": f"raysubmit_{status}",
        "job_id": "02000000",
        "status": status,
        "entrypoint": "python train.py",
        "runtime_env": {"env_vars": env},
        "start_time": START,
        "end_time": START + took_s * 1000,
        **more,
    }


def compare(
    da: dict[str, Any], ta: list[dict[str, Any]], db: dict[str, Any], tb: list[dict[str, Any]]
) -> Any:
    a = shape.side("a", da, ta, "2.60.0", {"n1": "10.0.0.1"}, 0)
    b = shape.side("b", db, tb, "2.60.0", {"n1": "10.0.0.1"}, 0)
    rows = shape.function_rows(shape.function_stats(ta), shape.function_stats(tb))
    diffs = shape.differences(a, b, rows, db)
    return a, b, rows, diffs, shape.verdict(a, b, diffs)


def test_a_function_that_got_slower_explains_a_longer_run_before_a_changed_env_var() -> None:
    ta = [task("load", i, 0.1) for i in range(10)] + [task("step", i, 1.0) for i in range(10)]
    tb = [task("load", i, 0.1) for i in range(10)] + [task("step", i, 3.0) for i in range(10)]
    _a, _b, rows, diffs, verdict = compare(
        details("SUCCEEDED", 12, {"LR": "0.1", "TOKEN": "s3cr3t-aaaa"}),
        ta,
        details("SUCCEEDED", 32, {"LR": "0.2", "TOKEN": "s3cr3t-bbbb"}),
        tb,
    )
    assert rows[0].name == "step" and diffs[0].kind == "function_slower", diffs
    assert verdict.startswith('b took 32 s, a 12 s (+20 s): "step" got slower: 1 s -> 3 s'), verdict
    env = next(d for d in diffs if d.kind == "runtime_env")
    assert env.said == "runtime_env changed: env_vars.LR; env_vars.TOKEN", env
    assert "s3cr3t" not in str(diffs) and "0.2" not in env.said


def test_a_run_that_failed_leads_and_its_retried_attempts_count_once() -> None:
    ta = [task("step", i, 1.0) for i in range(4)]
    tb = [task("step", 0, 1.0, "FAILED", 0), task("step", 0, 1.0, "FAILED", 1)] + [
        task("step", i, 1.0) for i in (1, 2, 3)
    ]
    _a, b, rows, diffs, verdict = compare(
        details("SUCCEEDED", 5, {}),
        ta,
        details("FAILED", 3, {}, error_type="JOB_ENTRYPOINT_COMMAND_ERROR"),
        tb,
    )
    assert (
        diffs[0].kind == "outcome" and "b FAILED (JOB_ENTRYPOINT_COMMAND_ERROR) where a SUCCEEDED" in verdict
    )
    assert diffs[1].kind == "function_failures" and diffs[1].said == '"step" failed 1 time(s) in b, 0 in a'
    assert b.tasks == 4 and b.failed == 1 and rows[0].b is not None and rows[0].b.count == 4


def test_two_runs_alike_say_no_difference_was_found() -> None:
    ta = [task("step", i, 1.0) for i in range(4)]
    *_, diffs, verdict = compare(details("SUCCEEDED", 5, {}), ta, details("SUCCEEDED", 5, {}), ta)
    assert diffs == [] and "no difference found" in verdict
