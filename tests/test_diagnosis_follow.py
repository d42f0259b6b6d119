"""Issue 39 on the session head: each answer follows the first fact to what it points at (an unserialisable
argument's attribute, a missing file's runtime_env, Ray's own data handling, the warning an async actor's
blocking get logs, a placement group its own actors hold, an address that is not this cluster's). Every
scenario records its evidence (tests/recorded/<name>.json with RAY_MCP_RECORD=1) and is checked by the same
function over the live answer and over the recording (tests/follow_checks.py, test_diagnosis_follow_replay.py).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.causal_support import follow_scenario
from tests.support import submit, text_of

pytestmark = pytest.mark.live


@pytest.fixture
def follow(client: Client, ray_cluster: Any, tmp_path: Path) -> Any:
    """Run a scenario on the session head from this test's tmp_path (tests/causal_support.follow_scenario)."""
    return partial(follow_scenario, client, ray_cluster.dashboard_url, tmp_path)


UNSERIALISABLE = """\
import threading

import ray


class FeatureStoreClient:
    def __init__(self, url):
        self.url = url
        self._session_lock = threading.Lock()


@ray.remote
def featurize(client, rows):
    return [client.url for _ in rows]


ray.init()
store = FeatureStoreClient("http://features.internal")
print(ray.get(featurize.remote(store, [1, 2, 3])))
"""


async def test_an_unserialisable_argument_names_the_attribute_that_holds_the_lock_and_the_call_site(
    follow: Any,
) -> None:
    await follow("follow_unserialisable", UNSERIALISABLE)


MISSING_FILE = """\
import ray


@ray.remote
def load_shard(path):
    with open(path) as f:
        return len(f.read())


ray.init()
print(ray.get(load_shard.remote("data/train.csv")))
"""


async def test_a_missing_file_names_the_runtime_env_exclude_that_left_it_out(follow: Any) -> None:
    await follow(
        "follow_missing_file",
        MISSING_FILE,
        files={"data/train.csv": "a,b\n1,2\n"},
        runtime_env={"excludes": ["data/"]},
    )


READ_ONLY = """\
import numpy as np
import ray


@ray.remote
def normalise(batch):
    batch -= batch.mean()
    return batch


ray.init()
features = np.random.rand(1_000_000)
print(ray.get(normalise.remote(features)).sum())
"""


async def test_a_read_only_array_from_the_object_store_is_explained_as_zero_copy(follow: Any) -> None:
    await follow("follow_read_only", READ_ONLY)


NESTED_REFS = """\
import ray


@ray.remote
def load(i):
    return i * 10


@ray.remote
def total(parts):
    return sum(parts)


ray.init()
parts = [load.remote(i) for i in range(4)]
print(ray.get(total.remote(parts)))
"""


async def test_refs_passed_inside_a_list_are_explained_as_not_resolved(follow: Any) -> None:
    await follow("follow_nested_refs", NESTED_REFS)


WRONG_ADDRESS = """\
import ray

ray.init(address="10.11.12.13:6379")
print("connected", flush=True)
"""


async def test_a_driver_that_never_reached_the_cluster_names_the_address_it_tried(follow: Any) -> None:
    await follow("follow_wrong_address", WRONG_ADDRESS, end=False, deadline_s=90)


ASYNC_BLOCKING = """\
import os
import tempfile
import time

import ray

# health is asked only once refresh has started (and so blocks the loop): otherwise it may run first and end
# the job before there is anything to diagnose
STARTED = os.path.join(tempfile.gettempdir(), f"refresh-started-{os.getpid()}")


@ray.remote
def fetch_weights():
    time.sleep(3600)


@ray.remote
class Gateway:
    async def refresh(self, started):
        open(started, "w").close()
        return ray.get(fetch_weights.remote())

    async def health(self):
        return "ok"


ray.init()
gateway = Gateway.remote()
gateway.refresh.remote(STARTED)
while not os.path.exists(STARTED):
    time.sleep(0.1)
print("asking for health", flush=True)
print(ray.get(gateway.health.remote()))
"""


async def test_a_blocking_get_in_an_async_actor_quotes_rays_warning_and_the_starved_call(follow: Any) -> None:
    await follow("follow_async_blocking", ASYNC_BLOCKING, end=False, deadline_s=90)


PG_SELF_DEADLOCK = """\
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=1)
def shard(i):
    return i


@ray.remote(num_cpus=1)
class Coordinator:
    def run(self):
        return sum(ray.get([shard.remote(i) for i in range(2)]))


ray.init()
pg = placement_group([{"CPU": 1}], name="coord-gang")
ray.get(pg.ready())
strategy = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
coordinator = Coordinator.options(scheduling_strategy=strategy).remote()
print("running", flush=True)
print(ray.get(coordinator.run.remote()))
"""


async def test_work_captured_into_a_group_its_own_actor_holds_is_a_self_deadlock(follow: Any) -> None:
    await follow("follow_pg_self_deadlock", PG_SELF_DEADLOCK, end=False, deadline_s=90)


TRAIN_FAILURE = """\
import os
import tempfile

import ray.train
from ray.train import FailureConfig, RunConfig, ScalingConfig
from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer


def train_loop(config):
    rank = ray.train.get_context().get_world_rank()
    for step in range(3):
        ray.train.report({"step": step})
        if step == 1 and rank == 1:
            raise ValueError(f"rank {rank} saw a NaN loss at step {step}")


trainer = DataParallelTrainer(
    train_loop,
    scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.01}),
    run_config=RunConfig(
        name="follow_nan", storage_path=tempfile.mkdtemp(), failure_config=FailureConfig(max_failures=0)
    ),
)
trainer.fit()
"""


async def test_a_failed_training_leads_with_the_users_exception_not_the_workers_train_tore_down(
    follow: Any,
) -> None:
    await follow("follow_train_failure", TRAIN_FAILURE)


PEER_WAIT = """\
import socket

import ray


@ray.remote
def receive_weights():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    print("listening on", server.getsockname(), flush=True)
    conn, _ = server.accept()
    return conn.recv(1024)


ray.init()
print(ray.get(receive_weights.remote()))
"""


@pytest.mark.usefixtures("quick_stall")
async def test_a_hang_names_what_its_blocking_call_waits_for(follow: Any) -> None:
    await follow("follow_peer_wait", PEER_WAIT, end=False, deadline_s=120)


CREATOR = """\
import os
import time

import ray


@ray.remote(num_cpus=0)
class FeatureCache:
    def get(self, key):
        return key


ray.init(namespace="shared")
cache = FeatureCache.options(name="feature_cache").remote()
ray.get(cache.get.remote("warm"))
print("cache ready", flush=True)
# End (and take the cache with this driver) once the other job has used it: a condition, not a fixed time.
deadline = time.time() + 600
while not os.path.exists(os.environ["CACHE_USED"]) and time.time() < deadline:
    time.sleep(0.1)
"""

USER_OF_CACHE = """\
import os
import time

import ray

ray.init(namespace="shared")
cache = ray.get_actor("feature_cache")
print("found the cache", flush=True)
ray.get(cache.get.remote(-1))
open(os.environ["CACHE_USED"], "w").close()  # the creator may end now
for step in range(600):
    ray.get(cache.get.remote(step))
    time.sleep(0.2)
"""


async def test_an_actor_another_job_created_is_traced_to_that_jobs_driver_and_when_it_ended(
    client: Client, tmp_path: Path, follow: Any
) -> None:
    (tmp_path / "creator").mkdir()
    (tmp_path / "creator" / "main.py").write_text(CREATOR)
    used = {"env_vars": {"CACHE_USED": str(tmp_path / "cache-used")}}  # both jobs run on this machine
    creator = await submit(
        client, entrypoint="python main.py", runtime_env={"working_dir": str(tmp_path / "creator"), **used}
    )
    with anyio.fail_after(180):
        while True:
            logs = await client.call_tool("tail_logs", {"job": creator})
            if not logs.is_error and "cache ready" in text_of(logs):
                break
            await anyio.sleep(1)
    await follow("follow_owner_job", USER_OF_CACHE, runtime_env=used)
