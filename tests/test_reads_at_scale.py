"""An answer that shows a few rows does not make Ray (or ray-mcp) process every row twice: list_actors counts
the actors of its one request itself, and the node capacities look up only the resources the nodes declare,
not the thousands a placement group per bundle adds to the autoscaler's report.

A dashboard stand-in (httpx.MockTransport) serves State API lists of many rows; the bench's scale rows measure
the same on a real cluster (docs/benchmarks.md)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
from tests.support import call_ok, mcp_client

from ray_mcp.settings import Settings
from ray_mcp.shaping.nodes import uncamel_usage

NODE = "ab" * 28


def actor(i: int) -> dict[str, Any]:
    return {
        "actor_id": f"{i:032x}",
        "class_name": "Worker" if i % 3 else "Driver",
        "state": "ALIVE" if i % 4 else "DEAD",
        "job_id": "01000000",
        "name": "",
        "node_id": NODE,
        "pid": 1000 + i,
        "num_restarts": 0,
    }


class Actors:
    """A dashboard whose State API lists ``n`` actors (it honours ``limit``), and counts what it is asked."""

    def __init__(self, n: int) -> None:
        self.rows = [actor(i) for i in range(n)]
        self.seen: Counter[str] = Counter()

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.seen[request.url.path] += 1
        if request.url.path == "/api/jobs/":
            return httpx.Response(200, json=[])
        limit = int(request.url.params.get("limit", "100"))
        n = len(self.rows)
        listed = {"total": n, "num_after_truncation": n, "num_filtered": n, "result": self.rows[:limit]}
        return httpx.Response(200, json={"result": True, "msg": "", "data": {"result": listed}})


async def test_list_actors_counts_a_few_hundred_actors_from_its_one_request() -> None:
    cluster = Actors(300)
    # every toolset named, so that the client's tools/list reads nothing (the default set reads whether Serve runs)
    settings = Settings(address="http://dash-actors:8265", request_timeout_s=5, toolsets="all")
    transport = httpx.MockTransport(cluster.answer)
    async with mcp_client(settings, http_transport=transport, gcs_lookup=None) as client:
        result = await call_ok(client, "list_actors", {"limit": 5})
    data = result.structured_content or {}
    assert data["shown"] == 5 and data["matched"] == 300
    expected = Counter(a["state"] for a in cluster.rows)
    assert data["by_state"] == dict(expected)
    assert cluster.seen["/api/v0/actors"] == 1 and cluster.seen["/api/v0/actors/summarize"] == 0, cluster.seen


def test_node_use_is_read_for_the_declared_resources_only() -> None:
    nodes = [{"node_id": NODE, "resources_total": {"CPU": 4.0, "object_store_memory": 1e9, "slot": 2000.0}}]
    usage = {"CPU": [1.0, 4.0], "objectStoreMemory": [0.0, 1e9], "slot": [1000.0, 2000.0]}
    for g in range(1000):  # what a thousand groups of one bundle add to the autoscaler's report
        usage[f"slotGroup{g:032x}"] = [1.0, 1.0]
        usage[f"slotGroup0{g:032x}"] = [1.0, 1.0]
    by_node = uncamel_usage({NODE: usage}, nodes)
    assert by_node == {NODE: {"CPU": (1.0, 4.0), "object_store_memory": (0.0, 1e9), "slot": (1000.0, 2000.0)}}
