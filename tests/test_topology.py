"""job_topology on a real two-node cluster: a head and a worker that declares 4 GPUs (no real GPU needed).

The job (a real Ray job, submitted through submit_job) places a group of 4 single-GPU bundles on the worker,
fills bundles 0-2 with TrainWorker actors, kills rank 2 (its process exits), leaves bundle 3 empty, and runs a
Serve app whose replica spawns an actor. The tree must say exactly that.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest
from mcp import Client
from tests.support import mcp_client

from conftest import joined, local_head
from ray_mcp.local_head import LocalHead, free_ports
from ray_mcp.models import JobTopology
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from test_multi_node import LocalWorker

pytestmark = pytest.mark.live

DRIVER = textwrap.dedent(
    """
    import os, sys, time
    import ray
    from ray import serve
    from ray.util.placement_group import placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init()
    pg = placement_group([{"GPU": 1, "CPU": 0.01}] * 4, strategy="PACK", name="trainers")
    ray.get(pg.ready())

    @ray.remote(num_gpus=1, num_cpus=0.01)
    class TrainWorker:
        def ids(self):
            return ray.get_gpu_ids()
        def die(self):
            os._exit(3)

    ranks = [
        TrainWorker.options(
            name=f"rank{i}",
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
        ).remote()
        for i in range(3)
    ]
    print("GPU_IDS", [ray.get(r.ids.remote()) for r in ranks], flush=True)
    try:
        ray.get(ranks[2].die.remote())
    except Exception as exc:
        print("RANK2_DIED", type(exc).__name__, flush=True)

    @ray.remote(num_cpus=0)
    class RolloutHelper:
        def ping(self):
            return "pong"

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    class Rollout:
        def __init__(self):
            self.helper = RolloutHelper.options(name="rollout_helper").remote()
            ray.get(self.helper.ping.remote())

        def __call__(self, request):
            return "ok"

    serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[1])})
    serve.run(Rollout.bind(), name="rollout", route_prefix="/rollout")
    print("READY", flush=True)
    while True:
        time.sleep(1)
    """
)


@dataclass
class GPUWorker(LocalWorker):
    """A worker node that declares GPUs (``ray start --num-gpus``): enough for Ray to schedule GPU bundles."""

    num_gpus: int = 4

    def command(self) -> list[str]:
        return [*super().command(), f"--num-gpus={self.num_gpus}"]


@pytest.fixture(scope="module")
def gpu_cluster() -> Iterator[tuple[LocalHead, GPUWorker]]:
    with (
        local_head(num_cpus=2) as head,
        joined(GPUWorker(num_cpus=1, head_gcs_address=head.gcs_address)) as worker,
    ):
        yield head, worker


@pytest.fixture
async def mcp(gpu_cluster) -> AsyncIterator[Client]:
    head, _worker = gpu_cluster
    # The GCS address form: strategies and owners come from this head's GCS, never from a search among the
    # other heads' GCS processes that a long test session leaves on the machine.
    async with mcp_client(Settings(address=head.gcs_address, allow_destructive=True)) as client:
        yield client


async def call(client: Client, tool: str, **args) -> tuple[dict, str]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content, result.content[0].text  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def training_job(gpu_cluster, tmp_path_factory) -> Iterator[str]:
    """Submit the driver once per module and wait until its actors and Serve app are up."""
    head, _worker = gpu_cluster
    script = tmp_path_factory.mktemp("topology") / "driver.py"
    script.write_text(DRIVER)

    async def submit() -> str:
        server = build_server(Settings(address=head.dashboard_url, allow_destructive=True))
        try:
            async with Client(server) as client:
                await gpu_node(client)
                port = free_ports(1)[0]
                sub, _ = await call(client, "submit_job", entrypoint=f"{sys.executable} {script} {port}")
                job = sub["submission_id"]
                text = ""
                with anyio.move_on_after(300):
                    while True:
                        logs = await client.call_tool("tail_logs", {"job": job, "lines": 50})
                        text = logs.content[0].text  # type: ignore[union-attr]
                        if "READY" in text:
                            return str(job)
                        info, _ = await call(client, "get_job", job=job)
                        assert info["status"] in ("PENDING", "RUNNING"), text
                        await anyio.sleep(1)
                raise AssertionError(f"the training job was not READY within 300 s; its log:\n{text}")
        finally:
            await server.app.aclose()

    yield anyio.run(submit)


async def gpu_node(client: Client) -> str:
    with anyio.fail_after(180):
        while True:
            nodes, _ = await call(client, "list_nodes")
            for n in nodes["nodes"]:
                if n["state"] == "ALIVE" and n["resources_total"].get("GPU") == 4:
                    return str(n["node_id"])
            await anyio.sleep(0.5)


async def topology(client: Client, job: str) -> tuple[JobTopology, str]:
    """The topology once Ray's state has caught up (rank 2 DEAD, the helper actor ALIVE)."""
    with anyio.fail_after(120):
        while True:
            data, text = await call(client, "job_topology", job=job)
            topo = JobTopology.model_validate(data)
            states = {a.name: a.state for a in topo.actors}
            if states.get("rank2") == "DEAD" and states.get("rollout_helper") == "ALIVE" and topo.serve:
                return topo, text
            await anyio.sleep(1)


async def test_job_topology_says_which_bundle_is_empty_and_which_rank_died(
    mcp: Client, training_job: str
) -> None:
    topo, text = await topology(mcp, training_job)
    gpu = await gpu_node(mcp)
    assert text.startswith(f"Job {training_job}")  # verdict first
    (group,) = [g for g in topo.placement_groups if g.name == "trainers"]
    assert (group.state, group.strategy, group.bundles_total, group.live_actors) == ("CREATED", "PACK", 4, 2)
    assert [b.node_id for b in group.bundles] == [gpu] * 4
    by_id = {a.actor_id: a for a in topo.actors}
    occupants = [[by_id[i].name for i in b.actor_ids] for b in group.bundles]
    assert occupants == [["rank0"], ["rank1"], ["rank2"], []]
    ranks = {a.name: a for a in topo.actors if a.class_name == "TrainWorker"}
    assert [ranks[f"rank{i}"].state for i in range(3)] == ["ALIVE", "ALIVE", "DEAD"]
    assert ranks["rank2"].death_cause is not None and ranks["rank2"].death_cause.reason == "WORKER_DIED"
    # Ray assigned each rank its own GPU id; the dead rank keeps the id it had.
    gpu_ids = sorted(ranks[f"rank{i}"].accelerator_ids["GPU"][0] for i in range(3))
    assert gpu_ids == ["0", "1", "2"]
    assert all(ranks[f"rank{i}"].node_id == gpu for i in range(3))
    gaps = {(g.kind, g.bundle_index) for g in topo.gaps if g.placement_group_id == group.placement_group_id}
    assert gaps == {("dead_rank", 2), ("empty_bundle", 3), ("short_group", None)}
    assert "bundle 2: TrainWorker rank2" in text and "is DEAD: WORKER_DIED" in text
    assert f"bundle 3 {{CPU: 0.01, GPU: 1}} on node {gpu} holds no actor" in text
    assert "group trainers: 2 live actor(s) for 4 bundles" in text
    assert "1 dead rank" in topo.verdict and "1 empty bundle" in topo.verdict


async def test_job_topology_shows_the_nodes_with_the_jobs_share(mcp: Client, training_job: str) -> None:
    topo, text = await topology(mcp, training_job)
    gpu = await gpu_node(mcp)
    (node,) = [n for n in topo.nodes if n.node_id == gpu]
    assert node.resources["GPU"].total == 4
    assert node.job_share["GPU"] == 4  # the whole group is reserved, empty bundle included
    alive_here = [a for a in topo.actors if a.node_id == gpu and a.state == "ALIVE"]
    assert node.bundles == 4 and node.actors == len(alive_here) >= 2
    assert node.memory_used_fraction is not None and 0 < node.memory_used_fraction < 1
    assert node.memory_pressure is (node.memory_used_fraction >= topo.memory_threshold)
    assert f"{node.label} = {gpu}" in text and "GPU 4/4 (job 4)" in text


async def test_job_topology_links_a_serve_replica_to_the_actor_it_spawned(
    mcp: Client, training_job: str
) -> None:
    topo, text = await topology(mcp, training_job)
    assert topo.serve is not None and topo.serve.attributed
    (app,) = topo.serve.apps
    assert app.name == "rollout"
    (replica,) = app.deployments[0].replicas
    (helper,) = [a for a in topo.actors if a.name == "rollout_helper"]
    assert replica.spawned_actor_ids == [helper.actor_id]
    assert helper.spawned_by is not None and helper.spawned_by.startswith("rollout/Rollout#")
    assert "spawned: RolloutHelper ALIVE" in text and helper.actor_id in text


async def test_job_topology_of_an_unknown_job_is_a_clear_error(mcp: Client) -> None:
    result = await mcp.call_tool("job_topology", {"job": "raysubmit_doesnotexist"})
    assert result.is_error
    assert "raysubmit_doesnotexist" in result.content[0].text  # type: ignore[union-attr]


async def test_job_topology_answers_the_same_under_parallel_calls(mcp: Client, training_job: str) -> None:
    await topology(mcp, training_job)
    answers: list[str] = []

    async def one() -> None:
        _data, text = await call(mcp, "job_topology", job=training_job)
        answers.append(text.splitlines()[0])

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert len(answers) == 4 and all("1 dead rank" in a for a in answers)
