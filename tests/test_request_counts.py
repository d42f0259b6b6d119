"""Each tool reads each source once per call (the read scope, canonical reads), counted on a real cluster that
has pending placement groups, a dead actor and a failed job: every dashboard request through a counting
transport, every GCS call through a counting channel, both injected through build_server.

Targets (issue 36): cluster_health at most 13 requests, diagnose_job at most 9, pg_status at most 3 plus one
GCS call: 4 in all, which pg_status now makes as one dashboard request (its page) and three GCS calls (the
placement group table, the nodes and what they have free: beside the page, where the dashboard, serving one
request at a time, queued them behind it). Not counting the crashed workers' logs read (at most CRASH_LOGS, each once). Counted on a warm server
(its second call of each tool): a first call may also learn what a server keeps (a node's logs directory, the
jobs' env_vars)."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import grpc
from tests.state_drivers import driver
from tests.support import call_ok, mcp_client, run_to_end, text_of
from tests.test_health_at_scale import POPULATION, Counting

from ray_mcp.limits import CRASH_LOGS
from ray_mcp.settings import Settings
from ray_mcp.sources.gcs import GcsLookup

# A job whose actor dies of its worker's exit: diagnose_job reads its actors, tasks and the crashed worker's log.
DIES = (
    "python -c \"import os, ray; ray.init(); A = ray.remote(max_restarts=0)(type('A', (), {'boom': "
    'lambda self: os._exit(1)})); ray.get(A.remote().boom.remote())"'
)
UNPLACED_PAGE = "/api/v0/placement_groups?limit=50&detail=1&timeout=10&filter_keys=state"
TARGETS = {"cluster_health": (13, None), "diagnose_job": (9, None), "pg_status": (1, 3)}


class CountCalls(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls.append(details.method)
        return continuation(details, request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        self.calls.append(details.method)
        return continuation(details, request)


@dataclass(frozen=True)
class CountingLookup(GcsLookup):
    """The real GCS lookup, whose channels count every call made on them."""

    calls: list[str] = field(default_factory=list, compare=False)

    def channel(self, gcs_address: str, authorization: str | None) -> Any:
        return grpc.intercept_channel(super().channel(gcs_address, authorization), CountCalls(self.calls))


async def test_each_tool_reads_each_source_once_per_call(ray_cluster: Any) -> None:
    tag = f"count{uuid.uuid4().hex[:6]}"
    counting, lookup = Counting(), CountingLookup()
    settings = Settings(address=ray_cluster.dashboard_url)
    with driver(ray_cluster.gcs_address, POPULATION, tag):
        async with mcp_client(settings, http_transport=counting, gcs_lookup=lookup) as client:
            job, info = await run_to_end(client, entrypoint=DIES)
            assert info["status"] == "FAILED", info
            with anyio.fail_after(120):  # until the cluster shows the pending group that can never fit
                while f"{tag}-huge" not in text_of(await call_ok(client, "cluster_health", {})):
                    await anyio.sleep(1)
            counts: dict[str, tuple[Counter[str], list[str]]] = {}
            page: dict[str, Any] = {}
            for tool, args in (("cluster_health", {}), ("diagnose_job", {"job": job}), ("pg_status", {})):
                await call_ok(client, tool, args)  # what a first call may learn, learned
                counting.requests.clear()
                lookup.calls.clear()
                result = await call_ok(client, tool, args)
                counts[tool] = (Counter(counting.requests), list(lookup.calls))
                if tool == "pg_status":  # the pending groups explained, from the GCS's table and nodes
                    assert f"{tag}-huge" in text_of(result) and "STRICT_SPREAD" in text_of(result)
                    page = result.structured_content or {}
    # The State API pages in its own order: when the session cluster holds more groups than one page (every
    # earlier test's REMOVED groups stay listed), the unplaced ones are asked for once more, and only then.
    unplaced = [r for r in counts["pg_status"][0] if r.startswith(UNPLACED_PAGE)]
    assert {"matched", "shown"} <= page.keys(), page.keys()
    assert not unplaced or page["matched"] > page["shown"], (unplaced, page["matched"], page["shown"])
    for request in unplaced:
        del counts["pg_status"][0][request]
    for tool, (http_at_most, gcs_at_most) in TARGETS.items():
        requests, calls = counts[tool]
        shown = "\n".join(f"{n} x {r}" for r, n in requests.most_common())
        print(f"{tool}: {sum(requests.values())} requests, {len(calls)} GCS calls\n{shown}\n{calls}")
        # A crashed worker's stderr is evidence about that worker, bounded by CRASH_LOGS: how many there are
        # depends on what earlier tests left crashed on the session cluster, so they are counted apart.
        logs = sum(n for r, n in requests.items() if r.startswith("/api/v0/logs/file?"))
        assert sum(requests.values()) - logs <= http_at_most, f"{tool}:\n{shown}"
        assert logs <= CRASH_LOGS, f"{tool}:\n{shown}"
        assert max(requests.values()) == 1, f"{tool} asked one thing twice:\n{shown}"
        if gcs_at_most is not None:
            assert len(calls) <= gcs_at_most, (tool, calls)
