from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import anyio
from mcp import Client
from tests.support import TERMINAL, call_ok, run_to_end, submit, text_of, wait_until

from ray_mcp.models import JobChange, JobInfo, JobList, JobSubmitted, JobWait, RuntimeEnvSpec

PY = sys.executable


async def test_job_tools_are_listed_with_their_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("get_job", "list_jobs", "wait_for_job", "tail_logs"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("submit_job", "stop_job"):
        a = tools[name].annotations
        assert a.read_only_hint is False and a.destructive_hint is False, name
    assert tools["delete_job"].annotations.destructive_hint is True
    schema = tools["submit_job"].input_schema["properties"]["runtime_env"]
    assert schema["type"] == "object"  # ray-mcp checks the fields itself, with messages naming the fix
    assert all(field in schema["description"] for field in RuntimeEnvSpec.model_fields)


async def test_submit_job_uploads_a_local_working_dir_whose_helper_module_the_job_imports(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "helper_mod.py").write_text("VALUE = 'helper-says-42'\n")
    (tmp_path / "main.py").write_text(
        textwrap.dedent(
            """
            import ray, helper_mod
            ray.init()
            print("imported", helper_mod.VALUE, flush=True)
            """
        )
    )
    result = await call_ok(
        client, "submit_job", {"entrypoint": f"{PY} main.py", "runtime_env": {"working_dir": str(tmp_path)}}
    )
    submitted = JobSubmitted.model_validate(result.structured_content)
    assert submitted.status in {"PENDING", "RUNNING"} and submitted.uploaded == [str(tmp_path.resolve())]
    info = JobInfo.model_validate(await wait_until(client, submitted.submission_id, TERMINAL))
    assert info.status == "SUCCEEDED", info.message
    assert info.runtime_env and str(info.runtime_env["working_dir"]).startswith("gcs://")
    logs = await call_ok(client, "tail_logs", {"job": submitted.submission_id})
    assert "imported helper-says-42" in text_of(logs)
    # the driver called ray.init, so the job also has a Ray job id, and get_job accepts it
    assert info.job_id
    by_job_id = await call_ok(client, "get_job", {"job": info.job_id})
    assert by_job_id.structured_content["submission_id"] == submitted.submission_id


async def test_submit_job_passes_env_vars_and_metadata_to_the_job(client: Client) -> None:
    sid, info = await run_to_end(
        client,
        # printed reversed: the value itself is a secret of the job, masked in every output
        entrypoint=f"{PY} -c \"import os; print('greeting=' + os.environ['GREETING'][::-1])\"",
        runtime_env={"env_vars": {"GREETING": "hola-env"}},
        metadata={"owner": "tests"},
    )
    assert info["status"] == "SUCCEEDED"
    assert info["metadata"]["owner"] == "tests"
    assert "greeting=vne-aloh" in text_of(await call_ok(client, "tail_logs", {"job": sid}))


async def test_wait_for_job_sends_progress_with_the_status_and_the_newest_log_line(client: Client) -> None:
    script = "import time\nfor i in range(6):\n    print(f'tick-{i}', flush=True)\n    time.sleep(0.7)\n"
    sid = await submit(client, entrypoint=f'{PY} -c "{script}"')
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    result = await call_ok(
        client, "wait_for_job", {"job": sid, "timeout_s": 120}, progress_callback=on_progress
    )
    wait = JobWait.model_validate(result.structured_content)
    assert wait.finished and not wait.timed_out and wait.job.status == "SUCCEEDED"
    assert len(notes) >= 2
    assert all(total == 120 for _, total, _ in notes)
    assert [p for p, _, _ in notes] == sorted(p for p, _, _ in notes)
    assert any(m and m.startswith("RUNNING") for _, _, m in notes)
    assert any(m and "tick-" in m for _, _, m in notes)
    assert wait.last_log_line == "tick-5"


async def test_a_sleeper_is_waited_for_listed_stopped_and_a_second_stop_is_a_no_op(client: Client) -> None:
    sid = await submit(
        client, entrypoint=f"{PY} -c \"import time; print('sleeping', flush=True); time.sleep(300)\""
    )
    await wait_until(client, sid, {"RUNNING"})
    waited = await call_ok(client, "wait_for_job", {"job": sid, "timeout_s": 1})
    wait = JobWait.model_validate(waited.structured_content)
    assert wait.timed_out and not wait.finished and wait.job.status == "RUNNING"
    assert "Timed out" in text_of(waited) and "still RUNNING" in text_of(waited)

    refused = await client.call_tool("delete_job", {"job": sid})
    assert refused.is_error and "stop_job first" in text_of(refused)

    listed = JobList.model_validate(
        (
            await call_ok(client, "list_jobs", {"status": ["RUNNING"], "entrypoint_contains": "SLEEPING"})
        ).structured_content
    )
    assert sid in [j.submission_id for j in listed.jobs]
    assert listed.total >= listed.matching >= listed.shown >= 1

    stopped = JobChange.model_validate((await call_ok(client, "stop_job", {"job": sid})).structured_content)
    assert stopped.done and stopped.action == "stop"
    info = await wait_until(client, sid, {"STOPPED"})
    assert info["end_time"]
    again = await call_ok(client, "stop_job", {"job": sid})
    assert again.structured_content["done"] is False
    assert "already ended (STOPPED)" in text_of(again)


async def test_list_jobs_is_newest_first_limited_and_counts_what_it_left_out(client: Client) -> None:
    first, _ = await run_to_end(client, entrypoint="echo list-order-a")
    second, _ = await run_to_end(client, entrypoint="echo list-order-b")
    result = await call_ok(client, "list_jobs", {"entrypoint_contains": "list-order-", "limit": 1})
    listed = JobList.model_validate(result.structured_content)
    assert listed.matching == 2 and listed.shown == 1
    assert listed.jobs[0].submission_id == second
    assert "1 older matching jobs not shown" in text_of(result)
    assert first not in text_of(result)


async def test_delete_job_needs_the_confirm_token_then_deletes_a_finished_job(client: Client) -> None:
    sid, info = await run_to_end(client, entrypoint="echo to-be-deleted")
    assert info["status"] == "SUCCEEDED"
    dry = JobChange.model_validate((await call_ok(client, "delete_job", {"job": sid})).structured_content)
    assert dry.dry_run and not dry.done and dry.confirm_token
    await call_ok(client, "get_job", {"job": sid})  # still there
    wrong = await client.call_tool("delete_job", {"job": sid, "confirm": "confirm-000000000000000000000000"})
    assert wrong.is_error and "does not match" in text_of(wrong)
    done = await call_ok(client, "delete_job", {"job": sid, "confirm": dry.confirm_token})
    assert done.structured_content["done"] is True
    gone = await client.call_tool("get_job", {"job": sid})
    assert gone.is_error and "list_jobs" in text_of(gone)


async def test_a_failing_job_shows_failed_its_error_type_and_the_traceback_in_tail_logs(
    client: Client,
) -> None:
    script = "def train():\n    raise ValueError('loss is nan at step 7')\ntrain()\n"
    sid, info = await run_to_end(client, entrypoint=f'{PY} -c "{script}"')
    assert info["status"] == "FAILED"
    assert info["error_type"] == "JOB_ENTRYPOINT_COMMAND_ERROR"
    assert info["driver_exit_code"] == 1
    got = await call_ok(client, "get_job", {"job": sid})
    assert len(text_of(got)) < 4000 and "tail_logs" in text_of(got)
    tail = await call_ok(client, "tail_logs", {"job": sid, "lines": 20})
    lines = tail.structured_content["sections"][0]["lines"]
    assert lines[-1] == "ValueError: loss is nan at step 7"
    assert any(line.startswith("Traceback") for line in lines)


async def test_bad_input_gets_a_clear_error_and_nothing_is_submitted(client: Client, tmp_path: Path) -> None:
    before = (await call_ok(client, "list_jobs", {"limit": 1})).structured_content["total"]
    cases = [
        ({"runtime_env": {"workdir": "."}}, ["unknown key runtime_env.workdir", "working_dir"]),
        ({"runtime_env": {"working_dir": str(tmp_path / "missing")}}, ["does not exist", "working_dir"]),
        ({"runtime_env": {"env_vars": {"N": 3}}}, ["runtime_env.env_vars.N", "STRING values"]),
        ({"runtime_env": {"pip": 5}}, ["runtime_env.pip", "requirement strings"]),
        ({"runtime_env": {"config": {"timeout": 5}}}, ["runtime_env.config", "setup_timeout_seconds"]),
    ]
    for args, needles in cases:
        result = await client.call_tool("submit_job", {"entrypoint": "echo never", **args})
        assert result.is_error, args
        text = text_of(result)
        assert "nothing was submitted" in text, text
        for needle in needles:
            assert needle in text, (needle, text)
    for name in ("get_job", "wait_for_job", "stop_job", "delete_job"):
        result = await client.call_tool(name, {"job": "raysubmit_doesnotexist"})
        assert (
            result.is_error and "raysubmit_doesnotexist" in text_of(result) and "list_jobs" in text_of(result)
        )
    after = await call_ok(client, "list_jobs", {"limit": 1})
    assert after.structured_content["total"] == before
    with anyio.fail_after(5):
        assert not (await client.call_tool("list_jobs", {})).is_error


async def test_a_job_whose_driver_never_connected_to_ray_has_no_topology_and_says_why(client: Client) -> None:
    job, info = await run_to_end(client, entrypoint="python -c \"print('no ray.init here')\"")
    assert info["status"] == "SUCCEEDED"
    result = await client.call_tool("job_topology", {"job": job})
    assert result.is_error
    text = text_of(result)
    assert "never connected to Ray" in text and "tail_logs" in text
    assert "has not started" not in text  # it ran to the end
