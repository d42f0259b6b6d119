"""The State API fields Ray added since 2.5x, on a real head started with node labels: a label-locality placement
group (topology_strategy, topology_assignments) in pg_status and job_topology, an actor whose label selector no
node meets (why, with its fallback_strategy), a group whose bundle label selector no node meets (pg_status says
that the autoscaler here, v1, ignores bundle label selectors: only v2 enforces them), and the node labels
list_nodes shows.

The head is this module's own (it needs --labels); the session head is not started: one ray-slot.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import mcp_client, structured, submit, text_of

from ray_mcp.local_head import LocalHead
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

DOMAIN = "ray.io/gpu-domain"
DRIVER = f"""
import ray, time
from ray.util.placement_group import placement_group
ray.init()
pg = placement_group([{{"CPU": 0.1}}, {{"CPU": 0.1}}], name="local-pg", topology_strategy={{"{DOMAIN}": "STRICT_PACK"}})
ray.get(pg.ready(), timeout=120)

@ray.remote(num_cpus=0.1)
class Member:
    def ping(self):
        return 1

m = Member.options(
    placement_group=pg, placement_group_bundle_index=0, name="member"
).remote()
ray.get(m.ping.remote())

@ray.remote(num_cpus=0.1, label_selector={{"zone": "nowhere"}}, fallback_strategy=[{{"label_selector": {{"zone": "elsewhere"}}}}])
class Picky:
    def ping(self):
        return 1

p = Picky.options(name="picky").remote()
waiting = placement_group([{{"CPU": 0.1}}], name="picky-pg", bundle_label_selector=[{{"zone": "nowhere"}}])
print("started", flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def labelled_head() -> Iterator[LocalHead]:
    with local_head(num_cpus=2, labels=f"{DOMAIN}=rack-1,zone=a") as head:
        yield head


@pytest.fixture
async def client(labelled_head) -> AsyncIterator[Client]:
    async with mcp_client(Settings(address=labelled_head.dashboard_url, allow_destructive=True)) as c:
        yield c


async def test_label_locality_groups_label_selectors_and_node_labels_are_shown(client) -> None:
    job = await submit(client, entrypoint=f"{sys.executable} -c '{DRIVER}'")
    with anyio.fail_after(180):
        while True:
            pgs = await structured(client, "pg_status")
            if any(g.get("name") == "local-pg" and g["state"] == "CREATED" for g in pgs["placement_groups"]):
                break
            await anyio.sleep(0.5)
    group = next(g for g in pgs["placement_groups"] if g.get("name") == "local-pg")
    assert group["topology_strategy"] == {DOMAIN: "STRICT_PACK"}, group
    assert group["topology_assignments"] == {DOMAIN: "rack-1"}, group
    text = text_of(await client.call_tool("pg_status", {}))
    assert "topology" in text and "rack-1" in text, text

    nodes = await structured(client, "list_nodes")
    assert nodes["nodes"][0]["labels"].get("zone") == "a"

    with anyio.fail_after(120):
        while True:
            actors = await structured(client, "list_actors", detail=True)
            picky = [a for a in actors["actors"] if a.get("name") == "picky"]
            if picky:
                break
            await anyio.sleep(0.5)
    actor = await structured(client, "get_actor", actor_id=picky[0]["actor_id"])
    assert actor.get("label_selector") == {"zone": "nowhere"}, actor
    assert actor.get("fallback_strategy"), actor
    topology = text_of(await client.call_tool("job_topology", {"job": job}))
    assert "rack-1" in topology, topology
    with anyio.fail_after(120):  # the group whose bundle selector no node meets waits; the autoscaler is v1
        while True:
            pgs = await structured(client, "pg_status", state="PENDING")
            if any(g.get("name") == "picky-pg" for g in pgs["placement_groups"]):
                break
            await anyio.sleep(0.5)
    picky_pg = next(g for g in pgs["placement_groups"] if g.get("name") == "picky-pg")
    assert picky_pg["bundles"][0]["label_selector"] == {"zone": "nowhere"}, picky_pg
    text = text_of(await client.call_tool("pg_status", {"state": "PENDING"}))
    assert "autoscaler v1 ignores bundle label selectors" in text and "only v2 enforces them" in text, text
    health = text_of(await client.call_tool("diagnose_job", {"job": job}))
    assert "nowhere" in health and "elsewhere" in health, health
    await client.call_tool("stop_job", {"job": job})
