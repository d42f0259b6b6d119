"""A terminated cluster's record, read through a history+ address from a KubeRay History Server.

The History Server is tests/history_server.py: its API as its source defines it, on loopback, serving the
record of a job that failed on a real Ray 2.60 head (no real History Server can run here). The tools run
through the real MCP client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client
from tests.history_server import KIND, NAME, NAMESPACE, SESSION, Record, serve
from tests.support import call_ok, mcp_client, text_of

from ray_mcp.cluster import parse_address
from ray_mcp.doctor import run_checks
from ray_mcp.errors import InvalidArgument
from ray_mcp.settings import Settings


@pytest.fixture
def record() -> Record:
    return Record.recorded()


@pytest.fixture
def history_url(record: Record) -> Iterator[str]:
    with serve(record) as url:
        yield url


@pytest.fixture
async def client(history_url: str) -> AsyncIterator[Client]:
    address = f"history+{history_url}/{NAMESPACE}/{KIND}/{NAME}"
    async with mcp_client(Settings(address=address, allow_destructive=True)) as c:
        yield c


def first_text(result: object) -> str:
    return str(result.content[0].text)  # type: ignore[attr-defined]


async def test_get_job_and_list_jobs_read_the_record_and_say_so_first(client: Client, record: Record) -> None:
    sid = record.failed_job["submission_id"]
    job = await call_ok(client, "get_job", {"job": sid})
    assert first_text(job).startswith("HISTORY:"), first_text(job)
    assert f"rayjob {NAMESPACE}/{NAME}" in first_text(job) and SESSION in first_text(job)
    assert "last job ended 2026-11-30 19:53:04 UTC" in first_text(job)  # the latest end_time of the record
    assert job.structured_content is not None and job.structured_content["status"] == "FAILED"
    assert "FAILED" in text_of(job)
    by_id = await call_ok(client, "get_job", {"job": record.failed_job["job_id"]})
    assert by_id.structured_content is not None and by_id.structured_content["submission_id"] == sid
    jobs = await call_ok(client, "list_jobs", {})
    assert first_text(jobs).startswith("HISTORY:")
    assert sid in text_of(jobs)


async def test_tail_logs_reads_the_driver_log_kept_in_the_record(client: Client, record: Record) -> None:
    result = await call_ok(client, "tail_logs", {"job": record.failed_job["submission_id"]})
    assert first_text(result).startswith("HISTORY:")
    assert "ValueError: learning rate 0.1 is too high for this model" in text_of(result)
    grep = await call_ok(
        client, "tail_logs", {"job": record.failed_job["submission_id"], "grep": "Traceback"}
    )
    assert "Traceback (most recent call last)" in text_of(grep)
    follow = await client.call_tool("tail_logs", {"job": record.failed_job["submission_id"], "follow_s": 2})
    assert follow.is_error and "keeps no GET /api/v0/logs/stream" in text_of(follow)  # a record does not grow


async def test_diagnose_job_names_the_cause_from_the_record(client: Client, record: Record) -> None:
    result = await call_ok(client, "diagnose_job", {"job": record.failed_job["submission_id"]})
    text = text_of(result)
    assert first_text(result).startswith("HISTORY:")
    assert "ValueError" in text and "too high" in text, text
    # what the record does not keep is said to be unread, never taken for a clean check
    assert "needs a live cluster" in text or "History Server keeps no" in text, text


async def test_the_job_resource_of_a_record_says_it_reads_history_first(
    client: Client, record: Record
) -> None:
    sid = record.failed_job["submission_id"]
    read = await client.read_resource(f"ray://jobs/{sid}")
    text = read.contents[0].text  # type: ignore[union-attr]
    assert text.startswith("HISTORY:") and "FAILED" in text and "too high for this model" in text, text


async def test_tasks_of_the_record_are_listed_summarized_and_diagnosed(
    client: Client, record: Record
) -> None:
    sid = record.tasks_job["submission_id"]
    failed = await call_ok(client, "list_tasks", {"job": sid, "state": "FAILED"})
    assert first_text(failed).startswith("HISTORY:")
    assert "TASK_EXECUTION_EXCEPTION" in text_of(failed) or "KeyError" in text_of(failed), text_of(failed)
    summary = await call_ok(client, "summarize_tasks", {"job": sid})
    assert "FAILED" in text_of(summary), text_of(summary)
    diagnosis = await call_ok(client, "diagnose_job", {"job": sid})
    assert "shard 3 has no column 'label'" in text_of(diagnosis), text_of(diagnosis)


async def test_list_events_reads_the_events_kept_in_the_record(client: Client, record: Record) -> None:
    result = await call_ok(client, "list_events", {"source": "JOBS"})
    assert first_text(result).startswith("HISTORY:")
    assert f"Completed a ray job {record.failed_job['submission_id']} with a status FAILED" in text_of(result)


async def test_cluster_status_shows_the_nodes_of_the_record_and_why_they_died(client: Client) -> None:
    result = await call_ok(client, "cluster_status", {})
    text = text_of(result)
    assert first_text(result).startswith("HISTORY:")
    assert "Ray 2.60.0" in text and "1 dead" in text, text
    assert "DEAD: Terminated due to idle (no Ray activity)" in text  # the scale-down, from the record
    assert "Resource use unknown" in text  # the record keeps no load report: no "0 used" taken for a fact
    assert "Host CPU, memory and GPU use unknown" in text  # the History Server's /nodes holds placeholders


async def test_actors_of_the_record_keep_the_death_text_without_a_guessed_reason(client: Client) -> None:
    result = await call_ok(client, "list_actors", {"state": "DEAD"})
    text = text_of(result)
    assert first_text(result).startswith("HISTORY:") and "2 match" in text and "JobSupervisor" in text, text
    assert "User requested to exit the actor" in text and "the record keeps the text only" in text


async def test_a_route_the_record_lacks_answers_that_it_needs_a_live_cluster(client: Client) -> None:
    result = await client.call_tool("serve_status", {})
    assert result.is_error
    text = text_of(result)
    assert (
        text.startswith("HISTORY:") and "keeps no GET /api/serve" in text and "needs a live cluster" in text
    )


async def test_tail_logs_reads_a_nodes_file_named_by_ip_from_the_record(
    client: Client, record: Record
) -> None:
    name = f"job-driver-{record.tasks_job['submission_id']}.log"
    result = await call_ok(client, "tail_logs", {"node": "192.0.2.2", "filename": name})
    assert "shard 3 has no column 'label'" in text_of(result) or "KeyError" in text_of(result), text_of(
        result
    )


async def test_a_write_tool_is_refused_on_a_record_and_nothing_is_sent(
    client: Client, record: Record
) -> None:
    result = await client.call_tool("submit_job", {"entrypoint": "python train.py"})
    assert result.is_error
    assert "read through a KubeRay History Server" in text_of(result) and "nothing was done" in text_of(
        result
    )
    stop = await client.call_tool("stop_job", {"job": record.failed_job["submission_id"]})
    assert stop.is_error and "read through a KubeRay History Server" in text_of(stop)
    assert record.requests == []


async def test_a_session_evicted_from_the_history_servers_cache_is_entered_again(
    client: Client, record: Record
) -> None:
    await call_ok(client, "list_jobs", {})
    record.loaded = False  # the History Server's LRU dropped the session
    await call_ok(client, "list_jobs", {})
    assert record.entered == 2


async def test_an_unknown_record_names_the_list_of_what_the_history_server_keeps(history_url: str) -> None:
    address = f"history+{history_url}/{NAMESPACE}/raycluster/nope"
    async with mcp_client(Settings(address=address)) as c:
        result = await c.call_tool("list_jobs", {})
    assert result.is_error
    assert "no record of raycluster ml/nope" in text_of(result) and "/clusters" in text_of(result)


async def test_a_cluster_the_history_server_reports_live_is_not_called_terminated(
    client: Client, record: Record
) -> None:
    record.live = True  # the History Server passes a live session's requests to its dashboard
    result = await call_ok(client, "list_jobs", {})
    assert "still live" in first_text(result) and "terminated" not in first_text(result)


def test_a_history_address_must_name_namespace_kind_and_name() -> None:
    assert parse_address("history+http://hs:30080/ml/RayJob/train-lr").kind == "history"
    ok = parse_address("history+http://hs:30080/ml/rayjob/train-lr/" + SESSION)
    assert (ok.kind, ok.host, ok.port) == ("history", "hs", 30080)
    for bad in (
        "history+http://hs:30080/ml/train-lr",
        "history+http://hs:30080/ml/pod/x",
        "history+ftp://hs/a/rayjob/b",
    ):
        with pytest.raises(InvalidArgument):
            parse_address(bad)


async def test_with_a_clusters_file_only_the_record_answers_as_history(
    history_url: str, tmp_path: Path
) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text(
        '[clusters.live]\naddress = "http://127.0.0.1:9"\n\n'  # discard port: nothing listens
        f'[clusters.record]\naddress = "history+{history_url}/{NAMESPACE}/{KIND}/{NAME}"\n',
        encoding="utf-8",
    )
    async with mcp_client(Settings(clusters_file=clusters)) as client:
        record = await call_ok(client, "list_jobs", {"cluster": "record"})
        live = await client.call_tool("list_jobs", {"cluster": "live"})
        stop = await client.call_tool("stop_job", {"job": "raysubmit_abc", "cluster": "live"})
        refused = await client.call_tool("stop_job", {"job": "raysubmit_abc", "cluster": "record"})
    assert first_text(record).startswith("HISTORY:")
    assert live.is_error and "HISTORY" not in text_of(live) and "127.0.0.1:9" in text_of(live)
    assert stop.is_error and "changes a cluster, and this one is" not in text_of(stop)
    assert refused.is_error and "changes a cluster, and this one is" in text_of(refused)


async def test_doctor_checks_the_record_and_skips_the_live_cluster_checks(
    history_url: str, record: Record
) -> None:
    address = f"history+{history_url}/{NAMESPACE}/{KIND}/{NAME}"
    checks = {c.name: c for c in await run_checks(Settings(address=address))}
    assert checks["address"].status == "ok" and checks["history"].status == "ok", checks
    assert f"keeps {len(record.jobs)} job(s)" in checks["history"].message
    assert checks["dashboard"].status == "skip" and "history+" in checks["dashboard"].message
    missing = {c.name: c for c in await run_checks(Settings(address=address.replace(NAME, "gone")))}
    assert missing["history"].status == "FAIL" and "no record of rayjob ml/gone" in missing["history"].message


async def test_a_history_server_that_does_not_answer_is_named_not_the_cluster() -> None:
    async with mcp_client(Settings(address=f"history+http://127.0.0.1:9/{NAMESPACE}/{KIND}/{NAME}")) as c:
        result = await c.call_tool("list_jobs", {})
    assert result.is_error and "Cannot reach the KubeRay History Server at http://127.0.0.1:9" in text_of(
        result
    )
    assert "If the cluster is gone" not in text_of(result)
