"""stack_traces, cpu_profile and the stall finding of diagnose_job, on hangs made on the session's real cluster.

The session head runs with RAY_DASHBOARD_ENABLE_PROFILING=1 (LocalHead turns it on), so "auto" reads stacks
through the dashboard's /worker/traceback; a server set to stack_source="py-spy" runs py-spy here instead.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult
from tests.conftest import Cluster
from tests.support import call_ok, mcp_client, submit, text_of

from ray_mcp.limits import RESULT_ENVELOPE_BYTES, STACK_BYTES, STACK_WHOLE_SHARE
from ray_mcp.settings import Settings

BUDGET = 6_000

# 4 trainers meet at a barrier actor; rank 3 never arrives: it loops in a sleep inside project code.
BARRIER_JOB = """\
import asyncio
import time

import ray

ray.init()


@ray.remote(num_cpus=0)
class Rendezvous:
    def __init__(self, world):
        self.world = world
        self.arrived = 0

    async def arrive(self):
        self.arrived += 1
        while self.arrived < self.world:
            await asyncio.sleep(0.1)
        return self.arrived


@ray.remote(num_cpus=0)
class Trainer:
    def __init__(self, rank, rendezvous):
        self.rank = rank
        self.rendezvous = rendezvous

    def epoch(self):
        if self.rank == 3:
            return self.fetch_shard()
        return ray.get(self.rendezvous.arrive.remote())

    def fetch_shard(self):
        while True:
            time.sleep(0.2)


rendezvous = Rendezvous.remote(4)
trainers = [Trainer.remote(rank, rendezvous) for rank in range(4)]
print("epoch 0", flush=True)
ray.get([t.epoch.remote() for t in trainers])
"""

# Two ledgers that each wait for the other: a.transfer runs, calls b.transfer, which calls a.transfer again,
# queued behind the first forever.
DEADLOCK_JOB = """\
import ray

ray.init()


@ray.remote(num_cpus=0)
class Ledger:
    def attach(self, other):
        self.other = other

    def transfer(self, hops):
        return ray.get(self.other.transfer.remote(hops + 1))


a, b = Ledger.remote(), Ledger.remote()
ray.get([a.attach.remote(b), b.attach.remote(a)])
print("transferring", flush=True)
ray.get(a.transfer.remote(0))
"""

# An actor that burns CPU in a project function.
BUSY_JOB = """\
import hashlib

import ray

ray.init()


def digest_rows(n):
    h = hashlib.sha256()
    total = 0
    for i in range(n):
        total += (i * i) % 7
    h.update(str(total).encode())
    return h.hexdigest()


@ray.remote(num_cpus=0)
class Indexer:
    def build(self):
        while True:
            digest_rows(20000)


indexer = Indexer.remote()
print("indexing", flush=True)
ray.get(indexer.build.remote())
"""


def line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


def as_sent(result: CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def sizes(result: Any) -> tuple[int, int]:
    return len(text_of(result).encode()), len(json.dumps(result.structured_content).encode())


async def poll(check: Callable[[], Awaitable[Any]], deadline_s: float, what: str) -> Any:
    """Call ``check`` until it returns something truthy (a box shared by 8 helpers is slow)."""
    last: Any = None
    try:
        with anyio.fail_after(deadline_s):
            while True:
                last = await check()
                if last:
                    return last
                await anyio.sleep(1.0)
    except TimeoutError:
        raise AssertionError(f"{what} did not happen within {deadline_s} s; last: {last!r}") from None


async def stop(client: Client, job: str) -> None:
    await client.call_tool("stop_job", {"job": job})


def job_dir(tmp_path: Path, name: str, source: str) -> dict[str, Any]:
    (tmp_path / name).write_text(source)
    return {"entrypoint": f"python {name}", "runtime_env": {"working_dir": str(tmp_path)}}


@pytest.fixture
async def pyspy_client(ray_cluster: Cluster) -> AsyncIterator[Client]:
    """A server that reads stacks with py-spy on this host only."""
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, stack_source="py-spy")) as c:
        yield c


async def job_stacks(client: Client, job: str, processes: int) -> Any:
    async def ready() -> Any:
        result = await client.call_tool("stack_traces", {"job": job})
        if result.is_error:
            return None
        data = result.structured_content
        busy = [g for g in data["groups"] if "idle" not in g["frames"][0]]
        return result if data["processes_sampled"] >= processes and len(busy) >= 3 else None

    return await poll(ready, 240, f"{processes} processes of job {job} with their stacks")


@pytest.mark.usefixtures("quick_stall")
async def test_stack_traces_collapse_a_barrier_hang_and_put_the_straggler_first(
    client: Client, pyspy_client: Client, tmp_path: Path
) -> None:
    sid = await submit(client, **job_dir(tmp_path, "trainer.py", BARRIER_JOB))
    wait_line = line_of(BARRIER_JOB, "return ray.get(self.rendezvous")
    sleep_line = line_of(BARRIER_JOB, "time.sleep(0.2)")
    driver_line = line_of(BARRIER_JOB, "ray.get([t.epoch")
    try:
        for c, source in ((client, "dashboard"), (pyspy_client, "py-spy")):
            started = time.monotonic()
            result = await job_stacks(c, sid, processes=6)  # driver, 4 trainers, the rendezvous actor
            data, text = result.structured_content, text_of(result)
            assert data["source"] == source, data
            assert data["processes_total"] == 6 and data["processes_failed"] == 0, data
            groups = {(g["role"], g["count"], g["of"]): g for g in data["groups"]}
            blocked = groups[("Trainer", 3, 4)]
            assert blocked["blocked_in"] == "ray.get", blocked
            assert blocked["where"] == f"trainer.py:{wait_line} in Trainer.epoch", blocked
            straggler = groups[("Trainer", 1, 4)]
            assert straggler["where"] == f"trainer.py:{sleep_line} in Trainer.fetch_shard", straggler
            assert "blocked_in" not in straggler  # it is in project code, not in a Ray call
            assert data["groups"][0] == straggler  # the odd one out comes first
            driver = groups[("driver", 1, 1)]
            assert (
                driver["blocked_in"] == "ray.get"
                and driver["where"] == f"trainer.py:{driver_line} in <module>"
            )
            assert any("Ray frame" in f for f in blocked["frames"])  # Ray's frames are folded, counted
            assert not any("worker.py" in f for f in blocked["frames"])
            assert '1 of 4 "Trainer"' in data["verdict"] and "fetch_shard" in data["verdict"], data["verdict"]
            assert text.startswith(data["verdict"])
            assert max(sizes(result)) <= BUDGET, sizes(result)
            print(f"stack_traces via {source}: {time.monotonic() - started:.2f} s, {sizes(result)} bytes")

        # Asked for a small answer, the edge fits it: the straggler stays first, one note says what went.
        small = await call_ok(client, "stack_traces", {"job": sid, "max_bytes": STACK_BYTES.low})
        data, budget = small.structured_content, STACK_WHOLE_SHARE * STACK_BYTES.low + RESULT_ENVELOPE_BYTES
        assert as_sent(small) <= budget, as_sent(small)
        assert data["groups_left_out"] > 0 and data["groups"][0]["where"] == straggler["where"], data
        (note,) = [h for h in data["hints"] if "left out" in h]
        assert f"{data['groups_left_out']} more of these" in note and text_of(small).count("left out") == 1

        # Parallel calls on one server are safe and each answer is whole.
        results = await _gather(*(client.call_tool("stack_traces", {"job": sid}) for _ in range(6)))
        assert all(not r.is_error and r.structured_content["processes_sampled"] == 6 for r in results)

        # diagnose_job on the RUNNING job: once nothing moved for a while, the verdict says where it is stuck.
        async def stalled() -> Any:
            result = await call_ok(client, "diagnose_job", {"job": sid})
            return result if "No progress" in result.structured_content["verdict"] else None

        result = await poll(stalled, 240, "the stall verdict")
        data = result.structured_content
        assert data["findings"][0]["kind"] == "hang"
        assert "fetch_shard" in data["verdict"] and f"trainer.py:{sleep_line}" in data["verdict"], data[
            "verdict"
        ]
        assert len(data["verdict"].encode()) <= 300
        evidence = "\n".join(data["findings"][0]["evidence"])
        assert "waits on:" in evidence and "Trainer.epoch" in evidence, evidence
        assert len(text_of(result).encode()) <= BUDGET
    finally:
        await stop(client, sid)


async def test_diagnose_job_names_a_deadlock_between_two_actors(client: Client, tmp_path: Path) -> None:
    sid = await submit(client, **job_dir(tmp_path, "ledger.py", DEADLOCK_JOB))
    try:
        line = line_of(DEADLOCK_JOB, "return ray.get(self.other")

        async def both_blocked() -> Any:
            result = await client.call_tool("stack_traces", {"job": sid})
            if result.is_error:
                return None
            groups = result.structured_content["groups"]
            return next(
                (g for g in groups if g["role"] == "Ledger" and g["count"] == 2 and g.get("blocked_in")), None
            )

        group = await poll(both_blocked, 240, "both ledgers blocked")
        assert group["blocked_in"] == "ray.get" and group["where"] == f"ledger.py:{line} in Ledger.transfer"

        async def deadlock() -> Any:
            result = await call_ok(client, "diagnose_job", {"job": sid})
            return result if "deadlock" in result.structured_content["verdict"].lower() else None

        result = await poll(deadlock, 240, "the deadlock verdict")
        verdict = result.structured_content["verdict"]
        assert verdict.count("Ledger.transfer") >= 3, verdict  # the cycle: transfer -> transfer -> transfer
        finding = result.structured_content["findings"][0]
        assert finding["kind"] == "deadlock", finding
        evidence = "\n".join(finding["evidence"])
        assert 'queued behind task "Ledger.transfer"' in evidence, evidence
    finally:
        await stop(client, sid)


async def test_cpu_profile_names_the_hot_function_of_a_busy_actor(
    client: Client, pyspy_client: Client, tmp_path: Path
) -> None:
    sid = await submit(client, **job_dir(tmp_path, "indexer.py", BUSY_JOB))
    try:

        async def alive() -> Any:
            result = await call_ok(client, "list_actors", {"class_name": "Indexer", "state": "ALIVE"})
            actors = result.structured_content["actors"]
            return actors[0]["actor_id"] if actors else None

        actor_id = await poll(alive, 240, "the Indexer actor")
        for c, source in ((client, "dashboard"), (pyspy_client, "py-spy")):

            async def busy(c: Client = c) -> Any:
                result = await c.call_tool("cpu_profile", {"actor_id": actor_id, "duration_s": 2})
                return None if result.is_error or not result.structured_content["samples"] else result

            result = await poll(busy, 120, f"a CPU profile via {source}")
            data = result.structured_content
            assert data["source"] == source
            hot = data["functions"][0]
            assert hot["function"] == "digest_rows" and hot["project"] and hot["file"] == "indexer.py", data
            assert "digest_rows" in data["verdict"]
            assert max(sizes(result)) <= BUDGET
    finally:
        await stop(client, sid)


async def test_stack_traces_refuses_bad_targets_with_what_to_do(client: Client) -> None:
    cases = [
        ({}, "needs one target"),
        ({"job": "raysubmit_x", "actor_id": "a" * 32}, "needs one target"),
        ({"pid": 1234}, "needs node"),
        ({"actor_id": "nothex"}, "32 lowercase hex"),
        ({"actor_id": "0" * 32}, "list_actors"),
        ({"job": "raysubmit_doesnotexist"}, "list_jobs"),
    ]
    for args, expected in cases:
        result = await client.call_tool("stack_traces", args)
        assert result.is_error and expected in text_of(result), (args, text_of(result))
    result = await client.call_tool("cpu_profile", {"job": "raysubmit_x"})
    assert result.is_error and "one process" in text_of(result)


async def test_stack_traces_of_a_pid_that_is_not_a_ray_process_is_refused(
    client: Client, ray_cluster: Cluster
) -> None:
    other = subprocess.Popen(["sleep", "120"])
    try:
        nodes = (await call_ok(client, "list_nodes", {})).structured_content["nodes"]
        node = nodes[0]["node_id"]
        result = await client.call_tool("stack_traces", {"pid": other.pid, "node": node})
        assert result.is_error and "not an alive Ray worker or driver" in text_of(result), text_of(result)
    finally:
        other.kill()
        other.wait()


async def _gather(*aws: Awaitable[Any]) -> list[Any]:
    out: list[Any] = [None] * len(aws)

    async def run(i: int, aw: Awaitable[Any]) -> None:
        out[i] = await aw

    async with anyio.create_task_group() as tg:
        for i, aw in enumerate(aws):
            tg.start_soon(run, i, aw)
    return out


# An actor that floods both streams, then dies in __init__ with a deep traceback and a huge message.
CHATTY_JOB = """\
import ray

ray.init()


def descend(depth):
    if depth == 0:
        raise ValueError("shard index corrupt: " + "0123456789abcdef" * 400)
    return descend(depth - 1)


@ray.remote(num_cpus=0)
class Chatty:
    def __init__(self):
        import sys

        for i in range(400):
            print(f"step {i} " + "loss=0.1234 " * 14, flush=True)
            print(f"warn {i} " + "grad-norm high " * 11, file=sys.stderr, flush=True)
        descend(40)

    def ping(self):
        return 1


actor = Chatty.remote()
try:
    ray.get(actor.ping.remote())
except Exception as exc:
    print("actor died:", type(exc).__name__)
"""


async def test_the_follow_up_tools_of_a_diagnosis_stay_under_6_kb_by_default(
    client: Client, tmp_path: Path
) -> None:
    from tests.support import run_to_end

    _sid, info = await run_to_end(client, **job_dir(tmp_path, "chatty.py", CHATTY_JOB))
    assert info["status"] == "SUCCEEDED", info
    dead = (
        await call_ok(client, "list_actors", {"class_name": "Chatty", "state": "DEAD"})
    ).structured_content
    actor_id = dead["actors"][-1]["actor_id"]

    async def logged() -> Any:
        result = await call_ok(client, "tail_logs", {"actor_id": actor_id})
        return result if sum(len(s["lines"]) for s in result.structured_content["sections"]) >= 8 else None

    tail = await poll(logged, 60, "the actor's log lines")
    actor = await call_ok(client, "get_actor", {"actor_id": actor_id})
    assert "shard index corrupt" in text_of(actor)
    for result in (tail, actor):
        assert max(sizes(result)) <= BUDGET, sizes(result)
    assert "budget" in text_of(tail) or "left out" in text_of(tail)  # it says what was cut
