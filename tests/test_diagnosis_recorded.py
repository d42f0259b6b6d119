"""The diagnosis over evidence recorded from a real cluster (tests/recorded/, made by ``python -m tests.replay``),
replayed through httpx.MockTransport: the reasoning is tested in milliseconds, on what Ray really answers."""

from __future__ import annotations

import re
import time

import pytest
from mcp import Client
from tests.replay import replayed_server
from tests.support import call_ok, text_of, whole_bytes

from ray_mcp.models import ClusterHealth, JobDiagnosis

DIAGNOSES = ["driver_exception", "actor_init_fails", "task_errors"]


async def diagnose(name: str) -> tuple[JobDiagnosis, str, float]:
    server, replay, recording = replayed_server(name)
    started = time.monotonic()
    async with Client(server) as client:
        result = await call_ok(client, recording["tool"], recording["arguments"])
    took = time.monotonic() - started
    await server.app.aclose()
    assert not replay.missed, f"requests the recording does not hold: {replay.missed}"
    return JobDiagnosis.model_validate(result.structured_content), text_of(result), took


@pytest.mark.parametrize("name", DIAGNOSES)
async def test_a_recorded_failure_is_diagnosed_from_the_recording_alone_in_well_under_a_second(
    name: str,
) -> None:
    diagnosis, text, took = await diagnose(name)
    assert diagnosis.status == "FAILED" and diagnosis.findings
    assert text.splitlines()[0] == diagnosis.verdict  # the verdict first (status, symptom, last link)
    assert took < 5.0, took  # a loaded, shared box; without a cluster it is milliseconds


async def test_a_driver_exception_is_the_verdict_with_its_message_and_line() -> None:
    diagnosis, _, _ = await diagnose("driver_exception")
    top = diagnosis.findings[0]
    assert top.kind == "driver_exception"
    assert "ValueError" in top.title and "learning rate 0.1 is too high" in top.title
    assert "driver_exception.py" in top.title  # the user's frame: file and line


async def test_an_actor_that_fails_in_init_is_the_root_cause_not_the_drivers_actor_died_error() -> None:
    diagnosis, _, _ = await diagnose("actor_init_fails")
    top = diagnosis.findings[0]
    # One chain: where the driver re-raised it, then the constructor where it was first raised.
    assert top.kind == "raised" and "Trainer" in top.title
    assert "CUDA out of memory while building the model" in top.title
    assert "[raised_in] the driver raised ActorDiedError" in " ".join(top.evidence)


async def test_a_driver_that_reraised_a_tasks_error_is_diagnosed_at_the_tasks_own_line() -> None:
    diagnosis, _, _ = await diagnose("task_errors")
    top = diagnosis.findings[0]
    # The verdict names the task's exception and the user's frame inside the task, not the driver's ray.get.
    assert (
        "KeyError" in top.title
        and "has no column 'label'" in top.title
        and "task_errors.py:8 in shard" in top.title
    )
    assert "[raised_in] the driver raised" in " ".join(top.evidence)


async def test_cluster_health_over_a_recorded_cluster_names_each_failed_jobs_cause_and_the_task_errors() -> (
    None
):
    server, replay, recording = replayed_server("cluster_health")
    async with Client(server) as client:
        result = await call_ok(client, recording["tool"], recording["arguments"])
    await server.app.aclose()
    assert not replay.missed, replay.missed
    health = ClusterHealth.model_validate(result.structured_content)
    assert not health.healthy
    kinds = {f.kind: f for f in health.findings}
    assert re.fullmatch(r"\d+ job\(s\) failed recently", kinds["failed_jobs"].title)
    # The text quotes each job's cause; the structured content may cut its quotes to stay within 8 KB with it.
    text = text_of(result)
    evidence = text[text.index(kinds["failed_jobs"].title) :]
    assert "ValueError: learning rate 0.1 is too high" in evidence and "KeyError" in evidence
    assert "CUDA out of memory while building the model" in evidence
    assert whole_bytes(result) <= 8000
    assert len(result.model_dump_json(by_alias=True, exclude_none=True).encode()) <= 8 * 1024  # as sent
    assert any(
        "KeyError" in f.title and "shard" in f.title for f in health.findings
    )  # the task, by its cause


async def test_a_request_the_recording_does_not_hold_fails_the_call_clearly() -> None:
    server, replay, _ = replayed_server("driver_exception")
    async with Client(server) as client:
        result = await client.call_tool("get_job", {"job": "raysubmit_not_recorded"})
    await server.app.aclose()
    assert result.is_error and "HTTP 599" in text_of(result)
    assert replay.missed == ["GET /api/jobs/raysubmit_not_recorded?"]
