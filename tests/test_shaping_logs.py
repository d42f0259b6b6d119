"""Pure shaping of jobs and logs: budgets, grep scanning, runtime_env checks (no Ray needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ray_mcp import models
from ray_mcp.answers.targets import LOG_SOURCES, LogTarget
from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.redaction import escape_controls, redact_tree
from ray_mcp.limits import LOG_WHOLE_SHARE
from ray_mcp.models import LogSection, LogTail
from ray_mcp.shaping import grep as log_grep
from ray_mcp.shaping.common import fit_log, sent_bytes
from ray_mcp.shaping.jobs import job_info, job_list, render_job, short_message
from ray_mcp.shaping.logs import (
    render_log_section,
    render_log_tail,
    tail_section,
    without_colour,
)
from ray_mcp.sources.runtime_env import check_runtime_env

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


@settings(deadline=None)  # one byte at a time on a loaded machine can take more than 200 ms
@given(st.integers(1, 4096), st.integers(0, 3))
def test_grep_finds_the_same_lines_whatever_the_chunking(chunk: int, context: int) -> None:
    text = "".join(f"{'ERROR' if i % 37 == 5 else 'ok'} {i}\n" for i in range(500))
    scanner = log_grep.GrepScanner(log_grep.compile_grep("^ERROR"), context=context, keep=10_000)
    data = text.encode()
    for start in range(0, len(data), chunk):
        scanner.feed(data[start : start + chunk])
    scanner.finish()
    expected = [i + 1 for i in range(500) if i % 37 == 5]
    assert scanner.matches == len(expected) and scanner.line_no == 500
    assert [n for n, _, m in scanner.out if m] == expected
    wanted = sorted({n + d for n in expected for d in range(-context, context + 1) if 1 <= n + d <= 500})
    assert [n for n, _, _ in scanner.out] == wanted


@settings(deadline=None)
@given(
    st.lists(st.text(alphabet="ab\u00e9 x", max_size=40), max_size=40),
    st.sampled_from(["a", "^a", "b$", "^$", "a+b", "(a|b)+x", "[^a ]x", "(?i)A.B", "é", "a*"]),
    st.integers(1, 97),
    st.integers(0, 2),
)
def test_grep_matches_exactly_the_lines_pythons_re_matches(
    raw: list[str], grep: str, chunk: int, context: int
) -> None:
    scanner = log_grep.GrepScanner(log_grep.compile_grep(grep), context=context, keep=10_000, piece=4096)
    data = "".join(f"{t}\n" for t in raw).encode()
    for start in range(0, len(data), chunk):
        scanner.feed(data[start : start + chunk])
    scanner.finish()
    expected = [i + 1 for i, t in enumerate(raw) if re.search(grep, t)]
    assert [n for n, _, m in scanner.out if m] == expected
    assert scanner.line_no == len(raw)
    shown = {n: t for n, t, _ in scanner.out}
    assert all(shown[n] == raw[n - 1] for n in shown)


def test_grep_keeps_a_line_without_newline_cut_and_matches_it_piece_by_piece() -> None:
    scanner = log_grep.GrepScanner(
        log_grep.compile_grep("needle"), context=0, keep=10, line_cap=100, piece=1000
    )
    line = b"x" * 2500 + b"needle" + b"y" * 2500
    for start in range(0, len(line), 333):
        scanner.feed(line[start : start + 333])
    scanner.feed(b"\nlast needle\n")
    scanner.finish()
    assert scanner.matches == 2 and scanner.line_no == 2 and scanner.long_lines == 1
    first = scanner.out[0][1]
    assert first.startswith("x" * 100) and first.endswith(f"…[line of {len(line)} bytes, cut at 100]")
    assert len(scanner._partial) == 0 and scanner.bytes == len(line) + 13


@pytest.mark.parametrize(
    ("grep", "construct"),
    [
        ("(a)\\1", "backreferences"),
        ("(?P<w>a)(?P=w)", "backreferences"),
        ("foo(?=bar)", "lookahead"),
        ("(?<!x)y", "lookbehind"),
        ("(?>ab)", "atomic groups"),
        ("a++", "possessive"),
    ],
)
def test_grep_names_the_construct_re2_lacks_and_what_to_write_instead(grep: str, construct: str) -> None:
    with pytest.raises(InvalidArgument, match=construct) as caught:
        log_grep.compile_grep(grep)
    message = str(caught.value)
    assert repr(grep) in message and ("instead" in message or "not needed" in message)


def test_grep_rejects_an_invalid_or_huge_pattern_with_a_clear_error() -> None:
    with pytest.raises(InvalidArgument, match="not a valid regular expression"):
        log_grep.compile_grep("(unclosed")
    with pytest.raises(InvalidArgument, match="at most 1000"):
        log_grep.compile_grep("x" * 1001)
    assert log_grep.compile_grep("end\\Z").search(b"the end") is not None  # Python's \Z is RE2's \z


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
    assert LogTarget(pid=3, node="10.0.0.1").kind == "pid"
    with pytest.raises(InvalidArgument, match="needs node"):
        LogTarget(filename="raylet.out")
    with pytest.raises(InvalidArgument, match="node goes with") as refused:
        LogTarget(job="j", node="10.0.0.1")
    # every source read on a node is named, whatever the table holds (pid and filename among them)
    on_a_node = {a.name for a in LOG_SOURCES if a.on_a_node}
    assert {"pid", "filename"} <= on_a_node and all(name in str(refused.value) for name in on_a_node)
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


# Log text at its worst on the wire: quotes and backslashes (2 bytes each in JSON), control and invisible
# characters (shown escaped: 5-7 bytes each), multi-byte letters.
NASTY = st.text(
    st.sampled_from(['"', "\\", "\x01", "\x1b", "\u200b", "\x85", "é", "a", " ", "漢"]), max_size=400
)


@settings(max_examples=120, deadline=None)
@given(
    sections=st.lists(st.lists(NASTY, min_size=1, max_size=60), min_size=1, max_size=2),
    max_bytes=st.sampled_from([256, 1_000, 3_500, 20_000]),
    grep=st.booleans(),
)
def test_a_tail_as_sent_stays_within_its_share_of_max_bytes_and_keeps_the_newest_lines(
    sections: list[list[str]], max_bytes: int, grep: bool
) -> None:
    tail = LogTail(
        sections=[
            LogSection(
                source="driver log",
                filename="job-driver.log",
                lines=lines,
                lines_shown=len(lines),
                more_before=False,
                **(
                    {
                        "grep": "x",
                        "matches": len(lines),
                        "line_numbers": list(range(1, len(lines) + 1)),
                        "match_numbers": list(range(1, len(lines) + 1)),
                    }
                    if grep
                    else {}
                ),
            )
            for lines in sections
        ]
    )
    # the edge's fitter, given the budget the tail's answer sets (tail_logs' max_bytes)
    fitted, said = fit_log(tail.within(int(max_bytes * LOG_WHOLE_SHARE)), render_log_tail)
    assert said == render_log_tail(fitted)
    # as the middleware sends it: every string's control characters escaped, then JSON
    escaped = redact_tree(fitted.model_dump(mode="json", exclude_none=True))
    sent = sent_bytes(escaped, escape_controls(said))
    # within the share, unless only the headers are left (a small max_bytes and long headers)
    assert sent <= int(max_bytes * LOG_WHOLE_SHARE) or not any(s.lines for s in fitted.sections)
    for before, after in zip(tail.sections, fitted.sections, strict=True):
        assert after.lines_shown == len(after.lines)
        kept = [line for line in after.lines if "… [cut:" not in line]
        assert kept == before.lines[len(before.lines) - len(kept) :]  # the newest, in order
        if after.line_numbers is not None:
            assert len(after.line_numbers) == len(after.lines)
            assert set(after.match_numbers or []) <= set(after.line_numbers)
    if fitted.sections != tail.sections:  # one note, the last, says what the edge left out or cut
        assert "longer as sent" in fitted.hints[-1] and said.count("longer as sent") == 1


@given(
    log=st.lists(st.sampled_from(["beat", "x", "error", "tick 1", ""]), max_size=60),
    data=st.data(),
)
def test_a_follow_keeps_every_line_appended_between_the_tail_and_the_stream(
    log: list[str], data: st.DataObject
) -> None:
    """Whatever the timing: the tail read T lines, the stream opened at F >= T lines with its last N (F - T < N:
    the gap is shorter than the overlap), then more came. What follows the tail is every line after T, at
    worst with a line repeated word for word shown twice, never one lost."""
    from ray_mcp.answers.logs import after_overlap

    encoded = [f"{line}\n".encode() for line in log]
    read = data.draw(st.integers(0, len(log)))
    opened = data.draw(st.integers(read, len(log)))
    overlap = data.draw(st.integers(max(1, opened - read + 1), 200))
    tail = b"".join(encoded[:read])
    stream = b"".join(encoded[max(0, opened - overlap) :])
    new = after_overlap(tail, stream)
    assert new.endswith(b"".join(encoded[read:]))
    if len(set(log)) == len(log):  # lines all different: exactly the new ones
        assert new == b"".join(encoded[read:])


def test_a_failed_jobs_message_has_no_colour_codes_and_its_end_starts_at_a_tracebacks_first_line() -> None:
    frames = "".join(
        f'  File "/app/train.py", line {i}, in step\n    loss = model(x)\n           ^^^^^^^^\n'
        for i in range(60)
    )
    message = (
        "\x1b[36m(train pid=1)\x1b[0m Job failed\n"
        + "noise line\n" * 40
        + "Traceback (most recent call last):\n"
        + frames[-700:]
        + "Traceback (most recent call last):\n"
        + frames[:200]
        + "ValueError: lr is too high"
    )
    short = short_message(message)
    assert "\x1b[" not in short and "^^^" not in short, short
    head, tail = short.split("tail_logs has the whole log]…\n")
    assert head.startswith("(train pid=1) Job failed")
    assert tail.startswith("Traceback (most recent call last):") and tail.endswith(
        "ValueError: lr is too high"
    )


def test_a_logs_colour_codes_are_not_shown_but_the_diagnosis_reads_them() -> None:
    """Before: Ray's coloured "(pid=...)" prefixes reached tail_logs and the job resource, escaped on the wire
    as "\\x1b[36m" (issue 27 item 8). The diagnosis keeps them: they mark what Ray forwarded from workers."""
    log = b"\x1b[36m(parse_shard pid=41)\x1b[0m ValueError: bad header\n\x1b[33m(raylet)\x1b[0m done\n"
    section = tail_section(log, lines=10, max_bytes=1000, complete=True, base=BASE)
    assert section.lines[0].startswith("\x1b[36m(parse_shard pid=41)")
    shown = without_colour(LogTail(sections=[section], hints=[]))
    assert shown.sections[0].lines == ["(parse_shard pid=41) ValueError: bad header", "(raylet) done"]
    assert "\\x1b" not in render_log_tail(shown) and "\x1b" not in render_log_tail(shown)


def test_a_failed_jobs_text_shows_the_end_of_its_message_where_the_exception_is() -> None:
    """Before: get_job, wait_for_job and the job resource cut Ray's message at 500 characters from its start,
    which showed the frames of worker.py above the error and never the error (issue 27 item 8)."""
    message = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
        + '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 3009, in get\n'
        "    values, debugger_breakpoint = worker.get_objects(\n"
        * 3
        + "ray.exceptions.RayTaskError(ValueError): ray::parse_shard() (pid=18892, ip=192.0.2.2)\n"
        '  File "/jobs/failed.py", line 11, in parse_shard\n'
        '    raise ValueError(f"shard {n} has a bad header")\n'
        "ValueError: shard 3 has a bad header"
    )
    job = job_info({"submission_id": "raysubmit_1", "status": "FAILED", "message": message}, 0)
    first = render_job(job).splitlines()[0]
    assert first.startswith('Job raysubmit_1: FAILED — "Job entrypoint command failed with exit code 1'), (
        first
    )
    assert first.endswith(
        'line 11, in parse_shard\\n    raise ValueError(f\\"shard {n} has a bad header\\")'
        '\\nValueError: shard 3 has a bad header"'
    ), first
    assert len(first) < 700 and job.message == message  # the structured message keeps it all
