"""diagnose_job and cluster_health on real failures: the verdict names the root cause, under 6 KB."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
from mcp import Client
from tests.support import call_ok, run_to_end, submit, text_of, wait_until

from ray_mcp import models
from ray_mcp.diagnosis import report
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.diagnosis.render import merge_alike
from ray_mcp.diagnosis.tracebacks import is_ray_wrapper, last_traceback

BUDGET = 6_000


async def diagnose(client: Client, job: str) -> tuple[dict, str]:
    result = await call_ok(client, "diagnose_job", {"job": job})
    text = text_of(result)
    assert len(text.encode()) <= BUDGET, len(text.encode())
    return result.structured_content, text


async def test_a_driver_exception_is_named_with_its_message_file_and_line(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import ray

            def configure(lr):
                if lr > 1:
                    raise ValueError("bad lr")

            ray.init()
            configure(5)
            """
        )
    )
    sid, info = await run_to_end(
        client, entrypoint="python train.py", runtime_env={"working_dir": str(tmp_path)}
    )
    assert info["status"] == "FAILED"
    data, text = await diagnose(client, sid)
    verdict = data["verdict"]
    assert "ValueError" in verdict and "bad lr" in verdict and "train.py:5" in verdict, text
    assert data["findings"][0]["kind"] == "driver_exception"
    assert "raise ValueError" in text  # the evidence quotes the traceback


ACTOR_DRIVER = """\
import ray

@ray.remote(num_cpus=0)
class WeightLoader:
    def __init__(self, path):
        raise RuntimeError(f"cannot load weights from {path}")

    def ping(self):
        return 1

ray.init()
loader = WeightLoader.remote("/ckpt/step-900")
ray.get(loader.ping.remote(), timeout=120)
"""


async def test_an_actor_that_dies_in_init_is_the_verdict_not_the_drivers_actor_error(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "driver.py").write_text(ACTOR_DRIVER)
    sid, info = await run_to_end(
        client, entrypoint="python driver.py", runtime_env={"working_dir": str(tmp_path)}
    )
    assert info["status"] == "FAILED"
    data, text = await diagnose(client, sid)
    verdict = data["verdict"]
    assert "WeightLoader" in verdict and "RuntimeError" in verdict and "cannot load weights" in verdict, text
    assert "constructor" in verdict
    # One chain: where the driver re-raised it, then where it was first raised.
    assert data["findings"][0]["kind"] == "raised"
    assert "[raised_in] the driver raised ActorDiedError" in text


PG_DRIVER = """\
import ray
from ray.util.placement_group import placement_group

ray.init()
pg = placement_group([{"CPU": 64}], strategy="PACK", name="trainer-gang")
print("waiting for the placement group", flush=True)
ray.get(pg.ready())
"""


async def test_a_job_stuck_on_an_infeasible_placement_group_says_so_and_what_the_cluster_has(
    client: Client, tmp_path: Path
) -> None:
    (tmp_path / "driver.py").write_text(PG_DRIVER)
    sid = await submit(client, entrypoint="python driver.py", runtime_env={"working_dir": str(tmp_path)})
    try:
        await wait_until(client, sid, {"RUNNING"})
        with anyio.fail_after(120):
            while True:
                data, text = await diagnose(client, sid)
                if data["findings"] and data["findings"][0]["kind"] == "infeasible":
                    break
                await anyio.sleep(1)
        verdict = data["verdict"]
        assert verdict.startswith("RUNNING") and "infeasible" in verdict and "trainer-gang" in verdict, text
        assert "{CPU: 64}" in verdict
        assert "the largest has CPU 2" in verdict  # what the cluster has
        assert "debug-pending-placement-group" in text
    finally:
        await client.call_tool("stop_job", {"job": sid})


async def test_a_job_asking_for_a_gpu_the_cluster_lacks_is_stuck_on_its_entrypoint_resources(
    client: Client,
) -> None:
    sid = await submit(client, entrypoint="python -c \"print('never runs')\"", entrypoint_num_gpus=1)
    try:
        with anyio.fail_after(120):
            while True:
                data, text = await diagnose(client, sid)
                if data["findings"] and data["findings"][0]["kind"] == "entrypoint_resources":
                    break
                await anyio.sleep(1)
        assert data["status"] == "PENDING"
        assert "fit on no node" in data["verdict"] and "GPU" in data["verdict"], text
        assert "GPU: 1 wanted, no node has more than 0" in text
    finally:
        await client.call_tool("stop_job", {"job": sid})


async def test_a_successful_job_is_said_to_have_succeeded(client: Client) -> None:
    sid, info = await run_to_end(client, entrypoint="python -c \"print('all good')\"")
    assert info["status"] == "SUCCEEDED"
    data, _text = await diagnose(client, sid)
    assert data["verdict"].startswith("SUCCEEDED: the job succeeded"), data["verdict"]


async def test_an_unknown_job_is_an_error_that_says_how_to_list_jobs(client: Client) -> None:
    result = await client.call_tool("diagnose_job", {"job": "raysubmit_doesnotexist"})
    assert result.is_error and "list_jobs" in text_of(result)


# -- pure parts -------------------------------------------------------------------------------------------

DRIVER_LOG = """\
2026-11-29 19:00:00,000\tINFO worker.py:1841 -- Connecting to existing Ray cluster at address: 10.0.0.1:6379...
step 1 loss 0.5
Traceback (most recent call last):
  File "/tmp/ray/session_x/runtime_resources/working_dir_files/_ray_pkg_1/driver.py", line 13, in <module>
    ray.get(loader.ping.remote())
  File "/venv/lib/python3.11/site-packages/ray/_private/auto_init_hook.py", line 22, in auto_init_wrapper
    return fn(*args, **kwargs)
  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 2967, in get
    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)
ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task, ray::WeightLoader.__init__() (pid=4242, ip=10.0.0.1, actor_id=abc, repr=<driver.WeightLoader object at 0x7f>)
  File "/tmp/ray/session_x/runtime_resources/working_dir_files/_ray_pkg_1/driver.py", line 6, in __init__
    raise RuntimeError(f"cannot load weights from {path}")
RuntimeError: cannot load weights from /ckpt/step-900
2026-11-29 19:00:05,000\tINFO worker.py:2000 -- shutting down
"""


def test_the_last_traceback_keeps_the_remote_chain_and_finds_the_user_frames() -> None:
    tb = last_traceback(DRIVER_LOG.splitlines())
    assert tb is not None
    assert tb.outermost == (
        "ray.exceptions.ActorDiedError",
        tb.outermost[1],
    ) and tb.outermost[1].startswith("The actor died")
    assert tb.innermost == ("RuntimeError", "cannot load weights from /ckpt/step-900")
    assert tb.user_frame is not None and tb.user_frame.short() == "driver.py:6 in __init__"
    assert is_ray_wrapper(tb.outermost[0])
    assert not any("shutting down" in line for line in tb.lines)


def test_no_traceback_falls_back_to_the_last_exception_line_or_nothing() -> None:
    assert last_traceback(["all fine", "done"]) is None
    tb = last_traceback(["x", "KeyError: 'lr'"])
    assert tb is not None and tb.innermost == ("KeyError", "'lr'")


def finding(severity: int, title: str, evidence: list[str] | None = None, kind: str = "") -> models.Finding:
    return models.Finding(severity=severity, kind=kind, title=title, evidence=evidence or [])


def answer(ev: GraphInputs) -> tuple[models.ClusterHealth, str]:
    return report.health_report("http://x:8265", ev, max_bytes=BUDGET)


EVERYTHING_READ = {
    "nodes": [],
    "status": {"nodes": [], "pending_demands": []},
    "jobs": [],
    "actors": [],
    "alive_actors": [],
    "tasks": [],
    "pgs": [],
    "serve": {},
    "events": [],
}


def test_an_empty_cluster_is_healthy_and_a_dead_node_is_not() -> None:
    model, text = answer(GraphInputs(now_ms=0, **EVERYTHING_READ))  # type: ignore[arg-type]
    assert model.healthy and "Healthy" in text, text
    dead = {
        "node_id": "n" * 56,
        "node_ip": "10.0.0.2",
        "state": "DEAD",
        "end_time_ms": 1,
        "state_message": "UNEXPECTED_TERMINATION: the raylet died (SIGKILL)",
    }
    ev = GraphInputs(now_ms=0, **{**EVERYTHING_READ, "nodes": [dead]})  # type: ignore[arg-type]
    model, text = answer(ev)
    assert not model.healthy and "(10.0.0.2) died at" in model.verdict and "SIGKILL" in model.verdict, text


def test_a_cluster_whose_sources_could_not_be_read_is_unknown_and_says_which() -> None:
    model, text = answer(
        GraphInputs(now_ms=0, unchecked=["dead actors"], notes=["Could not check dead actors: x"])
    )
    assert model.status == "UNKNOWN" and "dead actors" in model.verdict, text


def test_memory_pressure_is_named_in_gib_with_its_node() -> None:
    node = {
        "node_id": "a" * 56,
        "ip": "10.0.0.1",
        "state": "ALIVE",
        "is_head": True,
        "resources": {"memory": {"used": 4.0 * 1024**3 * 0.97, "total": 4.0 * 1024**3}},
    }
    ev = GraphInputs(now_ms=0, **{**EVERYTHING_READ, "status": {"nodes": [node], "pending_demands": []}})  # type: ignore[arg-type]
    model, text = answer(ev)
    assert "memory on node" in model.verdict and "97% used (3.88 GiB of 4 GiB)" in model.verdict, text
    assert "e+09" not in text


def test_many_findings_stay_within_the_byte_budget() -> None:
    words = ["disk", "gpu", "oom", "pg", "serve", "node", "job", "actor", "task", "event"]
    many = [
        finding(50 - i, f"{words[i % 10]} {words[i // 10]} " + "x" * 100, ["evidence " + "y" * 200] * 12, "k")
        for i in range(40)
    ]
    ev = GraphInputs(now_ms=0, notes=["a note"])
    model, text = report.health_answer("http://x:8265", ev, many, max_bytes=BUDGET)
    assert len(text.encode()) <= BUDGET and "left out" in text
    assert 1 <= len(model.findings) < 40


def test_findings_that_differ_only_in_numbers_and_ids_are_one_that_counts_and_quotes_the_others() -> None:
    alike = [
        finding(
            60,
            f"KeyError: 'shard {n} has no column' raised in shard (pid {pid}, 10.0.0.{n})",
            [f"e{n}"],
            kind="raised",
        )
        for n, pid in ((3, 2810), (1, 2807), (5, 2816))
    ]
    other = [
        finding(60, "KeyError: 'shard 2 has no row' raised in shard (pid 2811, 10.0.0.2)", kind="raised"),
        finding(
            60,
            "KeyError: 'shard 3 has no column' raised in shard (pid 2810, 10.0.0.3)",
            kind="driver_exception",
        ),
        finding(90, f"1 node(s) are DEAD: {'a' * 56}", kind="dead_node"),
    ]
    merged = merge_alike([*alike, *other])
    assert [f.title for f in merged] == [
        other[2].title,
        alike[0].title + " (and 2 more like it)",
        other[0].title,
        other[1].title,
    ]
    assert merged[1].evidence == ["e3", f"also: {alike[1].title}", f"also: {alike[2].title}"]
