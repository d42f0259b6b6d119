"""Per-node host use (CPU, memory, object store, GPUs) in list_nodes and cluster_status, and memory pressure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.support import mcp_client

from ray_mcp.models import ClusterStatus, NodeList
from ray_mcp.settings import Settings
from ray_mcp.shaping.cluster import build_cluster_status, render_cluster_status
from ray_mcp.shaping.nodes import (
    MEMORY_USAGE_THRESHOLD,
    build_node_list,
    host_usage,
    node_capacities,
    render_node_list,
    summary_by_node,
    usage_from_free,
)
from support import call_ok, text_of

GIB = 1024**3


def node_row(i: int) -> dict[str, Any]:
    return {
        "node_id": f"{i:056x}",
        "node_ip": f"10.0.0.{i}",
        "state": "ALIVE",
        "is_head_node": i == 1,
        "resources_total": {"CPU": 8.0, "GPU": 2.0, "memory": 20.0 * GIB, "object_store_memory": 8.0 * GIB},
    }


def summary_entry(i: int, memory_fraction: float, gpus: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    total = 64 * GIB
    return {
        "cpu": 12.5,
        "mem": [total, int(total * (1 - memory_fraction)), memory_fraction * 100],
        "raylet": {"nodeId": f"{i:056x}", "objectStoreUsedMemory": 3 * GIB},
        "gpus": gpus or [],
    }


A100 = [
    {
        "index": 0,
        "name": "NVIDIA A100",
        "utilizationGpu": 87.0,
        "memoryUsed": 30000,
        "memoryTotal": 40000,
        "processesPids": [{"pid": 11, "gpuMemoryUsage": 30000}],
    },
    {"index": 1, "name": "NVIDIA A100", "utilizationGpu": 0.0, "memoryUsed": 0, "memoryTotal": 40000},
]


def test_a_resource_the_gcs_lists_nothing_free_of_is_all_in_use() -> None:
    """The GCS leaves a resource with nothing free out of a node's free resources: it is all in use, not all
    free; a node the GCS has no entry for yet is left out (its use unknown, as the autoscaler report leaves it)."""
    nodes = [
        {"node_id": "a", "state": "ALIVE", "resources_total": {"CPU": 4.0, "GPU": 1.0}},
        {"node_id": "b", "state": "ALIVE", "resources_total": {"CPU": 2.0}},
    ]
    usage = usage_from_free(nodes, {"a": {"CPU": 1.5}})
    assert usage == {"a": {"CPU": (2.5, 4.0), "GPU": (1.0, 1.0)}}
    caps = {c.node_id: c.available for c in node_capacities(nodes, usage)}
    assert caps == {"a": {"CPU": 1.5, "GPU": 0.0}, "b": {"CPU": 2.0}}


def test_memory_pressure_is_flagged_at_rays_memory_monitor_threshold() -> None:
    assert MEMORY_USAGE_THRESHOLD == 0.95  # Ray's memory_usage_threshold default
    below, above = host_usage(summary_entry(1, 0.94)), host_usage(summary_entry(1, 0.96))
    assert below is not None and below.memory_pressure is False
    assert (
        above is not None
        and above.memory_pressure is True
        and above.memory_fraction == pytest.approx(0.96, abs=1e-3)
    )
    assert host_usage(None) is None  # unknown stays unknown, never "no pressure"


def test_list_nodes_shows_host_use_gpus_and_the_node_under_pressure() -> None:
    rows = [node_row(1), node_row(2)]
    usage = {f"{2:056x}": {"GPU": (1.0, 2.0)}}
    summary = summary_by_node({"summary": [summary_entry(1, 0.5), summary_entry(2, 0.97, A100)]})
    page = build_node_list(
        rows=rows, capacities=node_capacities(rows, usage), limit=10, notes=[], summary=summary
    )
    by_ip = {n.ip: n for n in page.nodes}
    worker = by_ip["10.0.0.2"].usage
    assert worker is not None and worker.memory_pressure and worker.object_store_used == 3 * GIB
    assert worker.object_store_total == 8 * GIB and worker.cpu_percent == 12.5
    assert [(g.index, g.utilization_percent, g.memory_used) for g in worker.gpus] == [
        (0, 87.0, 30000 * 1024**2),
        (1, 0.0, 0.0),
    ]
    text = render_node_list(page)
    assert text.splitlines()[0].endswith("1 under MEMORY PRESSURE.")
    assert "memory 97% of 64 GiB MEMORY PRESSURE" in text and "GPU 0 NVIDIA A100 87% mem 75%" in text
    assert "object store 3 GiB/8 GiB" in text
    assert page.hints[0].startswith("1 node(s) under memory pressure")


def test_cluster_status_counts_the_nodes_under_memory_pressure() -> None:
    rows = [node_row(1), node_row(2), node_row(3)]
    summary = summary_by_node(
        {"summary": [summary_entry(1, 0.2), summary_entry(2, 0.99), summary_entry(3, 0.96)]}
    )
    status = build_cluster_status(
        dashboard_url="http://x",
        source="external",
        version={"ray_version": "2.60.0"},
        nodes=rows,
        status={},
        pending_placement_groups=0,
        max_nodes=10,
        summary=summary,
    )
    assert status.memory_pressure_nodes == 2
    text = render_cluster_status(status)
    assert "3 node(s) alive, 0 dead; 2 under MEMORY PRESSURE." in text.splitlines()[0]
    assert f"{2:056x}" in status.hints[0] and f"{3:056x}" in status.hints[0]


async def test_list_nodes_and_cluster_status_report_the_heads_host_use(client: Client) -> None:
    with anyio.fail_after(120):  # the dashboard agent reports a few seconds after the node starts
        while True:
            page = NodeList.model_validate((await call_ok(client, "list_nodes", {})).structured_content)
            head = next(n for n in page.nodes if n.is_head)
            if head.usage is not None and head.usage.memory_fraction is not None:
                break
            await anyio.sleep(1)
    u = head.usage
    assert 0 < u.memory_fraction < 1 and u.memory_total and u.memory_used
    assert u.memory_pressure is (u.memory_fraction >= MEMORY_USAGE_THRESHOLD)
    assert (
        u.object_store_used is not None
        and u.object_store_total == head.resources_total["object_store_memory"]
    )
    assert u.cpu_percent is not None
    result = await call_ok(client, "cluster_status", {})
    status = ClusterStatus.model_validate(result.structured_content)
    status_head = next(n for n in status.nodes if n.is_head)
    assert status_head.usage is not None and status_head.usage.memory_fraction is not None
    assert "host CPU" in text_of(result) and "memory " in text_of(result)


class NoNodeSummary(httpx.AsyncBaseTransport):
    """A dashboard whose node summary fails (the reporter is down): everything else answers."""

    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/nodes":
            return httpx.Response(500, text="simulated: node summary unavailable", request=request)
        return await self.real.handle_async_request(request)


@pytest.fixture
async def no_summary_client(ray_cluster) -> AsyncIterator[Client]:
    async with mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=NoNodeSummary()) as c:
        yield c


async def test_host_use_that_cannot_be_read_is_unknown_not_healthy(no_summary_client: Client) -> None:
    result = await call_ok(no_summary_client, "list_nodes", {})
    page = NodeList.model_validate(result.structured_content)
    assert all(n.usage is None for n in page.nodes)
    assert any("Host CPU, memory and GPU use unknown" in n for n in page.notes)
    status = await call_ok(no_summary_client, "cluster_status", {})
    assert "Host CPU, memory and GPU use unknown" in text_of(status)
