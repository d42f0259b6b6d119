"""A task or actor out of file descriptors ("Too many open files", EMFILE) is diagnosed as its process's open-file
limit, with the ulimit to raise: over hand-made evidence in Ray's own JSON shapes, and on the session's head, a
task that runs out of descriptors for real."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mcp import Client
from tests.support import call_ok, run_to_end, text_of

from ray_mcp.diagnosis import explain
from ray_mcp.diagnosis.graph import GraphInputs

NOW = 1_800_000_000_000.0
HEAD = "a" * 56
JOB = "07000000"
EMFILE_TRACEBACK = (
    "ray::open_shards() (pid=4242, ip=10.0.0.1)\n"
    '  File "/app/shards.py", line 12, in open_shards\n'
    "    handles.append(open(path))\n"
    "OSError: [Errno 24] Too many open files: '/data/shard-1021.bin'"
)


def evidence(tasks: list[dict], worker_logs: dict[str, list[str]] | None = None) -> GraphInputs:
    job = {
        "job_id": JOB,
        "submission_id": "raysubmit_emfile",
        "status": "FAILED",
        "entrypoint": "python shards.py",
        "start_time": NOW - 60_000,
        "end_time": NOW - 1000,
    }
    return GraphInputs(
        now_ms=NOW,
        job=job,
        jobs=[job],
        nodes=[{"node_id": HEAD, "node_ip": "10.0.0.1", "state": "ALIVE", "is_head_node": True}],
        actors=[],
        tasks=tasks,
        pgs=[],
        worker_logs=worker_logs or {},
    )


def failed_task(**kw: object) -> dict:
    return {
        "task_id": "c" * 48,
        "name": "open_shards",
        "job_id": JOB,
        "state": "FAILED",
        "attempt_number": 0,
        "type": "NORMAL_TASK",
        "node_id": HEAD,
        "worker_pid": 4242,
        **kw,
    }


def test_a_task_that_raised_too_many_open_files_is_its_file_descriptor_limit() -> None:
    _, chains, _ = explain.explain_job(
        evidence([failed_task(error_type="TASK_EXECUTION_EXCEPTION", error_message=EMFILE_TRACEBACK)])
    )
    found = next(c for c in chains if c.kind == "open_files")
    assert "ran out of file descriptors" in found.cause and "ulimit -n" in found.cause, found.cause
    assert "Too many open files" in " ".join(found.evidence())


def test_a_worker_that_died_with_emfile_in_its_stderr_is_the_same_limit() -> None:
    died = failed_task(
        error_type="WORKER_DIED", error_message="The worker died unexpectedly while executing this task."
    )
    logs = {f"{HEAD}:4242": ["grpc: accept failed: Too many open files", "Fatal Python error: Aborted"]}
    _, chains, _ = explain.explain_job(evidence([died], logs))
    assert chains[0].kind == "open_files", [(c.kind, c.cause) for c in chains]


def test_another_oserror_is_not_called_a_file_descriptor_limit() -> None:
    other = EMFILE_TRACEBACK.replace("[Errno 24] Too many open files", "[Errno 28] No space left on device")
    _, chains, _ = explain.explain_job(
        evidence([failed_task(error_type="TASK_EXECUTION_EXCEPTION", error_message=other)])
    )
    assert chains and all(c.kind != "open_files" for c in chains)


def test_an_actor_whose_death_cause_says_too_many_open_files_is_the_same_limit() -> None:
    actor = {
        "actor_id": "d" * 32,
        "class_name": "ShardReader",
        "job_id": JOB,
        "state": "DEAD",
        "node_id": HEAD,
        "pid": 4343,
        "name": "",
        "required_resources": {},
        "num_restarts": "0",
        "death_cause": {
            "actor_died_error_context": {
                "reason": "WORKER_DIED",
                "pid": 4343,
                "error_message": "The actor died because of an error raised in its creation task, "
                + EMFILE_TRACEBACK.replace("open_shards", "ShardReader.__init__"),
            }
        },
    }
    ev = evidence([])
    ev.actors = [actor]
    _, chains, _ = explain.explain_job(ev)
    assert any(c.kind == "open_files" and "ShardReader" in c.cause for c in chains), [
        (c.kind, c.cause) for c in chains
    ]


# A task that lowers its own worker's soft limit to a few descriptors above what it holds, then opens files past
# it: the kernel answers EMFILE. It restores the limit before it raises, so its worker stays usable.
EMFILE_JOB = textwrap.dedent(
    """\
    import os, resource, ray

    @ray.remote(max_retries=0)
    def open_shards(count):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        handles = []
        try:
            for _ in range(count):
                handles.append(open(os.devnull))
        finally:
            for handle in handles:
                handle.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    ray.init()
    ray.get(open_shards.remote(64))
    """
)


async def test_a_real_task_out_of_file_descriptors_is_diagnosed_as_its_ulimit(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "shards.py").write_text(EMFILE_JOB)
    sid, info = await run_to_end(
        client, entrypoint="python shards.py", runtime_env={"working_dir": str(tmp_path)}
    )
    assert info["status"] == "FAILED", info
    result = await call_ok(client, "diagnose_job", {"job": sid})
    kinds = [f["kind"] for f in (result.structured_content or {})["findings"]]
    text = text_of(result)
    assert "open_files" in kinds and "ulimit -n" in text and "Too many open files" in text, text
