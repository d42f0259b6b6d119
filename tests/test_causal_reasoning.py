"""The reasoning over the evidence graph, in milliseconds: hand-made evidence in Ray's own JSON shapes, and the
evidence recorded from the real scenarios of test_causal_chains.py (tests/recorded/*.json) replayed."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.causal_support import replay
from tests.support import mcp_client

from ray_mcp.diagnosis import explain as causal
from ray_mcp.diagnosis import report as causal_report
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.settings import Settings

NOW = 1_800_000_000_000.0
HEAD = "a" * 56
WORKER_NODE = "b" * 56


def node(node_id: str, state: str = "ALIVE", **res: float) -> dict:
    return {
        "node_id": node_id,
        "node_ip": f"10.0.0.{1 if node_id == HEAD else 2}",
        "state": state,
        "is_head_node": node_id == HEAD,
        "resources_total": {"CPU": 4.0, **res},
        "end_time_ms": NOW - 5000,
        "state_message": "health check failed due to missing too many heartbeats"
        if state == "DEAD"
        else None,
    }


def job(job_id: str, status: str, entrypoint: str = "python main.py", **kw) -> dict:
    return {
        "job_id": job_id,
        "submission_id": f"raysubmit_{job_id}",
        "status": status,
        "entrypoint": entrypoint,
        "start_time": NOW - 600_000,
        "end_time": 0 if status in ("RUNNING", "PENDING") else NOW - 1000,
        **kw,
    }


def actor(actor_id: str, cls: str, job_id: str, state: str = "ALIVE", **kw) -> dict:
    return {
        "actor_id": actor_id,
        "class_name": cls,
        "job_id": job_id,
        "state": state,
        "node_id": HEAD,
        "pid": 100,
        "name": "",
        "required_resources": {},
        "num_restarts": "0",
        **kw,
    }


def task(task_id: str, name: str, job_id: str, state: str, attempt: int = 0, **kw) -> dict:
    return {
        "task_id": task_id,
        "name": name,
        "job_id": job_id,
        "state": state,
        "attempt_number": attempt,
        "type": "NORMAL_TASK",
        "node_id": HEAD,
        "required_resources": {"CPU": 1.0},
        **kw,
    }


def test_contention_names_the_holders_and_their_job_and_is_told_apart_from_infeasible() -> None:
    holder = [actor(f"{i:032x}", "TrainWorker", "04000000", required_resources={"GPU": 1.0}) for i in (1, 2)]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("05000000", "RUNNING", "serve run embedder"),
        nodes=[node(HEAD, GPU=2.0)],
        jobs=[job("04000000", "RUNNING", "python train.py"), job("05000000", "RUNNING")],
        actors=[
            actor("e" * 32, "Embedder", "05000000", "PENDING_CREATION", required_resources={"GPU": 1.0}),
            actor("f" * 32, "Giant", "05000000", "PENDING_CREATION", required_resources={"GPU": 8.0}),
        ],
        tasks=[],
        pgs=[],
        alive_actors=holder,
        running_tasks=[],
    )
    phrase, chains, _ = causal.explain_job(ev)
    kinds = {c.kind: c for c in chains}
    assert "contention" in kinds and "infeasible" in kinds
    cause = kinds["contention"].cause
    assert 'TrainWorker actor(s) of job 04000000 ("python train.py")' in cause and "2 of 2 GPU" in cause
    assert "no alive node can ever fit" in kinds["infeasible"].cause and "GPU 2" in kinds["infeasible"].cause
    assert chains[0].kind == "infeasible"  # waits forever ranks above waits for now
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("RUNNING for 10m00s but not healthy") and len(line.encode()) <= 300


def test_a_cycle_of_actor_calls_is_a_deadlock_naming_both_actors() -> None:
    a, b = "1" * 32, "2" * 32
    driver = "f" * 40 + "06000000"
    ev = GraphInputs(
        now_ms=NOW,
        job=job("06000000", "RUNNING"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor(a, "Trainer", "06000000"), actor(b, "ParamServer", "06000000")],
        tasks=[
            task(
                "t1",
                "Trainer.sync",
                "06000000",
                "RUNNING",
                type="ACTOR_TASK",
                actor_id=a,
                parent_task_id=driver,
            ),
            task(
                "t2",
                "ParamServer.report",
                "06000000",
                "RUNNING",
                type="ACTOR_TASK",
                actor_id=b,
                parent_task_id="t1",
            ),
            task(
                "t3",
                "Trainer.report",
                "06000000",
                "SUBMITTED_TO_WORKER",
                type="ACTOR_TASK",
                actor_id=a,
                parent_task_id="t2",
            ),
        ],
    )
    _phrase, chains, _ = causal.explain_job(ev)
    assert chains[0].kind == "deadlock"
    assert "Trainer" in chains[0].cause and "ParamServer" in chains[0].cause and "cycle" in chains[0].cause


def test_the_driver_blocked_on_a_pending_task_follows_to_its_holders() -> None:
    driver = "f" * 40 + "07000000"
    ev = GraphInputs(
        now_ms=NOW,
        job=job("07000000", "RUNNING"),
        nodes=[node(HEAD)],
        jobs=[job("03000000", "RUNNING", "python etl.py")],
        pgs=[],
        actors=[],
        alive_actors=[actor("c" * 32, "Loader", "03000000", required_resources={"CPU": 4.0})],
        running_tasks=[],
        tasks=[task("t1", "shard", "07000000", "PENDING_NODE_ASSIGNMENT", parent_task_id=driver)],
    )
    _phrase, chains, _ = causal.explain_job(ev)
    assert chains[0].kind == "contention"
    assert 'Loader actor(s) of job 03000000 ("python etl.py")' in chains[0].cause


def test_a_node_death_is_the_last_link_of_the_actor_it_took_down_and_of_its_tasks() -> None:
    dead = {
        "actor_died_error_context": {
            "reason": "NODE_DIED",
            "error_message": "The actor died because its node died.",
        }
    }
    ev = GraphInputs(
        now_ms=NOW,
        job=job("08000000", "FAILED"),
        nodes=[node(HEAD), node(WORKER_NODE, "DEAD")],
        jobs=[],
        pgs=[],
        actors=[actor("d" * 32, "ReplayBuffer", "08000000", "DEAD", node_id=WORKER_NODE, death_cause=dead)],
        tasks=[
            task(
                "t1",
                "ReplayBuffer.add",
                "08000000",
                "FAILED",
                type="ACTOR_TASK",
                actor_id="d" * 32,
                node_id=WORKER_NODE,
                error_type="ACTOR_DIED",
                error_message="The actor died unexpectedly",
            )
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 12, in <module>',
            f"ray.exceptions.ActorDiedError: The actor died unexpectedly. actor_id={'d' * 32}",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("FAILED") and "died at" in line and "health check failed" in line, line
    assert "ReplayBuffer" in " ".join(link.text for link in chains[0].links)
    health = causal.explain_cluster(ev)
    assert health[0].kind == "node_died" and "ReplayBuffer" in health[0].links[-1].text


def test_a_succeeded_job_starts_with_its_status_and_keeps_killed_actors_out_of_the_failures() -> None:
    killed = {"actor_died_error_context": {"reason": "RAY_KILL", "error_message": "killed by `ray.kill`."}}
    ev = GraphInputs(
        now_ms=NOW,
        job=job("09000000", "SUCCEEDED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor("9" * 32, "Scratch", "09000000", "DEAD", death_cause=killed)],
        tasks=[task("c1", "straggler", "09000000", "FAILED", error_type="TASK_CANCELLED")],
    )
    phrase, chains, _ = causal.explain_job(ev)
    assert causal.verdict_line(
        phrase, chains
    ) == "SUCCEEDED after 9m59s; nothing failed" or causal.verdict_line(phrase, chains).startswith(
        "SUCCEEDED"
    )
    assert all(c.severity <= causal.INFO for c in chains)


def test_an_unreadable_source_makes_cluster_health_unknown_never_healthy() -> None:
    ev = GraphInputs(now_ms=NOW, nodes=[node(HEAD)], actors=None, unreadable=["the actors: timed out"])
    model, text = causal_report.health_report("http://x:8265", ev, max_bytes=6000)
    assert model.status == "UNKNOWN" and not model.healthy and "Verdict: Unknown" in text


def test_a_huge_cluster_still_answers_under_6_kb_with_the_verdict_first() -> None:
    dead = {"actor_died_error_context": {"reason": "WORKER_DIED", "error_message": "x" * 2000}}
    ev = GraphInputs(
        now_ms=NOW,
        job=job("0a000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor(f"{i:032x}", f"Worker{i}", "0a000000", "DEAD", death_cause=dead) for i in range(300)],
        tasks=[
            task(
                f"t{i}",
                f"f{i}",
                "0a000000",
                "FAILED",
                error_type="TASK_EXECUTION_EXCEPTION",
                error_message=f"ray::f{i}() (pid=1, ip=10.0.0.1)\nValueError: {'y' * 500}",
            )
            for i in range(300)
        ],
    )
    model, text = causal_report.job_report("raysubmit_x", ev, max_bytes=6000)
    assert len(text.encode()) <= 6000 and text.splitlines()[0] == model.verdict
    assert len(model.verdict.encode()) <= 300


# The scenarios of test_causal_chains.py, recorded into tests/recorded (RAY_MCP_RECORD=1), and each verdict.
EXPECTED = {
    "oom_task": ("FAILED", ["tokenize_shard", "memory monitor", "GB used"]),
    "owner_died": ("FAILED", ["FeatureStore", "ray.kill"]),
    "severity": ("SUCCEEDED", []),
    "restart_loop": ("RUNNING", ["RolloutWorker", "restarted"]),
    "contention": ("RUNNING", ["Embedder", "TrainWorker", "accel"]),
    "deadlock": ("RUNNING", ["deadlock"]),
    "pg_removed": ("FAILED", ["Rollout", "rollout-gang", "removed"]),
    "node_death": ("FAILED", ["ReplayBuffer", "died at"]),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recorded_evidence_replays_to_the_same_verdict(name: str) -> None:
    status, words = EXPECTED[name]
    ev = replay(name)
    model, text = causal_report.job_report("recorded", ev, max_bytes=6000)
    assert model.verdict.startswith(status), text
    for word in words:
        assert word in model.verdict, (word, text)


def filtered(rows: list[dict], request: httpx.Request) -> list[dict]:
    """The State API's filters (= and !=) over recorded rows."""
    params = request.url.params
    for key, op, value in zip(
        params.get_list("filter_keys"),
        params.get_list("filter_predicates"),
        params.get_list("filter_values"),
        strict=True,
    ):
        rows = [r for r in rows if (str(r.get(key)) == value) == (op == "=")]
    return rows


async def test_cluster_health_over_a_recorded_cluster_through_an_injected_transport() -> None:
    """The whole tool over recorded evidence: the dashboard's answers served by httpx.MockTransport."""
    ev = replay("oom_task")

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/version":
            return httpx.Response(200, json={"version": "4", "ray_version": "2.60.0", "ray_commit": "x"})
        rows = {
            "/api/v0/actors": ev.actors,
            "/api/v0/tasks": ev.tasks,
            "/api/v0/nodes": ev.nodes,
            "/api/v0/placement_groups": ev.pgs,
            "/api/v0/jobs": ev.jobs,
            "/api/v0/cluster_events": ev.events,
            "/api/v0/workers": ev.workers,
        }.get(path)
        if rows is not None:
            rows = filtered(rows, request)
            data = {"result": {"total": len(rows), "num_after_truncation": len(rows), "result": rows}}
            return httpx.Response(200, json={"result": True, "msg": "", "data": data})
        return httpx.Response(404, json={"result": False, "msg": "not recorded", "data": {}})

    async with mcp_client(
        Settings(address="http://recorded:8265"), http_transport=httpx.MockTransport(answer)
    ) as client:
        result = await client.call_tool("cluster_health", {})
    text = result.content[0].text
    assert not result.is_error, text
    data = result.structured_content
    assert data["status"] == "PROBLEMS_FOUND" and not data["healthy"], text
    assert any("tokenize_shard" in f["title"] and "memory monitor" in f["title"] for f in data["findings"]), (
        text
    )
    assert json.dumps(data) and len(text.encode()) <= 6000


def nested(resource: str) -> GraphInputs:
    """4 shard tasks running on a 4-CPU (and 4-GPU) node, each blocked in ray.get on its leaf, which is pending."""
    driver = "f" * 40 + "0b000000"
    need = {resource: 1.0}
    shards = [
        task(f"s{i}", "shard", "0b000000", "RUNNING", parent_task_id=driver, required_resources=need)
        for i in range(4)
    ]
    leaves = [
        task(
            f"l{i}",
            "leaf",
            "0b000000",
            "PENDING_NODE_ASSIGNMENT",
            parent_task_id=f"s{i}",
            required_resources=need,
        )
        for i in range(4)
    ]
    return GraphInputs(
        now_ms=NOW,
        job=job("0b000000", "RUNNING"),
        nodes=[node(HEAD, GPU=4.0)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[*shards, *leaves],
        alive_actors=[],
        running_tasks=shards,
    )


def test_nested_tasks_blocked_on_their_children_lend_their_cpu_back_so_it_is_not_a_deadlock() -> None:
    """Ray releases the CPU of a task blocked in ray.get: nested CPU tasks are slow to start, not starved."""
    phrase, chains, _ = causal.explain_job(nested("CPU"))
    line = causal.verdict_line(phrase, chains)
    assert "leaf" in line and "shard" in line and "CPU" in line and "not a deadlock" in line, line
    assert "starve" not in line, line


def test_nested_tasks_that_hold_every_gpu_while_their_children_wait_are_called_starvation() -> None:
    phrase, chains, _ = causal.explain_job(nested("GPU"))
    line = causal.verdict_line(phrase, chains)
    assert "leaf" in line and "4 of 4 GPU" in line and "task(s) shard" in line, line
    assert "nested tasks starve" in chains[0].cause


def test_a_driver_that_timed_out_on_a_group_never_created_names_the_group_and_why() -> None:
    pg = {
        "placement_group_id": "9" * 36,
        "name": "learners",
        "creator_job_id": "0c000000",
        "state": "REMOVED",
        "strategy": "STRICT_SPREAD",
        "stats": {"end_to_end_creation_latency_us": "0", "scheduling_state": "REMOVED"},
        "bundles": [{"bundle_id": {"bundle_index": i}, "unit_resources": {"CPU": 2.0}} for i in range(2)],
    }
    ev = GraphInputs(
        now_ms=NOW,
        job=job("0c000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[pg],
        actors=[],
        tasks=[],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 6, in <module>',
            "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "learners" in line and "STRICT_SPREAD" in line and "infeasible" in line, line


def owner_died_on(node_id: str, owner: str) -> dict:
    """Ray's record of an actor whose owner (the driver) exited after losing it: OWNER_DIED, not NODE_DIED."""
    return {
        "actor_died_error_context": {
            "reason": "OWNER_DIED",
            "owner_id": owner,
            "pid": 200,
            "error_message": f"The actor is dead because its owner has died. Owner Id: {owner} Owner worker exit "
            "type: INTENDED_USER_EXIT Worker exit detail: Owner's worker process has crashed.",
        }
    }


def test_an_actor_recorded_as_owner_died_on_a_node_that_died_with_it_names_the_node() -> None:
    """The raylet dies; the driver's call fails (ActorUnavailableError, connection refused) and the driver exits;
    Ray records the actor as OWNER_DIED, then marks its node DEAD after the health checks fail. The owner died
    because of the actor: the node is the last link."""
    rb, driver = "d" * 32, "0d000000" + "f" * 48
    dead_node = {
        **node(WORKER_NODE, "DEAD"),
        "end_time_ms": NOW - 1000 + 15_000,
    }  # 15 s after the driver ended
    ev = GraphInputs(
        now_ms=NOW + 30_000,
        job=job("0d000000", "FAILED"),
        nodes=[node(HEAD), dead_node],
        jobs=[job("0d000000", "FAILED")],
        pgs=[],
        actors=[
            actor(
                rb,
                "ReplayBuffer",
                "0d000000",
                "DEAD",
                node_id=WORKER_NODE,
                death_cause=owner_died_on(WORKER_NODE, driver),
            )
        ],
        tasks=[
            task(
                "t1",
                "ReplayBuffer.add",
                "0d000000",
                "FAILED",
                type="ACTOR_TASK",
                actor_id=rb,
                node_id=WORKER_NODE,
                error_type="ACTOR_UNAVAILABLE",
                error_message="The actor is temporarily unavailable: RpcError: "
                "failed to connect to all addresses: Connection refused rpc_code: 14",
            )
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 13, in <module>',
            "    ray.get(buf.add.remote(i))",
            f"ray.exceptions.ActorUnavailableError: The actor {rb} is "
            "unavailable: The actor is temporarily unavailable: RpcError: Connection refused",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("FAILED") and "ReplayBuffer" in line and "died at" in line, line
    assert "health check failed" in line and WORKER_NODE[:12] in line, line
    assert "owner" not in line, line  # the owner's end is a consequence here, not the cause
    health = causal.explain_cluster(ev)
    assert health[0].kind == "node_died" and "ReplayBuffer" in health[0].links[-1].text
    # Each thing the node took down is told once: under the node, not again as a separate failure.
    assert not [c for c in health[1:] if "ReplayBuffer" in c.symptom], [c.symptom for c in health]


def test_an_actor_whose_owner_died_long_before_its_node_keeps_the_owner_as_the_cause() -> None:
    rb, driver = "d" * 32, "0e000000" + "f" * 48
    dead_node = {**node(WORKER_NODE, "DEAD"), "end_time_ms": NOW + 3_600_000}  # an hour after the job ended
    ev = GraphInputs(
        now_ms=NOW + 3_700_000,
        job=job("0e000000", "RUNNING"),
        nodes=[node(HEAD), dead_node],
        jobs=[],
        pgs=[],
        actors=[
            actor(
                rb,
                "ReplayBuffer",
                "0e000000",
                "DEAD",
                node_id=WORKER_NODE,
                death_cause=owner_died_on(WORKER_NODE, driver),
            )
        ],
        tasks=[],
    )
    _phrase, chains, _ = causal.explain_job(ev)
    dead = [c for c in chains if "ReplayBuffer" in c.symptom]
    assert dead and "owner" in dead[0].cause and "died at" not in dead[0].cause, [c.cause for c in chains]


GENERIC_EXIT = (
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
    "detail: Worker unexpectedly exits with a connection error code 2. End of file. Some common causes "
    "include: (1) the process was killed by the OOM killer due to high memory usage, (2) ray stop --force "
    "was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error."
)


def test_an_actor_whose_worker_exited_is_not_taken_for_a_memory_monitor_kill_and_names_the_call_it_ran() -> (
    None
):
    """Ray appends "killed by the OOM killer due to high memory usage" to every unexpected exit as a possible
    cause: only the memory monitor's own words make it an OOM kill. The call the worker ran when it died is named."""
    loader = "a" * 32
    died = {"actor_died_error_context": {"reason": "WORKER_DIED", "error_message": GENERIC_EXIT, "pid": 300}}
    sent = [{"state": "SUBMITTED_TO_WORKER", "created_ms": NOW - 9000}]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("0f000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor(loader, "Loader", "0f000000", "DEAD", death_cause=died)],
        tasks=[
            task(
                "c1",
                "Loader.crash",
                "0f000000",
                "FAILED",
                type="ACTOR_TASK",
                actor_id=loader,
                events=sent,
                error_type="ACTOR_DIED",
                error_message=GENERIC_EXIT,
            ),
            task(
                "p1",
                "Loader.produce",
                "0f000000",
                "FINISHED",
                type="ACTOR_TASK",
                actor_id=loader,
                events=sent,
            ),
        ],
    )
    _phrase, chains, _ = causal.explain_job(ev)
    cause = next(c.cause for c in chains if "Loader" in c.cause)
    assert "memory monitor" not in cause and "while running Loader.crash" in cause, cause


def test_a_segfault_is_read_from_the_worker_log_of_any_attempt_with_the_users_frame() -> None:
    """A retried task's last attempt may lack its worker's pid: the crash reason comes from the attempt whose
    worker log has it, and faulthandler's stack gives the user's frame."""
    stderr = [
        "*** SIGSEGV received at time=1 on cpu 0 ***",
        "Fatal Python error: Segmentation fault",
        "",
        "Stack (most recent call first):",
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at',
        '  File "/tmp/ray/session/runtime_resources/working_dir_files/_ray_pkg_1/main.py", line 7 in decode',
        '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 1069 in main_loop',
    ]
    attempts = [
        task(
            "d1",
            "decode",
            "10000000",
            "FAILED",
            attempt=0,
            error_type="WORKER_DIED",
            worker_pid=41,
            error_message="The worker died unexpectedly while executing this task.",
        ),
        task(
            "d1",
            "decode",
            "10000000",
            "FAILED",
            attempt=1,
            error_type="WORKER_DIED",
            worker_pid=None,
            error_message="The worker died unexpectedly while executing this task.",
        ),
    ]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("10000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=attempts,
        worker_logs={f"{HEAD}:41": stderr},
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "decode" in line and "Fatal Python error: Segmentation fault at main.py:7 in decode" in line, line
    assert "each of its 2 attempts" in line, line


PIP_FAILURE = """ray._private.runtime_env.utils.SubprocessCalledProcessError: Run cmd[9] failed with the following details.
Last 50 lines of stdout:
    Looking in indexes: https://pypi.org/simple
    ERROR: Could not find a version that satisfies the requirement tokenizers-x==9.9 (from versions: none)
    ERROR: No matching distribution found for tokenizers-x==9.9"""


def test_a_runtime_env_that_cannot_be_set_up_is_named_in_the_installers_words_from_the_driver_error() -> None:
    ev = GraphInputs(
        now_ms=NOW,
        job=job("11000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[
            task(
                "e1",
                "embed",
                "11000000",
                "FAILED",
                error_type="RUNTIME_ENV_SETUP_FAILED",
                error_message=PIP_FAILURE,
            )
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 9, in <module>',
            "ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.",
            "[Node 10.0.0.1] Traceback (most recent call last):",
            *PIP_FAILURE.splitlines(),
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert 'task "embed"' in line and "runtime_env" in line, line
    assert "No matching distribution found for tokenizers-x==9.9" in line, line


def test_a_deadlock_names_the_calls_of_its_cycle_in_order() -> None:
    a = "3" * 32
    driver = "f" * 40 + "12000000"
    ev = GraphInputs(
        now_ms=NOW,
        job=job("12000000", "RUNNING"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor(a, "Planner", "12000000")],
        tasks=[
            task(
                "p1",
                "Planner.plan",
                "12000000",
                "RUNNING",
                type="ACTOR_TASK",
                actor_id=a,
                parent_task_id=driver,
            ),
            task(
                "p2",
                "Planner.step",
                "12000000",
                "SUBMITTED_TO_WORKER",
                type="ACTOR_TASK",
                actor_id=a,
                parent_task_id="p1",
            ),
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "Planner.plan -> Planner.step -> Planner.plan" in line and "deadlock" in line, line


def test_a_driver_that_exits_without_a_traceback_is_quoted_by_its_last_output_not_rays_logging() -> None:
    from ray_mcp.diagnosis.rules.setup import last_output

    lines = [
        "2026-11-30 19:27:36,412 INFO worker.py:1691 -- Using address 10.0.0.1:6379",
        "validation failed: 2 of 9",
        "[2026-11-30 19:27:37,001 I 20571 20571] (raylet) worker_pool.cc:564: Started worker process",
        "",
    ]
    assert last_output(lines) == "validation failed: 2 of 9"


def test_a_stalled_job_waiting_on_held_resources_states_the_holders_with_how_long_nothing_moved() -> None:
    """The stall finding (hang.py) says the job does not move; the chain says why: the verdict is the chain's last
    link (the holders and their job), with the time nothing moved."""

    holders = [
        actor(f"{i:032x}", "RolloutWorker", "13000000", required_resources={"accel": 1.0}) for i in (1, 2)
    ]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("15000000", "RUNNING"),
        nodes=[node(HEAD, accel=2.0)],
        jobs=[job("13000000", "RUNNING")],
        pgs=[],
        actors=[
            actor("c" * 32, "Learner", "15000000", "PENDING_CREATION", required_resources={"accel": 1.0})
        ],
        tasks=[],
        alive_actors=holders,
        running_tasks=[],
    )
    model, _text = causal_report.job_report("x", ev, max_bytes=6000)  # nothing moved since it started
    assert model.verdict.startswith("RUNNING for 10m00s but not healthy, no task activity for 600 s: "), (
        model.verdict
    )
    assert "Learner" in model.verdict and "RolloutWorker" in model.verdict and "accel" in model.verdict


def test_holders_are_named_as_serve_replicas_and_detached_actors_of_ended_jobs() -> None:
    replica = actor("1" * 32, "ServeReplica:ranker:Reranker", "19000000", required_resources={"accel": 1.0})
    bucket = actor("2" * 32, "TokenBucket", "16000000", required_resources={"license": 1.0}, is_detached=True)
    ev = GraphInputs(
        now_ms=NOW,
        job=job("1a000000", "RUNNING"),
        nodes=[node(HEAD, accel=1.0, license=1.0)],
        pgs=[],
        jobs=[job("16000000", "SUCCEEDED"), job("19000000", "RUNNING", "serve run")],
        actors=[
            actor("3" * 32, "Solver", "1a000000", "PENDING_CREATION", required_resources={"license": 1.0}),
            actor("4" * 32, "Finetuner", "1a000000", "PENDING_CREATION", required_resources={"accel": 1.0}),
        ],
        tasks=[],
        alive_actors=[replica, bucket],
        running_tasks=[],
    )
    _phrase, chains, _ = causal.explain_job(ev)
    causes = " | ".join(c.cause for c in chains)
    assert "replica(s) of Serve app 'ranker' (deployment Reranker)" in causes, causes
    assert (
        'detached TokenBucket actor(s) of job 16000000 ("python main.py"), which ended (SUCCEEDED)' in causes
    ), causes


def test_a_driver_that_gave_up_waiting_names_the_task_still_running_when_the_job_ended() -> None:
    ended = "Job finishes (13000000) as driver exits. Marking all non-terminal tasks as failed."
    ev = GraphInputs(
        now_ms=NOW,
        job=job("13000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[
            task("s1", "score_chunk", "13000000", "FINISHED"),
            task(
                "s2",
                "score_chunk",
                "13000000",
                "FAILED",
                node_id=None,
                error_type="WORKER_DIED",
                error_message=ended,
            ),
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 16, in <module>',
            "AssertionError: 1 chunks did not finish in 15 s",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "did not finish" in line and 'stopped waiting on task "score_chunk" (s2)' in line, line
    assert "node" not in line, line  # a task of an ended job is not a node's victim
    assert not [c for c in causal.explain_cluster(ev) if "score_chunk" in c.verdict]


def test_an_actor_killed_by_ray_kill_is_the_cause_when_the_driver_fails_calling_it() -> None:
    idx = "5" * 32
    killed = {
        "actor_died_error_context": {
            "reason": "RAY_KILL",
            "error_message": "The actor is dead because it was killed by `ray.kill`.",
        }
    }
    ev = GraphInputs(
        now_ms=NOW,
        job=job("14000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[actor(idx, "Indexer", "14000000", "DEAD", name="indexer", death_cause=killed)],
        tasks=[
            task(
                "a1",
                "Indexer.add",
                "14000000",
                "FAILED",
                type="ACTOR_TASK",
                actor_id=idx,
                error_type="ACTOR_DIED",
                error_message="The actor is dead because it was killed by `ray.kill`.",
            )
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 17, in <module>',
            "    ray.get(idx.add.remote(10))",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "Indexer" in line and "ray.kill" in line, line


def test_a_serve_run_that_failed_names_the_deployment_and_its_replicas_constructor_error() -> None:
    message = (
        "The deployment failed to start 3 times in a row. This may be due to a problem with its constructor "
        "or initial health check failing. See controller logs for details. Error:\nTraceback (most recent call "
        'last):\n  File "main.py", line 9, in __init__\n    open(path)\nFileNotFoundError: [Errno 2] No such '
        "file or directory: '/models/embedder-v3/weights.bin'"
    )
    serve = {
        "applications": {
            "embedder": {
                "status": "DEPLOY_FAILED",
                "message": "Failed to update the deployments ['Embedder'].",
                "deployments": {
                    "Embedder": {
                        "status": "DEPLOY_FAILED",
                        "status_trigger": "REPLICA_STARTUP_FAILED",
                        "message": message,
                    }
                },
            }
        }
    }
    ev = GraphInputs(
        now_ms=NOW,
        job=job("1c000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[],
        serve=serve,
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 21, in <module>',
            "RuntimeError: Deploying application embedder failed: Failed to update the deployments ['Embedder'].",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "Serve app 'embedder' deployment Embedder" in line and "FileNotFoundError" in line, line
    assert "failed to start" in line, line


def test_cluster_health_names_the_holders_of_a_task_that_waits_for_cpu_its_own_actors_hold() -> None:
    runners = [actor(f"{i:032x}", "EnvRunner", "12000000", required_resources={"CPU": 1.0}) for i in range(4)]
    ev = GraphInputs(
        now_ms=NOW,
        nodes=[node(HEAD)],
        jobs=[job("12000000", "RUNNING")],
        pgs=[],
        actors=[],
        tasks=[
            task(
                "g1",
                "aggregate_returns",
                "12000000",
                "PENDING_NODE_ASSIGNMENT",
                parent_task_id="f" * 40 + "12000000",
            )
        ],
        alive_actors=runners,
        running_tasks=[],
    )
    top = causal.explain_cluster(ev)[0]
    assert top.kind == "contention" and "aggregate_returns" in top.verdict and "EnvRunner" in top.verdict, (
        top.verdict
    )


def test_a_crashed_owner_tasks_worker_is_found_by_its_worker_id_when_the_task_row_lacks_its_pid() -> None:
    wid = "9" * 56
    stderr = [
        "Fatal Python error: Segmentation fault",
        "",
        "Stack (most recent call first):",
        '  File "/tmp/ray/session/runtime_resources/working_dir_files/_ray_pkg_1/main.py", line 22 in validate_checksums',
    ]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("15000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[
            task(
                "o1",
                "load_shards",
                "15000000",
                "FAILED",
                error_type="WORKER_DIED",
                worker_pid=None,
                worker_id=wid,
                error_message="RpcError: RPC error: Socket closed rpc_code: 14",
            )
        ],
        workers=[
            {
                "worker_id": wid,
                "pid": 77,
                "node_id": HEAD,
                "worker_type": "WORKER",
                "exit_type": "SYSTEM_ERROR",
                "exit_detail": "The leased worker has unrecoverable failure.",
            }
        ],
        worker_logs={f"{HEAD}:77": stderr},
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 40, in <module>',
            f"ray.exceptions.OwnerDiedError: Failed to retrieve object 44cf. Owner worker ID: {wid}",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "load_shards" in line and "Segmentation fault at main.py:22 in validate_checksums" in line, line


def test_an_owner_id_on_the_lines_after_the_drivers_exception_line_is_followed_to_the_owner() -> None:
    wid = "8" * 56
    died = "RpcError: RPC error: Socket closed rpc_code: 14"
    ev = GraphInputs(
        now_ms=NOW,
        job=job("16000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[
            task(
                "o1",
                "load_shards",
                "16000000",
                "FAILED",
                error_type="WORKER_DIED",
                worker_id=wid,
                error_message=died,
            )
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 40, in <module>',
            "ray.exceptions.OwnerDiedError: Failed to retrieve object 44cf.",
            "The object's owner has exited. This is the Python worker that first created the ObjectRef.",
            f"Owner worker ID: {wid}, owner node ID: {HEAD}, owner address: 10.0.0.1:11995.",
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert 'the owner was task "load_shards"' in line, line


def test_a_node_being_drained_with_actors_on_it_is_named_with_its_reason_and_what_runs_there() -> None:
    spot = "b" * 56
    drain = {**node(spot), "state_message": "Draining: DRAIN_NODE_REASON_PREEMPTION: spot instance reclaimed"}
    ev = GraphInputs(
        now_ms=NOW,
        nodes=[node(HEAD), drain],
        jobs=[job("17000000", "RUNNING")],
        pgs=[],
        tasks=[],
        actors=[],
        alive_actors=[actor("7" * 32, "ReplayBuffer", "17000000", node_id=spot)],
        running_tasks=[],
    )
    top = causal.explain_cluster(ev)[0]
    assert top.kind == "node_draining" and "is being drained" in top.verdict, top.verdict
    assert "spot instance reclaimed" in top.verdict and "1 actor(s) (ReplayBuffer)" in top.verdict, (
        top.verdict
    )


def test_a_node_that_died_after_a_drain_says_it_was_drained_while_work_ran() -> None:
    spot = "c" * 56
    dead = {**node(spot, "DEAD"), "state_message": "The node was drained: DRAIN_NODE_REASON_IDLE_TERMINATION"}
    ev = GraphInputs(now_ms=NOW, nodes=[node(HEAD), dead], jobs=[], pgs=[], tasks=[], actors=[])
    top = causal.explain_cluster(ev)[0]
    assert top.kind == "node_died" and "after it was drained" in top.verdict, top.verdict


def test_a_task_bound_to_a_dead_node_by_hard_affinity_states_that_nodes_own_state() -> None:
    gone = "d" * 56
    msg = (
        f"ray.exceptions.TaskUnschedulableError: The task is not schedulable: The node specified via "
        f"NodeAffinitySchedulingStrategy doesn't exist any more or is infeasible, and soft=False was specified. "
        f"task_id={'e' * 48}, node_id={gone}"
    )
    ev = GraphInputs(
        now_ms=NOW,
        job=job("18000000", "FAILED"),
        nodes=[node(HEAD), node(gone, "DEAD")],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=[
            task(
                "n1", "pinned", "18000000", "FAILED", error_type="TASK_UNSCHEDULABLE_ERROR", error_message=msg
            )
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert "pinned" in line and "hard node affinity" in line and "dddddddddddd" in line, line
    assert "that node is DEAD" in line, line


def test_a_serve_replica_replaced_in_a_loop_for_failing_its_health_check_names_its_settings() -> None:
    dead = [actor(f"{i:032x}", "ServeReplica:flaky:Flaky", "19000000", "DEAD") for i in (1, 2, 3)]
    dep = {
        "name": "Flaky",
        "status": "UNHEALTHY",
        "status_trigger": "HEALTH_CHECK_FAILED",
        "message": "A replica's health check failed. This deployment will be UNHEALTHY until the replica recovers.",
        "deployment_config": {
            "health_check_period_s": 1,
            "health_check_timeout_s": 1,
            "max_ongoing_requests": 3,
        },
        "target_num_replicas": 1,
        "replicas": [{"replica_id": "r4", "state": "STARTING"}],
    }
    serve = {
        "controller_info": {"node_id": HEAD},
        "applications": {"flaky": {"status": "UNHEALTHY", "deployments": {"Flaky": dep}}},
    }
    ev = GraphInputs(now_ms=NOW, nodes=[node(HEAD)], jobs=[], pgs=[], tasks=[], actors=dead, serve=serve)
    top = causal.explain_cluster(ev)[0]
    assert top.kind == "serve_loop" and "3 replica(s) died and were replaced" in top.verdict, top.verdict
    assert "failing its health check (health_check_period_s 1, health_check_timeout_s 1)" in top.verdict
    assert (
        "[limits] max_ongoing_requests 3" in top.evidence()
        and "[replicas] 0 of 1 replica(s) RUNNING (1 STARTING)" in top.evidence()
    )


def test_four_task_workers_killed_alike_are_counted_as_four_not_named_as_one() -> None:
    tasks = [
        task(
            f"k{i}",
            "decode",
            "1a000000",
            "FAILED",
            error_type="WORKER_DIED",
            error_message=f"The worker died unexpectedly while executing this task. Worker ID: {i:056x}, pid {100 + i}",
        )
        for i in range(4)
    ]
    ev = GraphInputs(
        now_ms=NOW, job=job("1a000000", "FAILED"), nodes=[node(HEAD)], jobs=[], pgs=[], actors=[], tasks=tasks
    )
    _phrase, chains, _ = causal.explain_job(ev)
    assert [c.symptom for c in chains if c.kind == "worker_crash"] == ["4 tasks decode failed"], chains


def infeasible_group(pg_id: str, job_id: str) -> dict:
    return {
        "placement_group_id": pg_id,
        "name": "finetune-pg",
        "creator_job_id": job_id,
        "state": "PENDING",
        "strategy": "PACK",
        "stats": {"scheduling_state": "INFEASIBLE"},
        "bundles": [{"bundle_id": {"bundle_index": 0}, "unit_resources": {"CPU": 1.0, "GPU": 1.0}}],
    }


def test_cluster_health_names_an_infeasible_group_once_with_the_actor_it_holds_up() -> None:
    """Before: the group was one finding and the actor waiting in it another with the same cause (issue 27
    item 8: "cluster_health listed an infeasible group twice")."""
    pg_id, trainer = "e2" * 18, "7" * 32
    ev = GraphInputs(
        now_ms=NOW,
        nodes=[node(HEAD)],
        jobs=[job("03000000", "RUNNING")],
        pgs=[infeasible_group(pg_id, "03000000")],
        actors=[
            actor(
                trainer,
                "Trainer",
                "03000000",
                "PENDING_CREATION",
                placement_group_id=pg_id,
                required_resources={"CPU": 1.0, "GPU": 1.0},
            )
        ],
        tasks=[],
        alive_actors=[],
        running_tasks=[],
    )
    model, text = causal_report.health_report("http://x", ev, max_bytes=6000)
    assert [f.kind for f in model.findings] == ["infeasible"], text
    assert text.count("which no alive node can ever fit") == 2, text  # the verdict and the one finding
    assert f'also held up by it: actor "Trainer" ({trainer}) is PENDING_CREATION' in text, text


def test_cluster_health_ranks_a_failed_jobs_error_first_not_the_actors_its_end_took_down() -> None:
    """Before: the actors a failed job's driver took with it when it exited were a finding of their own, of the
    same severity as the job's ValueError, so list order alone decided which came first (issue 27 item 8)."""
    driver = "02000000" + "f" * 48
    ev = GraphInputs(
        now_ms=NOW,
        nodes=[node(HEAD)],
        jobs=[job("02000000", "FAILED")],
        pgs=[],
        actors=[actor("c" * 32, "Cache", "02000000", "DEAD", death_cause=owner_died_on(HEAD, driver))],
        tasks=[
            task(
                "t1",
                "parse_shard",
                "02000000",
                "FAILED",
                error_type="TASK_EXECUTION_EXCEPTION",
                error_message="ray::parse_shard() (pid=1, ip=10.0.0.1)\nValueError: shard 3 has a bad header",
            )
        ],
        alive_actors=[],
        running_tasks=[],
    )
    health = causal.explain_cluster(ev)
    assert "ValueError: shard 3 has a bad header" in health[0].verdict, [c.verdict for c in health]
    assert not [c for c in health if "Cache" in c.verdict], [c.verdict for c in health]


def test_a_job_whose_tasks_were_not_all_read_is_not_called_stalled_up_front() -> None:
    """The diagnosis reads at most TASKS_READ task attempts of a job. When it read that many, the newest
    activity may be among the ones left out (a long job still finishing tasks): the idle time is of the tasks
    read, so it is shown, but it neither leads nor makes the job "not healthy"."""
    from ray_mcp.limits import TASKS_READ

    old = NOW - 300_000  # every task read ended five minutes ago
    rows = [
        task(f"t{i:05d}", "step", "09000000", "FINISHED", start_time_ms=old - 1000, end_time_ms=old)
        for i in range(TASKS_READ)
    ]
    ev = GraphInputs(
        now_ms=NOW,
        job=job("09000000", "RUNNING"),
        nodes=[node(HEAD)],
        jobs=[job("09000000", "RUNNING")],
        pgs=[],
        actors=[],
        tasks=rows,
    )
    line = causal.verdict_line(*causal.explain_job(ev)[:2])
    assert "not healthy" not in line, line
    complete = GraphInputs(**{**ev.__dict__, "tasks": rows[:10]})  # every task read: a stall, said first
    line = causal.verdict_line(*causal.explain_job(complete)[:2])
    assert "not healthy" in line and "no task activity" in line, line
