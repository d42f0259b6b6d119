"""Benchmark: what the output choke point (redaction, control characters, bounds) costs per call.

Two wire results shaped like real ones: list_actors with 50 actors (text table plus structured content) and
tail_logs with 100 lines of a training job's driver log (text plus structured lines). Each is passed --reps
times through the middleware's result path (guard.middleware.redact_result); the median per call is printed,
in microseconds of CPU time. Then redact_text on a 1 MB driver log whose every line trips the secret shapes and
detect-secrets' detectors (a credential URL, tokens, "api key"), as one string and line by line: median
milliseconds of CPU time.

    python -m bench.redaction [--reps 2000]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable
from typing import Any


def _hex(i: int, n: int) -> str:
    return (f"{i:08x}" * ((n // 8) + 1))[:n]


def list_actors_result(count: int = 50) -> dict[str, Any]:
    actors = []
    for i in range(count):
        actor: dict[str, Any] = {
            "actor_id": _hex(i * 7919 + 17, 32),
            "class_name": "RolloutWorker" if i % 3 else "LearnerGroup",
            "state": "ALIVE" if i % 5 else "DEAD",
            "name": f"rollout_worker_{i}",
            "pid": 41000 + i,
            "node_id": _hex(i * 104729 + 3, 56),
            "restarts": i % 2,
        }
        if actor["state"] == "DEAD":
            actor["death_cause"] = {
                "reason": "WORKER_DIED",
                "message": "The actor died unexpectedly before finishing this task: worker exit type SYSTEM_ERROR",
            }
        actors.append(actor)
    rows = "\n".join(
        f"{a['actor_id']}  {a['class_name']:<14} {a['state']:<6} {a['name']:<18} pid {a['pid']}  node "
        f"{a['node_id'][:12]}…"
        for a in actors
    )
    text = f"{count} of {count} actors (by state: ALIVE {count - count // 5}, DEAD {count // 5})\n{rows}"
    structured = {
        "total": count,
        "matched": count,
        "shown": count,
        "notes": [],
        "hints": ["Call get_actor with an actor_id for its full record."],
        "by_state": {"ALIVE": count - count // 5, "DEAD": count // 5},
        "actors": actors,
    }
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def tail_logs_result(count: int = 100) -> dict[str, Any]:
    lines = []
    for i in range(count):
        if i % 10 == 0:
            lines.append(
                f"(RolloutWorker pid=4{i:04d}) INFO rollout.py:212 -- collected 512 episodes in 3.2 s"
            )
        else:
            lines.append(
                f"Epoch 3 step {i * 10}: loss=0.{i:04d} lr=3e-4 grad_norm=1.{i % 7}2 tokens/s=18{i:03d} "
                f"max_new_tokens=512 gpu_mem=71.3GiB"
            )
    section = {
        "source": "driver log of job raysubmit_8hTqK3vW4bX2yZ1a",
        "node_id": _hex(99, 56),
        "filename": "job-driver-raysubmit_8hTqK3vW4bX2yZ1a.log",
        "lines": lines,
        "lines_shown": count,
        "more_before": True,
    }
    text = f"driver log of job raysubmit_8hTqK3vW4bX2yZ1a: last {count} lines\n" + "\n".join(lines)
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"sections": [section], "hints": ["Pass lines=200 for more."]},
        "isError": False,
    }


def driver_log(size: int = 1_000_000) -> str:
    """A driver log of ``size`` characters in which every line holds an anchor of the secret shapes."""
    lines, total, i = [], 0, 0
    while total < size:
        if i % 40 == 0:
            line = f"(worker pid=4{i:05d}) fetched https://user:pw{i}x@git.example.com/repo.git with token ghp_{'A1b2' * 9}"
        elif i % 40 == 20:
            line = f"INFO step {i}: HF_TOKEN=hf_{'x' * 30} AKIAIOSFODNN7EXAMPLE eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"
        else:
            line = f"Epoch 3 step {i}: loss=0.{i:04d} lr=3e-4 grad_norm=1.2 tokens/s=18{i % 1000:03d} max_new_tokens=512 api key rotation ok"
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)


def cpu_ms(fn: Callable[[], Any], reps: int = 7) -> float:
    times = []
    for _ in range(reps):
        started = time.thread_time()
        fn()
        times.append(time.thread_time() - started)
    return statistics.median(times) * 1e3


def measure(fn: Callable[[dict[str, Any]], Any], result: dict[str, Any], reps: int) -> float:
    """Median CPU microseconds of ``fn`` on a fresh copy of ``result`` (the copy is not timed)."""
    times = []
    for _ in range(reps):
        data = copy.deepcopy(result)
        started = time.thread_time()  # CPU time of this thread: the machine is shared and noisy
        fn(data)
        times.append(time.thread_time() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    from ray_mcp.guard.middleware import redact_result
    from ray_mcp.guard.redaction import redact_text

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=1000)
    args = parser.parse_args()
    for name, result in (
        ("list_actors (50 actors)", list_actors_result()),
        ("tail_logs (100 lines)", tail_logs_result()),
    ):
        redact_result(copy.deepcopy(result))  # unmeasured: the first call builds the shapes' automaton
        per_call = statistics.median(measure(redact_result, result, 1) for _ in range(args.reps))
        print(f"{name}: {per_call:.0f} µs per call")
    log = driver_log()
    lines = log.split("\n")
    redact_text(log)
    print(
        f"redact_text, 1 MB driver log: as one string {cpu_ms(lambda: redact_text(log)):.0f} ms, "
        f"{len(lines)} lines one by one {cpu_ms(lambda: [redact_text(line) for line in lines]):.0f} ms"
    )


if __name__ == "__main__":
    main()
