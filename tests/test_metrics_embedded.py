"""The embedded cluster (no address) starts a Prometheus beside its head when `prometheus` is on PATH, from
Ray's generated config, and stops it, by pid, with the head; get_metrics reads history from it."""

from __future__ import annotations

import anyio
import psutil
import pytest
from tests.rules import lacking
from tests.support import mcp_client, text_of

from ray_mcp.local_prometheus import prometheus_binary
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live


async def test_the_embedded_cluster_brings_its_own_prometheus_and_stops_it() -> None:
    if prometheus_binary() is None:
        lacking("prometheus", "install Debian's package: apt install prometheus")
    settings = Settings(embedded="always", embedded_num_cpus=1, cluster_start_timeout_s=240)
    async with mcp_client(settings) as client:
        with anyio.fail_after(300):
            status = await client.call_tool("cluster_status", {}, read_timeout_seconds=290)
        assert not status.is_error, text_of(status)
        with anyio.fail_after(
            120
        ):  # Prometheus scrapes every 5 s; Ray reports node metrics every few seconds
            while True:
                result = await client.call_tool("get_metrics", {"question": "node_memory", "last": "5m"})
                answer = result.structured_content or {}
                if not result.is_error and answer["panels"][0]["series"][0]["points"] >= 2:
                    break
                await anyio.sleep(2)
        assert answer["source"] == "prometheus"
        assert "started by ray-mcp beside its embedded head" in answer["prometheus"]
        url = answer["prometheus"].split()[0]
        prometheus = [
            p
            for p in psutil.process_iter(["cmdline"])
            if any(
                f"--web.listen-address={url.removeprefix('http://')}" == a for a in p.info["cmdline"] or []
            )
        ]
        assert len(prometheus) == 1, prometheus
    with anyio.fail_after(30):
        while prometheus[0].is_running() and prometheus[0].status() != psutil.STATUS_ZOMBIE:
            await anyio.sleep(0.2)
