"""Stacks, profiles and stall chains shaped from recorded evidence: pure functions, milliseconds."""

from __future__ import annotations

import json
import textwrap

import pytest
from mcp.types import CallToolResult

from ray_mcp import models
from ray_mcp.diagnosis import hang, report
from ray_mcp.limits import STACK_FAILURES_KEPT, STACK_FRAMES_KEPT
from ray_mcp.shaping import profiles, stacks
from ray_mcp.shaping.common import tool_result

TRAINER = textwrap.dedent(
    """\
    Process {pid}: ray::Trainer.epoch
    Python v3.11.7 (/usr/bin/python3.11)

    Thread {pid} (idle): "MainThread"
        get_objects (ray/_private/worker.py:1012)
        get (ray/_private/worker.py:2981)
        wrapper (ray/_private/client_mode_hook.py:104)
        auto_init_wrapper (ray/_private/auto_init_hook.py:22)
        epoch (trainer.py:31)
        actor_method_executor (ray/_private/function_manager.py:696)
        main_loop (ray/_private/worker.py:1001)
        <module> (ray/_private/workers/default_worker.py:330)
    Thread 4250 (idle): "ray_print_logs"
        wait (threading.py:331)
        print_logs (ray/_private/worker.py:1011)
    """
)
STRAGGLER = textwrap.dedent(
    """\
    Process 4300: ray::Trainer.epoch
    Thread 4300 (active+gil): "MainThread"
        fetch_shard (trainer.py:35)
        epoch (trainer.py:30)
        main_loop (ray/_private/worker.py:1001)
    """
)
IDLE = textwrap.dedent(
    """\
    Process 4400: ray::IDLE
    Thread 4400 (idle): "MainThread"
        main_loop (ray/_private/worker.py:1001)
        <module> (ray/_private/workers/default_worker.py:330)
    """
)
BARRIER = textwrap.dedent(
    """\
    Process 4500: ray::Worker.step
    Thread 4500 (idle): "MainThread"
        wait (torch/distributed/distributed_c10d.py:4100)
        barrier (torch/distributed/distributed_c10d.py:4090)
        wrapper (torch/distributed/c10d_logger.py:83)
        train_loop (train.py:88)
    """
)


def stall_finding(e: hang.HangEvidence, totals: list[dict[str, float]], job: str) -> models.Finding:
    """The stall chain as the answer shows it (a finding: its title and evidence)."""
    chain = hang.stall_chain(e, totals, job)
    assert chain is not None
    return report.to_finding(chain)


def sample(text: str, pid: int, role: str = "Trainer") -> stacks.Sample:
    return stacks.Sample(pid=pid, node="10.0.0.1", role=role, dump=stacks.parse_dump_text(text, pid))


def test_a_py_spy_dump_is_parsed_into_threads_with_innermost_frames_first() -> None:
    dump = stacks.parse_dump_text(TRAINER.format(pid=4242), 4242)
    assert dump.title == "ray::Trainer.epoch"
    main, logs = dump.threads
    assert main.name == "MainThread" and not main.active
    assert main.frames[0] == stacks.Frame("get_objects", "ray/_private/worker.py", 1012)
    assert [f.short() for f in main.user_frames] == ["trainer.py:31 in epoch"]
    assert logs.name == "ray_print_logs"


def test_identical_stacks_collapse_with_counts_and_the_straggler_comes_first() -> None:
    samples = [sample(TRAINER.format(pid=p), p) for p in (4242, 4243, 4244)]
    samples += [sample(STRAGGLER, 4300), sample(IDLE, 4400, role="Loader")]
    groups = stacks.collapse(samples, max_frames=8)
    lines = [stacks.group_line(g) for g in groups]
    assert lines == [
        '1 of 4 "Trainer": running at trainer.py:35 in fetch_shard',
        '3 of 4 "Trainer": blocked in ray.get at trainer.py:31 in epoch',
        '1 of 1 "Loader": idle, no project code running',
    ]
    blocked = groups[1]
    assert blocked.frames == ["[4 Ray frames folded]", "trainer.py:31 in epoch", "[3 Ray frames folded]"]
    assert blocked.pids == ["4242@10.0.0.1", "4243@10.0.0.1", "4244@10.0.0.1"]
    verdict = stacks.verdict("job x", groups, 5)
    assert verdict.startswith('job x, 5 process(es): 1 of 4 "Trainer": running at trainer.py:35')


def test_a_library_barrier_is_named_as_the_call_the_project_frame_waits_in() -> None:
    (group,) = stacks.collapse([sample(BARRIER, 4500, role="Worker")], max_frames=8)
    assert group.blocked_in == "dist.barrier" and group.where == "train.py:88 in train_loop"
    assert group.frames == ["[3 library frames folded]", "train.py:88 in train_loop"]


def test_frames_are_classified_from_full_paths_when_py_spy_gives_them() -> None:
    site = "/venv/lib/python3.11/site-packages"
    assert stacks.frame_kind("worker.py", f"{site}/ray/_private/worker.py") == stacks.RAY
    assert stacks.frame_kind("threading.py", "/usr/lib/python3.11/threading.py") == stacks.LIB
    assert stacks.frame_kind("numpy/core.py", f"{site}/numpy/core.py") == stacks.LIB
    work = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab/train.py"
    assert stacks.frame_kind("train.py", work) == stacks.USER
    assert stacks.frame_kind("threading.py") == stacks.LIB and stacks.frame_kind("train.py") == stacks.USER


def test_py_spy_json_is_parsed_like_its_text() -> None:
    raw = json.dumps(
        [
            {
                "thread_name": "MainThread",
                "os_thread_id": 7,
                "active": False,
                "frames": [
                    {
                        "name": "get",
                        "filename": "/v/site-packages/ray/_private/worker.py",
                        "short_filename": "ray/_private/worker.py",
                        "line": 2981,
                    },
                    {
                        "name": "epoch",
                        "filename": "/work/trainer.py",
                        "short_filename": "trainer.py",
                        "line": 31,
                    },
                ],
            }
        ]
    )
    dump = stacks.parse_dump_json(raw, 7, "ray::Trainer.epoch")
    (group,) = stacks.collapse([stacks.Sample(pid=7, node="n", role="Trainer", dump=dump)], max_frames=4)
    assert group.blocked_in == "ray.get" and group.where == "trainer.py:31 in epoch"


def traces(groups: list[models.StackGroup], failures: list[str] | None = None) -> models.StackTraces:
    failures = failures or []
    return models.StackTraces(
        target="job x",
        verdict=stacks.verdict("job x", groups, len(groups)),
        source="py-spy",
        processes_total=len(groups) + len(failures),
        processes_sampled=len(groups),
        processes_failed=len(failures),
        groups=groups,
        failures=failures,
    )


def sent(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def test_a_stack_answer_over_its_budget_is_fitted_at_the_edge_with_one_count_of_what_was_left_out() -> None:
    samples = [
        sample(STRAGGLER.replace("fetch_shard (trainer.py:35)", f"f{i} (mod{i}.py:{i})"), i)
        for i in range(60)
    ]
    groups = stacks.collapse(samples, max_frames=8)
    failures = [f'pid {9000 + i}@10.0.0.2 ("Trainer"): py-spy could not attach' for i in range(10)]
    budget = 6_300  # what stack_traces gives max_bytes=3000: the text and the JSON about 3000 bytes each
    # the edge (tool_result) is what fits it: the area sends every group and the renderer
    result = tool_result(traces(groups, failures).within(budget), stacks.render_stacks)
    assert sent(result) <= budget, sent(result)
    fitted = models.StackTraces.model_validate(result.structured_content)
    kept = len(fitted.groups)
    assert 1 <= kept < 60 and fitted.groups == groups[:kept]  # the likeliest culprit first, as ranked
    assert fitted.groups_left_out == 60 - kept
    assert fitted.failures == failures[:STACK_FAILURES_KEPT]  # the unread processes past a few go first
    note = (
        f"{60 - kept} more of these 60 stack groups and 7 of the 10 processes that could not be sampled left "
        "out to keep the whole answer under 6,300 bytes as sent; raise max_bytes"
    )
    assert [h for h in fitted.hints if "left out" in h] == [fitted.hints[-1]] and note in fitted.hints[-1]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.count("left out") == 1 and note in text


def test_one_stack_alone_over_the_budget_keeps_its_innermost_frames() -> None:
    deep = "\n".join(f"    f{i} (project/module_{i}.py:{i})" for i in range(40))
    dump = f'Process 7: ray::Trainer.epoch\nThread 7 (active): "MainThread"\n{deep}\n'
    (group,) = stacks.collapse([sample(dump, 7)], max_frames=40)
    assert len(group.frames) >= 30
    result = tool_result(traces([group]).within(2_300), stacks.render_stacks)
    assert sent(result) <= 2_300, sent(result)
    fitted = models.StackTraces.model_validate(result.structured_content)
    (kept,) = fitted.groups
    assert STACK_FRAMES_KEPT <= len(kept.frames) < len(group.frames)
    assert kept.frames == group.frames[: len(kept.frames)]  # innermost first
    assert f"of the {len(group.frames)} frames of the first stack left out" in fitted.hints[-1]


def test_a_raw_profile_ranks_functions_by_own_time_and_marks_project_code() -> None:
    raw = textwrap.dedent(
        """\
        main_loop (ray/_private/worker.py:1001);build (indexer.py:20);digest_rows (indexer.py:11) 80
        main_loop (ray/_private/worker.py:1001);build (indexer.py:20);digest_rows (indexer.py:12) 10
        main_loop (ray/_private/worker.py:1001);build (indexer.py:20);update (hashlib.py:3) 10
        """
    )
    parsed = profiles.parse_raw_profile(raw)
    functions, samples = profiles.profile_functions(parsed, top=5)
    assert samples == 100
    top = functions[0]
    assert (top.function, top.file, top.line, top.own_pct, top.project) == (
        "digest_rows",
        "indexer.py",
        11,
        90.0,
        True,
    )
    build = next(f for f in functions if f.function == "build")
    assert build.own_samples == 0 and build.total_pct == 100.0
    assert profiles.hottest_path(parsed, 4)[0] == "indexer.py:11 in digest_rows"


def task(
    tid: str,
    name: str,
    state: str,
    actor: str | None = None,
    parent: str | None = None,
    pid: int | None = None,
    **required: float,
) -> hang.Task:
    return hang.Task(tid, name, state, actor, parent, pid, "n1", dict(required), 0)


def test_a_cycle_of_actor_calls_is_found_as_a_deadlock() -> None:
    tasks = {
        "t1": task("t1", "Ledger.transfer", "RUNNING", actor="A", pid=1),
        "t2": task("t2", "Ledger.transfer", "RUNNING_IN_RAY_GET", actor="B", parent="t1", pid=2),
        "t3": task(
            "t3", "Ledger.transfer", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", actor="A", parent="t2"
        ),
    }
    path, cycle = hang.chain(hang.wait_links(tasks, [{"CPU": 2.0}]))
    assert cycle
    assert [(link.waiter, link.target, link.kind) for link in path] == [
        ("driver", "t1", "task"),
        ("t1", "t2", "task"),
        ("t2", "t3", "task"),
        ("t3", "t1", "queue"),
    ]
    evidence = hang.HangEvidence("stalled", 120, 90, 3, 3, tasks)
    finding = stall_finding(evidence, [{"CPU": 2.0}], "raysubmit_x")
    assert finding.title.startswith("Deadlock (RUNNING 120 s, no task activity for 90 s)")
    assert "queued behind Ledger.transfer" in "\n".join(finding.evidence)


def test_a_task_pending_on_a_resource_no_node_has_ends_the_chain_as_infeasible() -> None:
    tasks = {
        "t1": task("t1", "preprocess", "RUNNING", pid=5),
        "t2": task("t2", "embed", "PENDING_NODE_ASSIGNMENT", parent="t1", GPU=1.0),
    }
    path, cycle = hang.chain(hang.wait_links(tasks, [{"CPU": 4.0}]))
    assert not cycle and path[-1].kind == "resource"
    assert "GPU 1: no node has that much (infeasible)" in path[-1].detail
    finding = stall_finding(hang.HangEvidence("stalled", 100, 80, 2, 2, tasks), [{"CPU": 4.0}], "j")
    assert "infeasible" in finding.title


def test_a_job_that_moves_gets_no_stall_finding() -> None:
    assert hang.stall_chain(hang.HangEvidence("progressing", 300, 2, 10, 10), [], "j") is None


@pytest.mark.live
def test_py_spy_is_found_beside_the_servers_python_when_the_path_lacks_the_venv() -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "from ray_mcp.sources.py_spy import find_py_spy; print(find_py_spy())"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    found = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == str(Path(sys.executable).with_name("py-spy"))


@pytest.mark.live
async def test_a_py_spy_refused_ptrace_says_how_to_allow_it_and_a_hung_one_is_killed() -> None:
    import time

    import pytest

    from ray_mcp.errors import RayRequestFailed
    from ray_mcp.sources.py_spy import run_py_spy

    refused = [
        "sh",
        "-c",
        "echo 'Permission Denied: Try running again with elevated permissions' >&2; exit 1",
    ]
    with pytest.raises(RayRequestFailed, match=r"ptrace.*same user.*ptrace_scope"):
        await run_py_spy(refused, 10)
    started = time.monotonic()
    with pytest.raises(RayRequestFailed, match=r"did not finish within 0\.5 s"):
        await run_py_spy(["sleep", "300"], 0.5)
    # Killed, not waited for: a child left to run would hold this for its 300 s; a loaded box adds seconds.
    assert time.monotonic() - started < 300 / 5


def test_a_stall_whose_top_stack_is_the_drivers_ray_get_names_the_call_it_waits_on_and_its_stack() -> None:
    """The driver "blocked in ray.get" says nothing the wait path does not: the title follows the path (a call
    queued behind another on its actor) to the last call and quotes that call's stack."""
    from ray_mcp import models

    tasks = {
        "t1": task("t1", "Monitor.poll", "RUNNING", actor="M", pid=7),
        "t2": task("t2", "Monitor.latest", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", actor="M"),
    }

    def group(role: str, pid: str, blocked: str | None, where: str) -> models.StackGroup:
        return models.StackGroup(
            role=role,
            count=1,
            of=1,
            state="idle",
            blocked_in=blocked,
            where=where,
            frames=[where],
            pids=[f"{pid}@n1"],
        )

    groups = [
        group("driver", "1", "ray.get", "main.py:28 in <module>"),
        group("Monitor", "7", None, "main.py:14 in Monitor.poll"),
    ]
    stalled = hang.HangEvidence("stalled", 100, 80, 2, 2, tasks)
    stalled.stacks = models.StackTraces(
        target="job",
        verdict="",
        source="py-spy",
        processes_total=2,
        processes_sampled=2,
        processes_failed=0,
        groups=groups,
    )
    finding = stall_finding(stalled, [{"CPU": 4.0}], "j")
    assert "the driver waits on Monitor.latest, queued behind Monitor.poll" in finding.title, finding.title
    assert "main.py:14 in Monitor.poll" in finding.title, finding.title


def test_a_stall_led_by_a_workers_stack_says_by_name_what_the_driver_waits_on_instead_of_its_ray_get() -> (
    None
):
    from ray_mcp import models

    tasks = {
        "t1": task("t1", "Monitor.poll", "RUNNING", actor="M", pid=7),
        "t2": task("t2", "Monitor.latest", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", actor="M"),
    }
    groups = [
        models.StackGroup(
            role="Monitor",
            count=1,
            of=1,
            state="idle",
            where="main.py:14 in Monitor.poll",
            frames=["main.py:14 in Monitor.poll"],
            pids=["7@n1"],
        ),
        models.StackGroup(
            role="driver",
            count=1,
            of=1,
            state="idle",
            blocked_in="ray.get",
            where="main.py:28 in <module>",
            frames=["main.py:28 in <module>"],
            pids=["1@n1"],
        ),
    ]
    stalled = hang.HangEvidence("stalled", 100, 80, 2, 2, tasks)
    stalled.stacks = models.StackTraces(
        target="job",
        verdict="",
        source="py-spy",
        processes_total=2,
        processes_sampled=2,
        processes_failed=0,
        groups=groups,
    )
    finding = stall_finding(stalled, [{"CPU": 4.0}], "j")
    assert finding.title.index('"Monitor": waiting at main.py:14') < finding.title.index(
        "the driver waits on"
    )
    assert "the driver waits on Monitor.latest, queued behind Monitor.poll" in finding.title, finding.title
