"""The docker-compose topology without Docker: a Ray head plus a second `ray start --address` worker process
(its own temp dir, resources {"worker": 1}), driven through list_nodes, tail_logs and a job pinned to the worker.

The cluster is this module's own (the session head stays single-node for the other tests), and stopping it
kills exactly the processes its two `ray start --block` commands started.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import anyio
import pytest
from mcp import Client
from tests.conftest import joined, local_head
from tests.support import mcp_client, structured, text_of

from ray_mcp.local_head import LocalHead, free_ports, ray_executable
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

WORKER_RESOURCES = {"worker": 1}


@dataclass
class LocalWorker(LocalHead):
    """A worker node joining ``head`` (``ray start --address --block``), in its own temp dir, on free ports.

    Spawned, owned and stopped like LocalHead: its own process group, fate-shared with this process.
    """

    head_gcs_address: str = ""

    def command(self) -> list[str]:
        ports = free_ports(6)
        cmd = [
            ray_executable(),
            "start",
            "--block",
            f"--address={self.head_gcs_address}",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
            f"--node-manager-port={ports[0]}",
            f"--object-manager-port={ports[1]}",
            f"--dashboard-agent-listen-port={ports[2]}",
            f"--dashboard-agent-grpc-port={ports[3]}",
            f"--runtime-env-agent-port={ports[4]}",
            f"--metrics-export-port={ports[5]}",
        ]
        return cmd + self.resource_args()


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[LocalHead, LocalWorker]]:
    with local_head(num_cpus=1) as head:
        spec = LocalWorker(
            num_cpus=1, resources=json.dumps(WORKER_RESOURCES), head_gcs_address=head.gcs_address
        )
        with joined(spec) as worker:
            yield head, worker


@pytest.fixture
async def mcp(two_nodes) -> AsyncIterator[Client]:
    head, _worker = two_nodes
    async with mcp_client(Settings(address=head.dashboard_url)) as client:
        yield client


async def worker_id(client: Client) -> str:
    """The worker's node id, once it has joined (polled: a raylet registers in a few seconds)."""
    with anyio.fail_after(120):
        while True:
            nodes = (await structured(client, "cluster_status"))["nodes"]
            workers = [n for n in nodes if not n["is_head"] and "worker" in n.get("resources", {})]
            if workers and workers[0]["state"] == "ALIVE":
                return str(workers[0]["node_id"])
            await anyio.sleep(0.5)


async def test_cluster_status_counts_the_worker_and_its_resource(mcp: Client) -> None:
    with anyio.fail_after(120):
        while (status := await structured(mcp, "cluster_status"))["nodes_alive"] < 2:
            await anyio.sleep(0.5)
    assert status["nodes_alive"] == 2
    assert "worker" in json.dumps(status)


async def test_list_nodes_shows_the_head_and_the_worker_with_its_resource(mcp: Client) -> None:
    worker = await worker_id(mcp)
    listing = await structured(mcp, "list_nodes")
    assert listing["alive"] == 2
    assert sum(n["is_head"] for n in listing["nodes"]) == 1
    (entry,) = [n for n in listing["nodes"] if n["node_id"] == worker]
    assert entry["resources_total"]["worker"] == 1


async def test_tail_logs_reads_the_raylet_log_of_the_worker_node(mcp: Client) -> None:
    worker = await worker_id(mcp)
    result = await mcp.call_tool("tail_logs", {"node": worker, "filename": "raylet.out", "lines": 50})
    assert not result.is_error, result.content
    text = text_of(result)  # type: ignore[union-attr]
    assert "raylet.out" in text and len(text.splitlines()) > 5


async def test_a_job_pinned_to_the_worker_runs_there(mcp: Client) -> None:
    worker = await worker_id(mcp)
    # Half of the worker's {"worker": 1} pins the driver, the other half a task. (Both raylets share one IP
    # here, so the driver's own get_node_id() may name either node; a task scheduled by resource can't.)
    task = "ray.remote(resources={'worker': 0.5})(lambda: ray.get_runtime_context().get_node_id())"
    entrypoint = f"{sys.executable} -c \"import ray; ray.init(); print('RAN_ON', ray.get({task}.remote()))\""
    submitted = await structured(
        mcp, "submit_job", entrypoint=entrypoint, entrypoint_resources={"worker": 0.5}
    )
    job = submitted["submission_id"]
    done = ("SUCCEEDED", "FAILED", "STOPPED")
    with anyio.fail_after(180):
        while (status := (await structured(mcp, "get_job", job=job))["status"]) not in done:
            await anyio.sleep(1)
    logs = await mcp.call_tool("tail_logs", {"job": job})
    text = text_of(logs)  # type: ignore[union-attr]
    assert status == "SUCCEEDED", text
    assert f"on node {worker}" in text  # the driver's log lives on the node that ran it
    assert f"RAN_ON {worker}" in text
