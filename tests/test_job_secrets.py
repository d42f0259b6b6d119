"""Secret learning is an explicit step on job reads (answers/secrets.py), not a side effect of listing: a
source only reads, and the answers that show what a job may have written (a log tail, a task's error read
through a State API list) teach the redactor that job's env_vars first, through the call's read scope.

The dashboard is an httpx.MockTransport standing in for a cluster whose job holds a secret in its env_vars,
prints it to its log and quotes it in a task's error (the live version: tests/test_leaks.py)."""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import httpx
from tests.replay import Body
from tests.support import call_ok, mcp_client, text_of

from ray_mcp.answers.secrets import JOB_SECRETS_TTL_S, UNLISTED_RECHECK_S, JobSecrets
from ray_mcp.guard.redaction import SECRETS, job_owner
from ray_mcp.settings import Settings
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.scope import read_scope

JOB_ID = "01000000"
TASK_ID = "ab" * 24
NODE_ID = "cd" * 28


def envelope(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    listed = {"total": n, "num_after_truncation": n, "num_filtered": n, "result": rows}
    return {"result": True, "msg": "", "data": {"result": listed}}


class Cluster:
    """A dashboard whose one job has ``secret`` in its env_vars, and prints it (log, task error)."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:10]
        self.url = f"http://cluster-{tag}:8265"
        self.secret = f"tok{tag}secretvalue"
        self.seen: Counter[str] = Counter()
        self.fail_jobs = False  # the job list answers 500

    def answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.seen[path] += 1
        if path == "/api/jobs/" and self.fail_jobs:
            return httpx.Response(500, text="the job list is unavailable")
        if path == "/api/jobs/":
            job = {
                "type": "SUBMISSION",
                "job_id": JOB_ID,
                "submission_id": "raysubmit_secrets",
                "status": "FAILED",
                "entrypoint": "python train.py",
                "runtime_env": {"env_vars": {"API_TOKEN": self.secret}},
                "driver_node_id": NODE_ID,
            }
            return httpx.Response(200, json=[job])
        if path == "/api/v0/tasks":
            task = {
                "task_id": TASK_ID,
                "attempt_number": 0,
                "name": "login",
                "state": "FAILED",
                "job_id": JOB_ID,
                "type": "NORMAL_TASK",
                "func_or_class_name": "login",
                "node_id": NODE_ID,
                "worker_pid": 4242,
                "error_type": "TASK_EXECUTION_EXCEPTION",
                "error_message": f"RuntimeError: the service refused {self.secret}",
            }
            return httpx.Response(200, json=envelope([task]))
        if path == "/api/v0/logs/file":
            return httpx.Response(200, stream=Body(f"connecting with {self.secret}\nrefused\n".encode()))
        return httpx.Response(404, text="no such route here")


def sources_of(cluster: Cluster) -> ClusterSources:
    """The sources of the stand-in cluster, read directly (no server)."""
    return ClusterSources(
        cluster.url,
        timeout_s=5,
        source="external",
        headers=None,
        verify=True,
        transport=httpx.MockTransport(cluster.answer),
        gcs_address=None,
        gcs_lookup=None,
        gcs_out_of_reach=None,
    )


async def test_a_jobs_env_var_is_masked_in_a_task_error_and_in_its_log_tail() -> None:
    cluster = Cluster()
    settings = Settings(address=cluster.url, request_timeout_s=5, local_logs=False)
    transport = httpx.MockTransport(cluster.answer)
    async with mcp_client(settings, http_transport=transport, gcs_lookup=None) as client:
        tasks = await call_ok(client, "list_tasks", {"state": "FAILED", "detail": True})
        tail = await call_ok(client, "tail_logs", {"task_id": TASK_ID, "stream": "err"})
    for result in (tasks, tail):
        text = text_of(result) + str(result.structured_content)
        assert cluster.secret not in text, text
    assert "the service refused ***" in text_of(tasks)
    assert "connecting with ***" in text_of(tail)
    # The job list was read once for all of it: the second call found the job's values already held.
    assert cluster.seen["/api/jobs/"] == 1, cluster.seen


async def test_a_state_list_alone_teaches_nothing_and_learning_is_one_shared_read_per_call() -> None:
    cluster = Cluster()
    sources = sources_of(cluster)
    owner = job_owner(sources.dashboard_url, JOB_ID)
    with read_scope():
        found = await sources.state.tasks(filters=[("state", "=", "FAILED")], limit=10, detail=True)
        assert found["result"][0]["job_id"] == JOB_ID
        assert not SECRETS.holds(owner) and cluster.seen["/api/jobs/"] == 0  # reading is not learning
        secrets = JobSecrets(sources.jobs)
        await sources.jobs.job_list()  # the call reads the jobs anyway...
        await secrets.learn({JOB_ID})  # ...so learning costs no request of its own
    assert SECRETS.holds(owner) and cluster.secret in SECRETS
    assert cluster.seen["/api/jobs/"] == 1, cluster.seen
    await sources.aclose()


class Clock:
    """A monotonic clock that a test steps (JobSecrets takes one)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_job_the_jobs_api_does_not_list_is_not_looked_for_on_every_list_of_its_actors() -> None:
    """The job supervisors' job (the dashboard's own driver) is never listed: a warm list_actors that shows
    supervisors must not re-read every job each JOB_SECRETS_TTL_S, only each UNLISTED_RECHECK_S."""
    cluster, clock = Cluster(), Clock()
    sources = sources_of(cluster)
    secrets = JobSecrets(sources.jobs, clock=clock)
    reads = []
    for step in (0, JOB_SECRETS_TTL_S + 1, JOB_SECRETS_TTL_S + 1, UNLISTED_RECHECK_S):
        clock.now += step
        with read_scope():
            await secrets.learn({JOB_ID, "02000000"})  # a listed job and the unlisted supervisors' job
        reads.append(cluster.seen["/api/jobs/"])
    assert SECRETS.holds(job_owner(sources.dashboard_url, JOB_ID))
    assert reads == [1, 1, 1, 2], reads  # read once, then again only after UNLISTED_RECHECK_S
    cluster.fail_jobs = (
        True  # a list that cannot be read leaves the job to be asked again soon, not after 10 min
    )
    clock.now += UNLISTED_RECHECK_S
    with read_scope():
        await secrets.learn({"03000000"})
    cluster.fail_jobs = False
    clock.now += JOB_SECRETS_TTL_S
    with read_scope():
        await secrets.learn({"03000000"})
    assert cluster.seen["/api/jobs/"] == 4, cluster.seen
    await sources.aclose()
