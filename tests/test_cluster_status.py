from __future__ import annotations

import subprocess
import sys
import textwrap

import anyio
from mcp import Client
from tests.support import text_of

from ray_mcp.models import ClusterStatus


async def test_cluster_status_is_listed_with_annotations_docstring_and_output_schema(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    tool = tools["cluster_status"]
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint is True
    # the spec: destructiveHint and idempotentHint mean something only for a tool that is not read-only
    assert tool.annotations.destructive_hint is None and tool.annotations.idempotent_hint is None
    assert tool.description and "Start here" in tool.description
    assert tool.output_schema is not None
    assert "nodes" in tool.output_schema["properties"]


async def test_cluster_status_reports_the_head_node_its_cpus_and_the_ray_version(
    client: Client, ray_cluster
) -> None:
    result = await client.call_tool("cluster_status", {})
    assert not result.is_error, result.content
    status = ClusterStatus.model_validate(result.structured_content)
    assert status.dashboard_url == ray_cluster.dashboard_url
    assert status.nodes_alive >= 1
    assert status.resources["CPU"].total >= 2
    assert status.ray_version.count(".") == 2
    head = [n for n in status.nodes if n.is_head]
    assert head and head[0].state == "ALIVE" and len(head[0].node_id) == 56
    text = text_of(result)
    assert head[0].node_id in text  # ids are printed whole
    assert "CPU" in text and status.ray_version in text
    assert len(text) < 4000 and "null" not in str(result.structured_content)


DRIVER = textwrap.dedent(
    """
    import sys, time, ray
    from ray.util.placement_group import placement_group
    ray.init(address=sys.argv[1])
    @ray.remote(num_cpus=64)
    def huge():
        return 1
    ref = huge.remote()
    pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD")
    print("ready", flush=True)
    time.sleep(600)
    """
)


async def test_cluster_status_flags_infeasible_demands_and_counts_pending_placement_groups(
    client: Client, ray_cluster
) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, ray_cluster.gcs_address],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        status = None
        with anyio.fail_after(60):
            while True:
                result = await client.call_tool("cluster_status", {})
                status = ClusterStatus.model_validate(result.structured_content)
                kinds = {d.kind for d in status.pending_demands}
                if status.pending_placement_groups >= 1 and {"task_or_actor", "placement_group"} <= kinds:
                    break
                await anyio.sleep(0.5)
        task = next(d for d in status.pending_demands if d.kind == "task_or_actor")
        assert task.bundles == [{"CPU": 64.0}] and task.infeasible
        pg = next(d for d in status.pending_demands if d.kind == "placement_group")
        assert pg.strategy == "STRICT_SPREAD" and pg.infeasible  # 3 bundles, 1 node
        text = text_of(result)
        assert "INFEASIBLE" in text and "{CPU: 64}" in text and "pg_status" in text
    finally:
        driver.kill()
        driver.wait()
