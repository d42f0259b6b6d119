"""Causal chains on a real cluster: each edge type of the evidence graph, found from the symptom to its last link.

One private head per module (destructive scenarios: a memory monitor armed just above the machine's current
use, and a worker node that the node-death test kills by pid), never the session head. Every scenario is a
small Ray program submitted as a job through the real MCP client; set RAY_MCP_RECORD=1 to save each scenario's
evidence to tests/recorded/ for the replay tests (test_causal_replay.py).
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client
from tests.causal_support import RECORDED, record
from tests.conftest import QUICK_NODE_DEATH_ENV, local_head
from tests.support import TERMINAL, call_ok, mcp_client, submit, wait_until
from tests.test_multi_node import LocalWorker

from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.limits import DIAGNOSIS_BYTES
from ray_mcp.local_head import LocalHead, ray_executable
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

BUDGET = 6_000


@pytest.fixture(scope="module")
def head() -> Iterator[LocalHead]:
    with local_head(
        num_cpus=4, attempts=6, resources=json.dumps({"accel": 2}), extra_env=QUICK_NODE_DEATH_ENV
    ) as head:
        yield head


@pytest.fixture
def oom_head() -> Iterator[LocalHead]:
    """A head whose memory monitor kills a worker once the machine uses 2.5 GB more than now (armed only for
    the OOM scenario: other heads on this machine move the baseline, and would get this head's workers killed)."""
    vm = psutil.virtual_memory()
    threshold = min(0.95, (vm.total - vm.available + 2.5 * 1024**3) / vm.total)
    env = {"RAY_memory_usage_threshold": f"{threshold:.3f}", "RAY_memory_monitor_refresh_ms": "100"}
    with local_head(num_cpus=4, attempts=6, extra_env=env) as head:
        yield head


def settings(head: LocalHead, tmp_path: Path) -> Settings:
    # The scenarios upload their working dirs from the session's temp root.
    return Settings(address=head.dashboard_url, allow_destructive=True, upload_roots=[tmp_path.parent.parent])


@pytest.fixture
async def mcp(head: LocalHead, tmp_path: Path) -> AsyncIterator[Client]:
    async with mcp_client(settings(head, tmp_path)) as client:
        yield client


async def diagnose(client: Client, job: str) -> tuple[dict, str]:
    result = await call_ok(client, "diagnose_job", {"job": job})
    text = result.content[0].text
    assert len(text.encode()) <= BUDGET, len(text.encode())
    first = text.splitlines()[0]
    assert len(first.encode()) <= 300 and first == result.structured_content["verdict"]
    return result.structured_content, text


async def run(client: Client, tmp_path: Path, source: str, *, end: bool = True, **kw) -> str:
    (tmp_path / "main.py").write_text(textwrap.dedent(source))
    sid = await submit(client, entrypoint="python main.py", runtime_env={"working_dir": str(tmp_path)}, **kw)
    if end:
        await wait_until(client, sid, TERMINAL, 240)
    return sid


async def log_line(client: Client, job: str, needle: str, deadline_s: float = 180) -> None:
    """Wait until the job's driver printed ``needle`` (its log exists once the driver started)."""
    with anyio.fail_after(deadline_s):
        while True:
            result = await client.call_tool("tail_logs", {"job": job})
            if not result.is_error and needle in result.content[0].text:
                return
            await anyio.sleep(1)


async def join_alive(client: Client, worker: LocalWorker, resource: str, attempts: int = 2) -> None:
    """Spawn ``worker`` and wait until its node (the one with ``resource``) is ALIVE.

    Under load a raylet can miss Ray's 30 s registration window and exit: that is the machine, not what these
    tests check, so such a start is retried once. A worker that never registers fails here, with Ray's words,
    instead of as a driver that waits for its actor.
    """
    for attempt in range(attempts):
        worker.spawn()
        with anyio.fail_after(180):
            while worker.process is not None and worker.process.poll() is None:
                nodes = (await call_ok(client, "cluster_status", {})).structured_content["nodes"]
                if any(n["state"] == "ALIVE" and resource in n.get("resources", {}) for n in nodes):
                    return
                await anyio.sleep(1)
        if attempt + 1 == attempts:
            pytest.fail(f"the worker node never registered: {worker.failure_cause()}")


async def until(client: Client, job: str, predicate, deadline_s: float = 120) -> tuple[dict, str]:
    """Diagnose until the answer satisfies ``predicate`` (Ray's state lags by a second or two)."""
    with anyio.fail_after(deadline_s):
        while True:
            data, text = await diagnose(client, job)
            if predicate(data, text):
                return data, text
            await anyio.sleep(1)


OOM = """\
import ray, time
ray.init()

@ray.remote(max_retries=0)
def tokenize_shard(n):
    held = []
    for _ in range(60):
        held.append(bytearray(200 * 1024 * 1024))
        time.sleep(0.05)
    return len(held)

print(ray.get(tokenize_shard.remote(1)))
"""


async def test_a_memory_monitor_kill_names_the_task_the_node_the_memory_and_no_retry(
    oom_head: LocalHead, tmp_path: Path
) -> None:
    head = oom_head
    async with mcp_client(settings(head, tmp_path)) as mcp:
        await oom_scenario(mcp, head, tmp_path)


async def oom_scenario(mcp: Client, head: LocalHead, tmp_path: Path) -> None:
    for _attempt in range(2):
        sid = await run(mcp, tmp_path, OOM)
        data, text = await diagnose(mcp, sid)
        # Other processes on this machine can push it over the threshold before the task allocates: then the
        # monitor kills the job's driver or supervisor instead (and the diagnosis says so). Run it once more.
        if "driver process was killed by the memory monitor" not in data["verdict"]:
            break
    verdict = data["verdict"]
    assert verdict.startswith("FAILED"), text
    assert "tokenize_shard" in verdict and "memory monitor" in verdict, text
    assert "GB used" in verdict and "threshold" in verdict, text
    assert "not retried" in text or "1 attempt" in text, text
    assert data["findings"][0]["kind"] == "oom"
    await record(head.dashboard_url, sid, "oom_task")
    # cluster_health names it too, and lists the memory monitor's event, newest first. The raylet writes the event
    # to its event file when it kills; the dashboard agent scans that directory every 2 s, so the event reaches
    # the dashboard a few seconds after the task's error (more on a loaded machine): ask again until it has.
    with anyio.fail_after(60):
        while True:
            health = (await call_ok(mcp, "cluster_health", {})).structured_content
            assert any("memory monitor" in f["title"] for f in health["findings"]), health
            if any("OOM kill" in e for e in health["events"]):
                break
            await anyio.sleep(1)


RESTART_LOOP = """\
import os, threading, time, ray
ray.init()

@ray.remote(max_restarts=-1, num_cpus=0)
class RolloutWorker:
    def __init__(self):
        threading.Thread(target=lambda: (time.sleep(1.0), os._exit(3)), daemon=True).start()
    def ping(self):
        return 1

w = RolloutWorker.remote()
while True:
    time.sleep(1)
"""


async def test_an_actor_restarting_in_a_loop_makes_a_running_job_unhealthy(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, RESTART_LOOP, end=False)
    try:
        await wait_until(mcp, sid, {"RUNNING"})
        data, text = await until(mcp, sid, lambda d, t: "about every" in t)
        verdict = data["verdict"]
        assert verdict.startswith("RUNNING") and "not healthy" in verdict, text
        assert "RolloutWorker" in verdict and "restarted" in verdict, text
        assert "about every" in text, text  # the interval
        await record(head.dashboard_url, sid, "restart_loop")
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


OWNER = """\
import time, ray
ray.init()

@ray.remote(num_cpus=0)
class FeatureStore:
    def load(self):
        return [ray.put(b"x" * 300_000)]

@ray.remote(max_retries=0, num_cpus=0)
def featurize(batch):
    return len(batch)

store = FeatureStore.remote()
[ref] = ray.get(store.load.remote())
ray.kill(store)
time.sleep(2)
print(ray.get(featurize.remote(ref)))
"""


async def test_a_lost_owner_is_named_by_joining_its_worker_to_the_actor_and_why_it_died(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, OWNER)
    data, text = await diagnose(mcp, sid)
    verdict = data["verdict"]
    assert verdict.startswith("FAILED"), text
    assert "FeatureStore" in verdict and "ray.kill" in verdict, text
    assert '[owns] the owner was actor "FeatureStore"' in text
    assert data["findings"][0]["kind"] == "owner_died"
    await record(head.dashboard_url, sid, "owner_died")


HOLDER = """\
import time, ray
ray.init()

@ray.remote(resources={"accel": 1}, num_cpus=0)
class TrainWorker:
    def step(self):
        return 1

workers = [TrainWorker.remote() for _ in range(2)]
ray.get([w.step.remote() for w in workers])
print("holding both accelerators", flush=True)
while True:
    time.sleep(1)
"""

WAITER = """\
import ray
ray.init()

@ray.remote(resources={"accel": 1}, num_cpus=0)
class Embedder:
    def embed(self):
        return 1

e = Embedder.remote()
print(ray.get(e.embed.remote()))
"""

INFEASIBLE = """\
import ray
ray.init()

@ray.remote(num_gpus=4)
def finetune():
    return 1

print(ray.get(finetune.remote()))
"""


async def test_contention_names_the_holders_and_their_job_and_infeasible_says_no_node_fits(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "c").mkdir()
    holder = await run(mcp, tmp_path / "a", HOLDER, end=False)
    waiter = infeasible = ""
    try:
        await log_line(mcp, holder, "holding both")
        holder_id = (await call_ok(mcp, "get_job", {"job": holder})).structured_content["job_id"]
        waiter = await run(mcp, tmp_path / "b", WAITER, end=False)
        infeasible = await run(mcp, tmp_path / "c", INFEASIBLE, end=False)
        data, text = await until(
            mcp, waiter, lambda d, t: d["findings"] and d["findings"][0]["kind"] == "contention"
        )
        verdict = data["verdict"]
        assert "Embedder" in verdict and "accel" in verdict, text
        assert "TrainWorker" in verdict and holder_id in verdict, text  # the holders, and their job
        await record(head.dashboard_url, waiter, "contention")
        data, text = await until(
            mcp, infeasible, lambda d, t: d["findings"] and d["findings"][0]["kind"] == "infeasible"
        )
        assert (
            "finetune" in data["verdict"] and "GPU" in data["verdict"] and "no alive node" in data["verdict"]
        ), text
        # Attribution: the holder's own diagnosis does not report the other jobs' waiting work.
        data, text = await diagnose(mcp, holder)
        assert "Embedder" not in text and "finetune" not in text, text
        assert data["verdict"].startswith("RUNNING"), text
    finally:
        for job in (holder, waiter, infeasible):
            if job:
                await mcp.call_tool("stop_job", {"job": job})


SEVERITY = """\
import os, tempfile, ray
ray.init()
counter = os.path.join(tempfile.mkdtemp(), "attempts")

@ray.remote(max_retries=5, retry_exceptions=True, num_cpus=0)
def fetch_shard(path):
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    if n < 3:
        raise ConnectionResetError(f"peer reset on attempt {n}")
    return n

@ray.remote(num_cpus=0)
def straggler():
    import time
    time.sleep(300)

@ray.remote(num_cpus=0)
class Scratch:
    def ping(self):
        return 1

print(ray.get(fetch_shard.remote(counter)))
ref = straggler.remote()
ray.cancel(ref, force=True)
s = Scratch.remote()
ray.get(s.ping.remote())
ray.kill(s)
print("done")
"""


async def test_a_succeeded_job_says_so_first_and_retries_are_a_warning_not_a_failure(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, SEVERITY)
    data, text = await until(mcp, sid, lambda d, t: "retried" in t)
    verdict = data["verdict"]
    assert verdict.startswith("SUCCEEDED"), text
    assert "3 attempt(s) of fetch_shard failed with ConnectionResetError; all retried successfully" in text
    assert "cancelled" in text and "not a failure" in text
    assert not any(
        f["kind"] in ("failed", "raised", "killed") and f["severity"] >= 40 for f in data["findings"]
    )
    await record(head.dashboard_url, sid, "severity")


DEADLOCK = """\
import ray
ray.init()

@ray.remote(num_cpus=0)
class Trainer:
    def set_peer(self, peer):
        self.peer = peer
    def sync(self):
        return ray.get(self.peer.report.remote())
    def report(self):
        return 1

@ray.remote(num_cpus=0)
class ParamServer:
    def set_peer(self, peer):
        self.peer = peer
    def report(self):
        return ray.get(self.peer.report.remote())

t, p = Trainer.remote(), ParamServer.remote()
ray.get([t.set_peer.remote(p), p.set_peer.remote(t)])
print(ray.get(t.sync.remote()))
"""


async def test_two_actors_waiting_for_each_other_are_a_deadlock_named_with_both(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, DEADLOCK, end=False)
    try:
        data, text = await until(mcp, sid, lambda d, t: "deadlock" in d["verdict"].lower())
        assert data["verdict"].startswith("RUNNING"), text
        assert "Trainer" in text and "ParamServer" in text, text
        await record(head.dashboard_url, sid, "deadlock")
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


PG_REMOVED = """\
import time, ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
ray.init()

pg = placement_group([{"CPU": 1}], name="rollout-gang")
ray.get(pg.ready())

@ray.remote(num_cpus=1)
class Rollout:
    def step(self):
        return 1

r = Rollout.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg)).remote()
ray.get(r.step.remote())
remove_placement_group(pg)
time.sleep(2)
print(ray.get(r.step.remote()))
"""


async def test_an_actor_ended_by_its_placement_groups_removal_names_the_group(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, PG_REMOVED)
    data, text = await diagnose(mcp, sid)
    verdict = data["verdict"]
    assert verdict.startswith("FAILED"), text
    assert "Rollout" in verdict and "rollout-gang" in verdict and "removed" in verdict, text
    await record(head.dashboard_url, sid, "pg_removed")


NODE_DEATH = """\
import time, ray
ray.init()

@ray.remote(resources={"spot": 1}, num_cpus=0)
class ReplayBuffer:
    def add(self, i):
        return i

buf = ReplayBuffer.remote()
print("ready", ray.get(buf.add.remote(0)), flush=True)
i = 0
while True:
    ray.get(buf.add.remote(i))
    i += 1
    time.sleep(0.2)
"""


async def test_a_node_death_is_the_cause_of_the_actor_it_took_down(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    worker = LocalWorker(num_cpus=1, resources=json.dumps({"spot": 1}), head_gcs_address=head.gcs_address)
    sid = ""
    try:
        await join_alive(mcp, worker, "spot")
        sid = await run(mcp, tmp_path, NODE_DEATH, end=False)
        await log_line(mcp, sid, "ready 0", 360)
        nodes = (await call_ok(mcp, "cluster_status", {})).structured_content["nodes"]
        [spot] = [n["node_id"] for n in nodes if not n["is_head"] and n["state"] == "ALIVE"]
        raylets = [p for p in map(psutil.Process, worker.owned_pids()) if "raylet" in " ".join(p.cmdline())]
        assert raylets, "the worker node's raylet"
        for proc in raylets:
            os.kill(proc.pid, signal.SIGKILL)
        await wait_until(mcp, sid, TERMINAL, 300)
        # The driver's call fails at once (ActorUnavailableError) and the driver exits, so Ray records the actor
        # as OWNER_DIED; the GCS marks the node DEAD only after its health checks fail. Then the verdict names
        # the actor, its node and the node's death (time and reason).
        data, text = await until(mcp, sid, lambda d, t: "died at" in d["verdict"], 240)
        verdict = data["verdict"]
        assert verdict.startswith("FAILED"), text
        assert "ReplayBuffer" in verdict and "died with its node" in verdict and spot[:12] in verdict, text
        assert "health check" in verdict, text
        await record(head.dashboard_url, sid, "node_death")
        health = (await call_ok(mcp, "cluster_health", {})).structured_content
        assert any(
            f["kind"] == "node_died" and "ReplayBuffer" in json.dumps(f) for f in health["findings"]
        ), health
    finally:
        if sid:
            await mcp.call_tool("stop_job", {"job": sid})
        worker.stop()


# -- the rules of issue 31, each recorded for its unit test (tests/test_diagnosis_rules.py) -------------------

PROGRESS = """\
import ray, time
ray.init()

@ray.remote(num_cpus=0.5)
def step(i):
    time.sleep(0.3)
    return i

print("looping", flush=True)
while True:
    ray.get([step.remote(i) for i in range(2)])
"""


async def test_a_driver_in_ray_get_while_its_tasks_finish_is_healthy_first(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, PROGRESS, end=False)
    try:
        await log_line(mcp, sid, "looping")
        await until(mcp, sid, lambda d, t: "healthy: its tasks are finishing" in d["verdict"], 60)
        await check_and_record(head, sid, "progressing")
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


LABELS = """\
import ray
ray.init()

@ray.remote(num_cpus=0, label_selector={"accelerator": "H100"})
class Trainer:
    def ping(self):
        return 1

t = Trainer.remote()
print("submitted", flush=True)
ray.get(t.ping.remote())
"""


async def test_an_actor_whose_label_selector_no_node_matches_waits_forever_not_on_contention(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, LABELS, end=False)
    try:
        await log_line(mcp, sid, "submitted")
        await until(mcp, sid, lambda d, t: "label_selector" in d["verdict"], 60)
        await check_and_record(head, sid, "label_selector")
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


KEEPER = """\
import ray
ray.init(namespace="issue31")

@ray.remote(num_cpus=0, resources={"accel": 2})
class Keeper:
    def ping(self):
        return 1

k = Keeper.options(name="keeper", lifetime="detached").remote()
ray.get(k.ping.remote())
print("kept", flush=True)
"""

LEARNER = """\
import ray
ray.init()

@ray.remote(num_cpus=0, resources={"accel": 1})
class Learner:
    def ping(self):
        return 1

l = Learner.remote()
print("submitted", flush=True)
ray.get(l.ping.remote())
"""

RELEASE = """\
import ray
ray.init(namespace="issue31")
ray.kill(ray.get_actor("keeper"))
"""


async def test_a_detached_actor_of_an_ended_job_is_named_as_the_holder_to_release_first(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    keeper = await run(mcp, tmp_path, KEEPER)
    sid = ""
    try:
        assert (await call_ok(mcp, "get_job", {"job": keeper})).structured_content["status"] == "SUCCEEDED"
        sid = await run(mcp, tmp_path, LEARNER, end=False)
        await log_line(mcp, sid, "submitted")
        await until(mcp, sid, lambda d, t: "releasing" in t, 60)
        await check_and_record(head, sid, "release_first")
    finally:
        if sid:
            await mcp.call_tool("stop_job", {"job": sid})
        await run(mcp, tmp_path, RELEASE)


async def test_a_runtime_env_that_cannot_be_set_up_names_the_field_that_decided(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    (tmp_path / "main.py").write_text("print('never runs')\n")
    env = {"working_dir": str(tmp_path), "conda": "no-such-env-issue31"}
    sid = await submit(mcp, entrypoint="python main.py", runtime_env=env)
    await wait_until(mcp, sid, TERMINAL, 240)
    await check_and_record(head, sid, "runtime_env_failed")


async def check_cluster_and_record(head: LocalHead, name: str, deadline_s: float = 120) -> None:
    """The rule's check over cluster_health's evidence gathered now (again until it holds: a loop's state
    flips), then that evidence recorded for its unit test."""
    from tests.causal_support import gather_cluster

    await check_until_and_record(lambda: gather_cluster(head.dashboard_url), name, deadline_s)


async def check_until_and_record(
    gather: Callable[[], Awaitable[GraphInputs]], name: str, deadline_s: float
) -> None:
    """The rule's check over evidence from ``gather()``, gathered again until it holds (a loop's state flips:
    between two failed health checks a replaced replica is healthy), then recorded for its unit test."""
    from tests.rule_checks import EXPECT

    with anyio.fail_after(deadline_s):
        while True:
            ev = await gather()
            try:
                EXPECT[name](ev)
                break
            except AssertionError:
                await anyio.sleep(1)
    if os.environ.get("RAY_MCP_RECORD") == "1":
        (RECORDED / f"{name}.json").write_text(ev.to_json())


async def check_and_record(head: LocalHead, sid: str, name: str) -> None:
    """The rule's check over evidence gathered now from the real cluster, then recorded for its unit test."""
    from tests.causal_support import gather
    from tests.rule_checks import EXPECT

    await record(head.dashboard_url, sid, name)  # first: a failing check's evidence is kept to reason over
    EXPECT[name](await gather(head.dashboard_url, sid))


DATA_STALL = """\
import time
import ray
ray.init()

def slow(batch):
    time.sleep(3600)
    return batch

ds = (
    ray.data.range(1000, override_num_blocks=20)
    .map_batches(lambda b: b, batch_size=50)
    .map_batches(slow, batch_size=50, num_cpus=0.5)
    .map_batches(lambda b: b, batch_size=50)
)
for _ in ds.iter_batches():
    pass
"""


@pytest.mark.usefixtures("quick_stall")
async def test_a_stalled_ray_data_pipeline_names_its_bottleneck_operator(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, DATA_STALL, end=False)
    try:
        await log_line(mcp, sid, "Running Dataset")
        await until(mcp, sid, lambda d, t: "makes no progress" in d["verdict"], 150)
        job = await call_ok(mcp, "get_job", {"job": sid, "datasets": True})
        text = job.content[0].text
        assert "bottleneck" in text and "MapBatches(slow)" in text and "backpressured" in text, text
        assert "MapBatches(slow)" in job.structured_content["data"]["datasets"][0]["bottleneck"], text
        await check_and_record(head, sid, "data_stall")
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


INFEASIBLE_GPU = """\
import ray
ray.init()

@ray.remote(num_gpus=4)
def train():
    return 1

ref = train.remote()
print("submitted", flush=True)
ray.get(ref)
"""


async def test_cluster_health_tells_an_infeasible_demand_with_the_autoscalers_words(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    from tests.causal_support import gather_cluster, record_cluster
    from tests.rule_checks import autoscaler_infeasible

    sid = await run(mcp, tmp_path, INFEASIBLE_GPU, end=False)
    try:
        await log_line(mcp, sid, "submitted")
        # The autoscaler reports the demand in its next round, then its event; the module's head holds other
        # tests' findings too, so the answer gets room for every finding.
        roomy = {"max_bytes": DIAGNOSIS_BYTES.high}
        with anyio.fail_after(180):
            while "no node type that can hold it" not in json.dumps(
                (await call_ok(mcp, "cluster_health", roomy)).structured_content
            ):
                await anyio.sleep(2)
        await record_cluster(head.dashboard_url, "autoscaler_infeasible")
        autoscaler_infeasible(await gather_cluster(head.dashboard_url))
    finally:
        await mcp.call_tool("stop_job", {"job": sid})


# -- Ray users' issues (issue 31): each class live, its check in tests/rule_checks.py -------------------------


async def worker_node(client: Client) -> str:
    """The id of the one ALIVE worker node, once its raylet has registered."""
    with anyio.fail_after(240):
        while True:
            nodes = (await call_ok(client, "cluster_status", {})).structured_content["nodes"]
            alive = [n["node_id"] for n in nodes if not n["is_head"] and n["state"] == "ALIVE"]
            if alive:
                return str(alive[0])
            await anyio.sleep(1)


async def node_state(client: Client, node_id: str, state: str) -> None:
    with anyio.fail_after(240):
        while True:
            nodes = (await call_ok(client, "list_nodes", {"state": state})).structured_content["nodes"]
            if any(n["node_id"] == node_id for n in nodes):
                return
            await anyio.sleep(1)


PINNED = """\
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()

@ray.remote(num_cpus=0)
class ShardCache:
    def ping(self):
        return 1

@ray.remote(num_cpus=0, max_retries=0)
def read_local_shard():
    return 1

node = open("node_id").read().strip()
hard = NodeAffinitySchedulingStrategy(node, soft=False)
cache = ShardCache.options(scheduling_strategy=hard).remote()
try:
    ray.get(cache.ping.remote())
except ray.exceptions.ActorUnschedulableError as e:
    print("cache unavailable:", type(e).__name__, flush=True)
print(ray.get(read_local_shard.options(scheduling_strategy=hard).remote()))
"""


async def test_work_bound_by_hard_node_affinity_to_a_dead_node_names_that_node_and_its_death(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    worker = LocalWorker(num_cpus=1, resources=json.dumps({"disk": 1}), head_gcs_address=head.gcs_address)
    try:
        await join_alive(mcp, worker, "disk")
        gone = await worker_node(mcp)
    finally:
        worker.stop()
    await node_state(mcp, gone, "DEAD")
    (tmp_path / "node_id").write_text(gone)
    sid = await run(mcp, tmp_path, PINNED)
    await check_and_record(head, sid, "node_affinity")
    data, _ = await diagnose(mcp, sid)
    assert gone[:12] in data["verdict"], data["verdict"]  # the node this cluster saw die, not a lease id


SIGKILLED = """\
import os, signal, ray
ray.init()

@ray.remote(num_cpus=0, max_retries=0)
def decode_batch():
    os.kill(os.getpid(), signal.SIGKILL)

print(ray.get(decode_batch.remote()))
"""


async def test_a_task_whose_worker_is_sigkilled_is_said_to_be_killed_not_left_unexplained(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    sid = await run(mcp, tmp_path, SIGKILLED)
    await check_and_record(head, sid, "worker_killed")


SERVE_LOOP = """\
import socket, time, ray
from ray import serve
ray.init()
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
serve.start(http_options={"host": "127.0.0.1", "port": port})

@serve.deployment(health_check_period_s=1, health_check_timeout_s=2, ray_actor_options={"num_cpus": 0})
class Reranker:
    def __init__(self):
        self.checks = 0
    def check_health(self):
        self.checks += 1
        if self.checks > 3:
            raise RuntimeError("reranker lost its CUDA context")
    def __call__(self, request):
        return "ok"

print("deploying", flush=True)
serve.run(Reranker.bind(), name="ranker", route_prefix="/rank")
while True:
    time.sleep(1)
"""

SERVE_SHUTDOWN = """\
import ray
from ray import serve
ray.init()
serve.shutdown()
"""


async def test_a_serve_replica_failing_its_health_check_in_a_loop_is_named_with_its_settings(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "down").mkdir()
    sid = await run(mcp, tmp_path / "app", SERVE_LOOP, end=False)
    try:
        await log_line(mcp, sid, "deploying")
        # Serve starts its controller and proxy, then replaces the replica every few seconds; the deployment is
        # UNHEALTHY from a failed check until the new replica passes one: ask until the answer catches it.
        with anyio.fail_after(300):
            while True:
                health = (await call_ok(mcp, "cluster_health", {})).structured_content
                if any(
                    f["kind"] == "serve_loop" and "health_check_period_s 1" in f["title"]
                    for f in health["findings"]
                ):
                    break
                await anyio.sleep(2)
        await check_cluster_and_record(head, "serve_health_loop")
        # diagnose_job of the job that deployed it says so first too (not "the driver sleeps").
        await until(mcp, sid, lambda d, t: "Reranker" in d["verdict"] and "health check" in d["verdict"], 120)
        from tests.causal_support import gather

        await check_until_and_record(lambda: gather(head.dashboard_url, sid), "serve_health_loop_job", 120)
    finally:
        await mcp.call_tool("stop_job", {"job": sid})
        await run(mcp, tmp_path / "down", SERVE_SHUTDOWN)


async def test_a_node_drained_while_work_runs_on_it_is_named_as_drained_when_it_dies(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    """Ray 2.60 shows a drain only once the node is DEAD (its death info); while it drains, the node is ALIVE
    with no state message in every dashboard source."""
    worker = LocalWorker(num_cpus=1, resources=json.dumps({"spot": 1}), head_gcs_address=head.gcs_address)
    sid = ""
    try:
        await join_alive(mcp, worker, "spot")
        sid = await run(mcp, tmp_path, NODE_DEATH, end=False)  # an actor on the spot node, called in a loop
        await log_line(mcp, sid, "ready 0", 360)
        spot = await worker_node(mcp)
        # What the autoscaler does to a preempted spot node: drain it with a deadline (here already due), then
        # the node goes away; the GCS then records the drain as the node's death reason.
        drain = await anyio.run_process(
            [
                ray_executable(),
                "drain-node",
                f"--address={head.gcs_address}",
                f"--node-id={spot}",
                "--reason=DRAIN_NODE_REASON_PREEMPTION",
                "--reason-message=spot instance reclaimed",
                "--deadline-remaining-seconds=0",
            ],
            check=False,
        )
        assert drain.returncode == 0, drain.stderr
        raylets = [p for p in map(psutil.Process, worker.owned_pids()) if "raylet" in " ".join(p.cmdline())]
        for proc in raylets:
            os.kill(proc.pid, signal.SIGKILL)
        await wait_until(mcp, sid, TERMINAL, 300)
        await until(mcp, sid, lambda d, t: "drained" in d["verdict"], 240)
        await check_and_record(head, sid, "node_drained")
        # The module's head has other tests' dead nodes too: room for every finding.
        health = (
            await call_ok(mcp, "cluster_health", {"max_bytes": DIAGNOSIS_BYTES.high})
        ).structured_content
        assert any(f["kind"] == "node_died" and "drained" in json.dumps(f) for f in health["findings"]), (
            health
        )
    finally:
        if sid:
            await mcp.call_tool("stop_job", {"job": sid})
        worker.stop()
