"""Pure shaping of jobs and logs: budgets, grep scanning, runtime_env checks (no Ray needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ray_mcp import models
from ray_mcp.errors import InvalidArgument
from ray_mcp.ray_api.logs import LogTarget
from ray_mcp.ray_api.runtime_env import check_runtime_env
from ray_mcp.shaping.jobs import job_list, short_message
from ray_mcp.shaping.logs import GrepScanner, render_log_section, tail_section

BASE = models.LogSection(source="test", lines=[], lines_shown=0, more_before=False)


def test_tail_section_of_a_whole_small_file_says_nothing_was_left_out() -> None:
    section = tail_section(b"a\nb\nc\n", lines=10, max_bytes=100, complete=True, base=BASE)
    assert section.lines == ["a", "b", "c"]
    assert section.lines_left_out == 0 and not section.more_before and section.bytes_left_out == 0
    assert "this is the whole file" in render_log_section(section)


def test_a_line_longer_than_the_budget_is_cut_and_counted() -> None:
    section = tail_section(b"x" * 5000 + b"\n", lines=10, max_bytes=300, complete=True, base=BASE)
    assert section.truncated_lines == 1 and len(section.lines[0].encode()) <= 300
    assert "bytes cut" in section.lines[0]


@given(
    st.lists(st.text(alphabet="ab é", max_size=30), max_size=60), st.integers(1, 80), st.integers(256, 900)
)
def test_tail_keeps_the_newest_lines_within_both_budgets(raw: list[str], lines: int, max_bytes: int) -> None:
    data = "".join(f"{t}\n" for t in raw).encode()
    section = tail_section(data, lines=lines, max_bytes=max_bytes, complete=True, base=BASE)
    shown = section.lines
    assert shown == raw[len(raw) - len(shown) :]
    assert len(shown) <= lines and sum(len(t.encode()) + 1 for t in shown) <= max_bytes
    assert section.lines_left_out == len(raw) - len(shown)


@given(st.integers(1, 4096), st.integers(0, 3))
def test_grep_finds_the_same_lines_whatever_the_chunking(chunk: int, context: int) -> None:
    text = "".join(f"{'ERROR' if i % 37 == 5 else 'ok'} {i}\n" for i in range(500))
    scanner = GrepScanner(re.compile("^ERROR", re.M), context=context, keep=10_000)
    data = text.encode()
    for start in range(0, len(data), chunk):
        scanner.feed(data[start : start + chunk])
    scanner.finish()
    expected = [i + 1 for i in range(500) if i % 37 == 5]
    assert scanner.matches == len(expected) and scanner.line_no == 500
    assert [n for n, _, m in scanner.out if m] == expected
    wanted = sorted({n + d for n in expected for d in range(-context, context + 1) if 1 <= n + d <= 500})
    assert [n for n, _, _ in scanner.out] == wanted


def test_check_runtime_env_resolves_a_local_working_dir_and_rejects_a_missing_one(tmp_path: Path) -> None:
    env, uploaded = check_runtime_env({"working_dir": str(tmp_path), "env_vars": {"A": "1"}})
    assert env == {"working_dir": str(tmp_path.resolve()), "env_vars": {"A": "1"}}
    assert uploaded == [str(tmp_path.resolve())]
    env, uploaded = check_runtime_env({"working_dir": "s3://bucket/code.zip"})
    assert uploaded == []
    with pytest.raises(InvalidArgument, match="does not exist"):
        check_runtime_env({"working_dir": str(tmp_path / "nope")})
    with pytest.raises(InvalidArgument, match="is a file"):
        (tmp_path / "f.txt").write_text("x")
        check_runtime_env({"working_dir": str(tmp_path / "f.txt")})


def test_a_log_target_wants_exactly_one_target_and_node_with_pid_or_filename() -> None:
    assert LogTarget(job="j").kind == "job"
    assert LogTarget(pid=3, node="n").kind == "pid"
    with pytest.raises(InvalidArgument, match="needs node"):
        LogTarget(filename="raylet.out")
    with pytest.raises(InvalidArgument, match="node goes with pid or filename"):
        LogTarget(job="j", node="n")
    with pytest.raises(InvalidArgument, match="got job, actor_id"):
        LogTarget(job="j", actor_id="a")


def test_a_failed_jobs_long_message_keeps_its_first_line_and_its_end() -> None:
    message = "Job failed with exit code 1, last logs:\n" + "noise\n" * 5000 + "ValueError: boom"
    short = short_message(message)
    assert len(short) < 1400 and short.startswith("Job failed") and short.endswith("ValueError: boom")


def test_job_list_is_newest_first_and_filtered() -> None:
    jobs = [
        {"submission_id": "a", "status": "FAILED", "entrypoint": "python a.py", "start_time": 1000},
        {"submission_id": "b", "status": "SUCCEEDED", "entrypoint": "python b.py", "start_time": 3000},
        {"submission_id": "c", "status": "FAILED", "entrypoint": "python c.py", "start_time": 2000},
    ]
    result = job_list(jobs, statuses=["FAILED"], entrypoint_contains=None, limit=1, now_s=10)
    assert [j.submission_id for j in result.jobs] == ["c"]
    assert (result.total, result.matching, result.shown) == (3, 2, 1) and result.hints
