from __future__ import annotations

import json
import uuid

import anyio
from mcp import Client
from tests.support import call_ok, mcp_client, submit, text_of

from ray_mcp.answers.nodes import Nodes
from ray_mcp.limits import DIAGNOSIS_BYTES
from ray_mcp.models import ClusterHealth, JobDiagnosis, NodeList, PlacementGroupList
from ray_mcp.settings import Settings
from ray_mcp.sources.cluster_sources import ClusterSources
from state_drivers import driver

GROUPS = """
ok = placement_group([{"CPU": 0.5}], strategy="PACK", name=f"{sys.argv[2]}-ok")
ray.get(ok.ready())
huge = placement_group([{"CPU": 64}], name=f"{sys.argv[2]}-huge")
spread = placement_group([{"CPU": 0.01}] * 3, strategy="STRICT_SPREAD", name=f"{sys.argv[2]}-spread")
"""

MANY = """
groups = [placement_group([{"CPU": 0.001}], name=f"{sys.argv[2]}-{i}") for i in range(300)]
ray.get([g.ready() for g in groups])
"""


async def pgs(client: Client, **args) -> tuple[PlacementGroupList, str]:
    result = await client.call_tool("pg_status", args)
    assert not result.is_error, result.content
    return PlacementGroupList.model_validate(result.structured_content), text_of(result)


async def test_pg_status_shows_bundles_and_explains_pending_groups(client: Client, ray_cluster) -> None:
    tag = f"pg{uuid.uuid4().hex[:6]}"
    with driver(ray_cluster.gcs_address, GROUPS, tag):
        with anyio.fail_after(60):
            while True:  # the session's cluster may hold many other groups: list this driver's job only
                first = await client.call_tool("pg_status", {"placement_group": f"{tag}-ok"})
                job = (
                    first.structured_content
                    and first.structured_content["placement_groups"][0]["creator_job_id"]
                )
                page, text = await pgs(client, job=job) if job else (None, "")
                mine = {g.name: g for g in page.placement_groups} if page else {}
                if len(mine) == 3 and mine[f"{tag}-spread"].state == "PENDING":
                    break
                await anyio.sleep(0.5)
        ok, huge, spread = mine[f"{tag}-ok"], mine[f"{tag}-huge"], mine[f"{tag}-spread"]
        assert (
            ok.state == "CREATED" and ok.strategy == "PACK" and ok.creator_job_id and ok.is_detached is False
        )
        assert (
            ok.bundles[0].resources == {"CPU": 0.5}
            and ok.bundles[0].node_id
            and len(ok.bundles[0].node_id) == 56
        )
        assert ok.why_pending is None
        assert huge.state == "PENDING" and huge.infeasible is True
        assert huge.why_pending and "needs {CPU: 64}, which no alive node can ever fit" in huge.why_pending
        assert "the largest has CPU 2" in huge.why_pending
        assert spread.strategy == "STRICT_SPREAD" and spread.infeasible is True
        assert spread.why_pending and "STRICT_SPREAD over 3 bundles but only 1 node(s)" in spread.why_pending
        assert "INFEASIBLE" in text and huge.placement_group_id in text
        # One group by name or id; a state filter with exact counts.
        one, _ = await pgs(client, placement_group=f"{tag}-huge")
        assert one.shown == 1 and one.placement_groups[0].placement_group_id == huge.placement_group_id
        by_id, _ = await pgs(client, placement_group=huge.placement_group_id)
        assert by_id.placement_groups[0].name == f"{tag}-huge"
        pending, _ = await pgs(client, state="PENDING", job=ok.creator_job_id)
        assert pending.matched == 2 and {g.state for g in pending.placement_groups} == {"PENDING"}


async def test_pg_status_stays_small_with_300_groups_and_counts_exactly(client: Client, ray_cluster) -> None:
    tag = f"many{uuid.uuid4().hex[:6]}"
    with driver(ray_cluster.gcs_address, MANY, tag):
        with anyio.fail_after(60):
            while True:
                result = await client.call_tool("pg_status", {})
                page = PlacementGroupList.model_validate(result.structured_content)
                if page.by_state.get("CREATED", 0) >= 300:
                    break
                await anyio.sleep(0.5)
        assert page.matched == page.total >= 300 and sum(page.by_state.values()) == page.matched
        assert 0 < page.shown < page.matched and page.hints and "more placement groups" in page.hints[0]
        assert len(text_of(result)) < 8192
        assert len(json.dumps(result.structured_content)) < 8192
        counts = await client.call_tool("pg_status", {"limit": 0})
        assert PlacementGroupList.model_validate(counts.structured_content).matched == page.matched
        assert len(text_of(counts)) < 1000


async def test_pg_status_rejects_unknown_and_malformed_ids(client: Client) -> None:
    unknown = await client.call_tool("pg_status", {"placement_group": "ab" * 18})
    assert unknown.is_error and "No placement group" in text_of(unknown)
    bad_job = await client.call_tool("pg_status", {"job": "xyz"})
    assert bad_job.is_error and "job id" in text_of(bad_job)
    clamped = await client.call_tool("pg_status", {"limit": 10**9})
    assert any("clamped" in n for n in PlacementGroupList.model_validate(clamped.structured_content).notes)


async def test_list_nodes_shows_the_head_with_total_and_free_resources(client: Client) -> None:
    result = await client.call_tool("list_nodes", {})
    assert not result.is_error, result.content
    page = NodeList.model_validate(result.structured_content)
    assert page.alive >= 1 and page.total == page.alive + page.dead
    head = next(n for n in page.nodes if n.is_head)
    assert head.state == "ALIVE" and len(head.node_id) == 56 and head.resources_total["CPU"] == 2
    assert 0 <= head.resources_available["CPU"] <= 2 and "memory" in head.resources_available
    assert head.node_id in text_of(result) and "head ALIVE" in text_of(result)
    dead = await client.call_tool("list_nodes", {"state": "DEAD"})
    assert NodeList.model_validate(dead.structured_content).shown == 0


async def test_pg_status_without_a_reachable_gcs_lists_the_groups_and_says_their_strategies_are_unknown(
    ray_cluster,
) -> None:
    """A dashboard reached alone (a port-forward, KubeRay's service proxy): the groups, totals and bundles come
    from the State API; the strategies and counts per state are the GCS's, and the answer says they are
    unknown, and why."""
    tag = f"pga{uuid.uuid4().hex[:6]}"
    with driver(ray_cluster.gcs_address, GROUPS, tag):
        async with mcp_client(Settings(address=ray_cluster.dashboard_url), gcs_lookup=None) as alone:
            with anyio.fail_after(60):
                while True:
                    page, text = await pgs(alone, placement_group=f"{tag}-spread")
                    if page.placement_groups[0].state == "PENDING":
                        break
                    await anyio.sleep(0.5)
            counts, _ = await pgs(alone, limit=0)
    spread = page.placement_groups[0]
    assert spread.strategy is None and spread.why_pending and spread.bundles, text
    why = f"unknown (no GCS found for the dashboard at {ray_cluster.dashboard_url}"
    assert f"Strategies and counts per state {why}" in text and "STRICT_* constraints are not checked" in text
    assert counts.matched >= 3 and counts.by_state == {}
    assert any(n.startswith(f"Counts per state {why}") for n in counts.notes), counts.notes


WAITS_FOR_A_GROUP = """\
import sys

import ray
from ray.util.placement_group import placement_group

ray.init()
group = placement_group([{"CPU": 64}], strategy="PACK", name=sys.argv[1])
print("waiting for the group", flush=True)
ray.get(group.ready())
"""


async def test_pg_status_diagnose_job_and_cluster_health_explain_a_pending_group_in_the_same_words(
    client: Client, tmp_path
) -> None:
    """One engine says why a group waits, whichever tool asks (before: pg_status said "bundle 0 wants {CPU: 64}
    and no node has more than 2 CPUs", diagnose_job "… needs {CPU: 64}, which no alive node can ever fit")."""
    tag = f"same{uuid.uuid4().hex[:6]}"
    (tmp_path / "driver.py").write_text(WAITS_FOR_A_GROUP)
    sid = await submit(
        client, entrypoint=f"python driver.py {tag}", runtime_env={"working_dir": str(tmp_path)}
    )
    try:
        with anyio.fail_after(120):
            while True:  # until the driver made the group
                result = await client.call_tool("pg_status", {"placement_group": tag})
                if not result.is_error:
                    break
                await anyio.sleep(0.5)
        group = PlacementGroupList.model_validate(result.structured_content).placement_groups[0]
        why = group.why_pending
        assert (
            group.state == "PENDING"
            and group.infeasible
            and why
            and "which no alive node can ever fit" in why
        )
        with anyio.fail_after(120):
            while True:  # until the job's record shows its group (the driver started after the group)
                job = JobDiagnosis.model_validate(
                    (await call_ok(client, "diagnose_job", {"job": sid})).structured_content
                )
                if any(why in f.title for f in job.findings):
                    break
                await anyio.sleep(1)
        assert why in job.verdict, job.verdict
        health = ClusterHealth.model_validate(
            (await call_ok(client, "cluster_health", {"max_bytes": DIAGNOSIS_BYTES.high})).structured_content
        )
        assert any(why in f.title for f in health.findings), [f.title for f in health.findings]
    finally:
        await client.call_tool("stop_job", {"job": sid})


HOLDS = """
held = placement_group([{"CPU": 0.25}], name=f"{sys.argv[2]}-held")
ray.get(held.ready())
"""


async def test_the_nodes_and_free_resources_read_from_the_gcs_are_the_dashboards(ray_cluster) -> None:
    """pg_status reads the nodes and what each has free from the GCS (beside its page); they must be the facts
    list_nodes reads from the dashboard (the State API's rows, the autoscaler's per-node use)."""
    sources = ClusterSources(
        ray_cluster.dashboard_url,
        timeout_s=10,
        source="external",
        headers=None,
        verify=True,
        transport=None,
        gcs_address=ray_cluster.gcs_address,
        gcs_lookup=None,
        gcs_out_of_reach=None,
    )
    nodes = Nodes(sources)
    basic = ("node_id", "node_ip", "is_head_node", "state", "node_name", "resources_total", "labels")
    try:
        with driver(ray_cluster.gcs_address, HOLDS, f"held{uuid.uuid4().hex[:6]}"):
            with anyio.fail_after(60):
                while True:  # the autoscaler's report lags the GCS by a heartbeat: until both show the group
                    dash_rows, dash_caps = await nodes.capacities()
                    gcs_rows, gcs_caps = await nodes.capacities(from_gcs=True)
                    if dash_caps == gcs_caps and all(
                        c.available.get("CPU", 0.0) <= c.total["CPU"] - 0.25
                        for c in gcs_caps
                        if "CPU" in c.total
                    ):
                        break
                    await anyio.sleep(0.5)
        assert gcs_caps and any(c.available != c.total for c in gcs_caps), gcs_caps
        assert [{k: r.get(k) for k in basic} for r in gcs_rows] == [
            {k: r.get(k) for k in basic} for r in sorted(dash_rows, key=lambda r: r["node_id"])
        ]
    finally:
        await sources.aclose()
