from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Iterator

import anyio
import httpx
import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import TERMINAL, call_ok, mcp_client, run_to_end, submit, text_of, wait_until

from ray_mcp.answers.targets import LOG_SOURCES, LOG_TARGET_ARGS, LogTarget
from ray_mcp.errors import InvalidArgument
from ray_mcp.local_head import LocalHead
from ray_mcp.models import LogTail
from ray_mcp.settings import Settings
from ray_mcp.tools.logs import tail_logs

PY = sys.executable
N_LINES = 200_000

BIG = textwrap.dedent(
    f"""
    import sys
    w = sys.stdout.write
    w("MARKER-NEAR-START\\n")
    for i in range({N_LINES}):
        w(f"line {{i:06d}} " + "x" * 40 + "\\n")
    """
)


async def _big_job(client: Client) -> str:
    script = BIG.replace('"', '\\"')
    sid, info = await run_to_end(client, entrypoint=f'{PY} -c "{script}"')
    assert info["status"] == "SUCCEEDED", info
    return sid


async def test_a_200000_line_log_tails_to_exactly_the_last_lines_and_grep_finds_a_marker_near_the_start(
    client: Client,
) -> None:
    sid = await _big_job(client)

    result = await call_ok(client, "tail_logs", {"job": sid, "lines": 50})
    section = LogTail.model_validate(result.structured_content).sections[0]
    assert section.lines == [f"line {i:06d} " + "x" * 40 for i in range(N_LINES - 50, N_LINES)]
    assert section.lines_shown == 50 and section.more_before
    assert section.filename == f"job-driver-{sid}.log" and section.node_id
    text = text_of(result)
    assert f"job-driver-{sid}.log on node {section.node_id}" in text
    assert "earlier lines left out" in text and "raise lines" in text

    # the byte budget wins over the line count, and says what it cut
    result = await call_ok(client, "tail_logs", {"job": sid, "lines": 2000, "max_bytes": 4096})
    section = LogTail.model_validate(result.structured_content).sections[0]
    shown_bytes = sum(len(line.encode()) + 1 for line in section.lines)
    # 52 characters + newline a line; the whole-answer share (LOG_WHOLE_SHARE) may leave out a few more for
    # the headers, the result's envelope and the hint that says so
    assert shown_bytes <= 4096 and 4096 // 53 - 6 <= section.lines_shown <= 4096 // 53, section.lines_shown
    assert section.lines[-1] == f"line {N_LINES - 1:06d} " + "x" * 40
    assert section.bytes_left_out == (2001 - section.lines_shown) * 53  # incl. the line that shows more exist
    assert "not shown" in text_of(result) and "raise max_bytes" in text_of(result)

    result = await call_ok(client, "tail_logs", {"job": sid, "grep": "^MARKER-NEAR", "context": 1})
    section = LogTail.model_validate(result.structured_content).sections[0]
    assert section.matches == 1 and section.scan_complete
    assert section.match_numbers is not None and len(section.match_numbers) == 1
    number = section.match_numbers[0]
    assert number < 10 and section.line_numbers == [number - 1, number, number + 1]
    assert section.lines[1] == "MARKER-NEAR-START" and f"{number}: MARKER-NEAR-START" in text_of(result)
    assert section.scanned_lines is not None and section.scanned_lines > N_LINES
    assert section.lines_left_out == section.scanned_lines - 3
    assert "1 matching line(s)" in text_of(result) and "whole file" in text_of(result)


async def test_grep_keeps_the_last_matches_and_says_how_many_it_found(client: Client) -> None:
    sid = await _big_job(client)
    result = await call_ok(client, "tail_logs", {"job": sid, "grep": r"line 1\d{4}0 ", "lines": 5})
    section = LogTail.model_validate(result.structured_content).sections[0]
    assert section.matches == 10_000 and section.lines_shown == 5
    assert section.lines[-1].startswith("line 199990 ")
    assert "make the regex more specific" in text_of(result)


ACTOR_JOB = textwrap.dedent(
    """
    import time, ray
    ray.init()
    @ray.remote(num_cpus=0)
    class Marker:
        def hello(self):
            print("actor-marker-31337", flush=True)
            return 1
    a = Marker.options(name="marker_actor", namespace="tests").remote()
    ray.get(a.hello.remote())
    print("driver-ready", flush=True)
    time.sleep(300)
    """
)


@pytest.fixture
def own_head() -> Iterator[LocalHead]:
    """A head of this test's own. Late in a full run, on the session head, the actor's stdout read by actor_id
    twice never showed the line the actor had printed within 60 s (CI's last run and a run here, both after
    ~1,100 tests); alone, on a fresh head or on one with 4,000 other workers' log files, it shows at once."""
    with local_head(num_cpus=1) as head:
        yield head


@pytest.mark.live
async def test_actor_logs_are_read_back_by_actor_id(own_head: LocalHead) -> None:
    script = ACTOR_JOB.replace('"', '\\"')
    async with mcp_client(Settings(address=own_head.dashboard_url)) as client:
        sid = await submit(client, entrypoint=f'{PY} -c "{script}"')
        try:
            await _actor_logs_read_back(client, own_head.dashboard_url, sid)
        finally:
            await client.call_tool("stop_job", {"job": sid})


async def _actor_logs_read_back(client: Client, dashboard_url: str, sid: str) -> None:
    # The driver prints "driver-ready" once the actor has printed its marker; a driver that ended before
    # that fails here with its own log rather than as a bare timeout.
    with anyio.fail_after(180):
        while True:
            info = await wait_until(client, sid, {"RUNNING", *TERMINAL})
            tail = await call_ok(client, "tail_logs", {"job": sid, "lines": 50})
            driver = LogTail.model_validate(tail.structured_content).sections[0].lines
            if "driver-ready" in driver:
                break
            assert info["status"] == "RUNNING", driver
            await anyio.sleep(0.5)
    # The State API lists a new actor a moment after it runs; it cuts its list to ``limit`` before it
    # filters by name, so ask for the ALIVE ones (filtered at the GCS), all of them.
    by_name = [
        *(("filter_keys", k) for k in ("state", "name")),
        *(("filter_predicates", "=") for _ in range(2)),
        *(("filter_values", v) for v in ("ALIVE", "marker_actor")),
        ("limit", "10000"),
    ]
    rows: list[dict[str, str]] = []
    with anyio.fail_after(60):
        async with httpx.AsyncClient(base_url=dashboard_url, timeout=30) as http:
            while not rows:
                r = await http.get("/api/v0/actors", params=by_name)
                rows = [a for a in r.json()["data"]["result"]["result"] if a["state"] == "ALIVE"]
                await anyio.sleep(0.5)
    actor_id = rows[0]["actor_id"]
    last = ""
    try:
        with anyio.fail_after(60):
            while True:  # the worker's output reaches its log file a little later
                result = await call_ok(client, "tail_logs", {"actor_id": actor_id, "stream": "out"})
                last = text_of(result)
                if "actor-marker-31337" in last:
                    break
                await anyio.sleep(0.5)
    except TimeoutError:
        raise AssertionError(f"the actor's stdout never showed its line; the last answer:\n{last}") from None
    section = LogTail.model_validate(result.structured_content).sections[0]
    assert section.stream == "out" and section.node_id and actor_id in section.source
    both = await call_ok(client, "tail_logs", {"actor_id": actor_id})
    assert [s["stream"] for s in both.structured_content["sections"]] == ["out", "err"]


async def test_follow_streams_new_lines_as_progress_notifications(client: Client) -> None:
    # A line every 20 ms: lines printed between the tail's read and the stream's start must not be lost.
    script = "import time\nfor i in range(1000):\n    print(f'beat-{i}', flush=True)\n    time.sleep(0.02)\n"
    sid = await submit(client, entrypoint=f'{PY} -c "{script}"')
    try:
        with anyio.fail_after(180):
            while True:
                await wait_until(client, sid, {"RUNNING", "SUCCEEDED"})
                if "beat-" in text_of(await call_ok(client, "tail_logs", {"job": sid, "lines": 1})):
                    break
                await anyio.sleep(0.3)
        notes: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            notes.append(message or "")

        result = await call_ok(
            client, "tail_logs", {"job": sid, "lines": 1000, "follow_s": 3}, progress_callback=on_progress
        )
        section = LogTail.model_validate(result.structured_content).sections[0]
        assert notes and all("beat-" in n for n in notes)
        assert section.followed_s == 3
        beats = [line for line in section.lines if line.startswith("beat-")]
        numbers = [int(b.split("-")[1]) for b in beats]
        assert numbers == list(range(numbers[0], numbers[-1] + 1))  # no line twice, none missing
        assert section.new_lines and f"{section.new_lines} new line(s)" in text_of(result), text_of(result)
    finally:
        await client.call_tool("stop_job", {"job": sid})


async def test_bad_log_targets_get_clear_errors_and_the_next_call_still_works(client: Client) -> None:
    status = (await call_ok(client, "cluster_status", {})).structured_content
    head = next(n for n in status["nodes"] if n["is_head"])
    cases = [
        ({"job": "raysubmit_nosuchjob"}, ["raysubmit_nosuchjob", "list_jobs"]),
        ({"actor_id": "ab" * 16}, ["ab" * 16, "list_actors"]),
        ({"actor_id": "not-hex"}, ["not an actor id", "list_actors"]),
        ({"node": "10.255.255.1", "filename": "raylet.out"}, ["10.255.255.1", "cluster_status"]),
        ({"node": head["node_id"], "filename": "nosuch.log"}, ["nosuch.log", "raylet.out"]),
        ({"node": head["node_id"], "pid": 999_999}, ["999999", "list_actors"]),
        ({"filename": "raylet.out"}, ["needs node", "cluster_status"]),
        ({}, ["exactly one of"]),
        ({"job": "x", "actor_id": "y"}, ["got job, actor_id"]),
        ({"job": "x", "grep": "(unclosed"}, ["not a valid regular expression"]),
        ({"job": "x", "lines": -5}, ["lines"]),
    ]
    for args, needles in cases:
        result = await client.call_tool("tail_logs", args)
        assert result.is_error, args
        for needle in needles:
            assert needle in text_of(result), (args, needle, text_of(result))
    ok = await call_ok(client, "tail_logs", {"node": head["ip"], "filename": "raylet.out", "lines": 5})
    section = LogTail.model_validate(ok.structured_content).sections[0]
    assert (
        section.filename == "raylet.out" and section.node_id == head["node_id"] and section.lines_shown == 5
    )


async def test_a_log_of_quotes_backslashes_and_control_characters_stays_within_8_kb_as_sent(
    client: Client,
) -> None:
    script = "for i in range(500): print(chr(34) * 40 + chr(92) * 40 + chr(1) * 20 + chr(0x200B) * 20 + f' line {i}')"
    job, info = await run_to_end(client, entrypoint=f'python -c "{script}"')
    assert info["status"] == "SUCCEEDED"
    result = await call_ok(client, "tail_logs", {"job": job})
    assert len(result.model_dump_json(by_alias=True, exclude_none=True).encode()) <= 8_000
    text = text_of(result)
    assert "line 499" in text and "longer as sent" in text  # the newest lines, and why there are fewer
    tail = LogTail.model_validate(result.structured_content)
    assert tail.sections[0].lines[-1].endswith("line 499") and tail.sections[0].more_before


def test_each_log_target_of_the_table_is_an_argument_of_tail_logs_and_one_kind_of_log_target() -> None:
    published = list(inspect.signature(tail_logs).parameters)
    assert published[3 : 3 + len(LOG_TARGET_ARGS)] == [a.name for a in LOG_TARGET_ARGS]
    for source in LOG_SOURCES:
        assert source.names in (tail_logs.__doc__ or "")
        assert source.sample is not None, f"the row {source.name} has no sample value"
        target = LogTarget(
            **{source.name: source.sample, **({"node": "10.0.0.1"} if source.on_a_node else {})}
        )
        assert target.kind == source.name
    with pytest.raises(InvalidArgument, match="needs one log target, got job, filename"):
        LogTarget(job="raysubmit_1", filename="raylet.out", node="10.0.0.1")
