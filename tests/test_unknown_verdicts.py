"""A check that could not run is never healthy: the verdict says UNKNOWN and names what could not be read.

The dashboard is the real one of the session cluster, behind a stand-in transport (injected through
build_server) that answers 500 for chosen endpoints, or that has no dashboard at all behind it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.state_drivers import driver
from tests.support import call_ok, mcp_client, run_to_end, submit, text_of

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.sources.gcs import GcsLookup

ALL_CHECKS = {
    "nodes and demands",
    "failed jobs",
    "dead actors",
    "restarting actors",
    "actor restarts",
    "failed tasks",
    "placement groups",
    "Serve",
    "cluster events",
    "the object store",
}


class Failing(httpx.AsyncBaseTransport):
    """Forwards to the real dashboard, except that the given paths answer 500 (or raise ``error``)."""

    def __init__(self, *prefixes: str, error: Exception | None = None) -> None:
        self.prefixes = prefixes
        self.error = error
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith(self.prefixes):
            if self.error is not None:
                raise self.error
            return httpx.Response(500, text="Internal Server Error: the state aggregator is down")
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


async def health(
    settings: Settings, transport: httpx.AsyncBaseTransport | None = None, **injected: Any
) -> tuple[dict[str, Any], str]:
    async with mcp_client(settings, http_transport=transport, **injected) as client:
        result = await call_ok(client, "cluster_health", {})
    return dict(result.structured_content or {}), text_of(result)


async def test_cluster_health_with_no_dashboard_at_all_is_unknown_never_healthy() -> None:
    data, text = await health(Settings(address="http://127.0.0.1:9", request_timeout_s=2))
    assert data["status"] == "UNKNOWN" and data["healthy"] is False, text
    assert set(data["unchecked"]) == ALL_CHECKS and data["checked"] == []
    first = text.splitlines()[0]
    assert first.endswith("UNKNOWN") and "HEALTHY" not in first, text
    assert "nothing could be read" in text and "Could not check" in text


async def test_cluster_health_names_the_checks_whose_endpoint_answered_500(ray_cluster: Any) -> None:
    clean, _ = await health(Settings(address=ray_cluster.dashboard_url))
    # (a log of a node the suite removed may be unreadable: only the endpoint checks must all have answered)
    assert not ALL_CHECKS & set(clean["unchecked"]) and clean["status"] in ("HEALTHY", "PROBLEMS_FOUND"), (
        clean
    )
    data, text = await health(Settings(address=ray_cluster.dashboard_url), Failing("/api/v0/actors"))
    assert data["healthy"] is False and data["status"] in ("UNKNOWN", "PROBLEMS_FOUND"), text
    assert {"dead actors", "restarting actors", "actor restarts"} <= set(data["unchecked"])
    assert "dead actors" not in data["checked"] and "failed tasks" in data["checked"]
    assert "could not check" in data["verdict"] and "dead actors" in data["verdict"], data["verdict"]
    if clean["status"] == "HEALTHY":  # nothing else wrong in this cluster: the whole verdict is UNKNOWN
        assert data["status"] == "UNKNOWN" and text.splitlines()[0].endswith("UNKNOWN")


async def test_a_bug_in_one_check_leaves_the_others_and_says_unknown(ray_cluster: Any) -> None:
    data, text = await health(  # the tasks come from the State API's lists, one of which breaks
        Settings(address=ray_cluster.dashboard_url), Failing("/api/v0/tasks", error=KeyError("task-bug"))
    )
    assert "failed tasks" in data["unchecked"] and data["healthy"] is False, text
    assert "unexpected KeyError" in text and "nodes and demands" in data["checked"]


async def test_diagnose_job_says_what_evidence_it_could_not_read_in_its_verdict(
    client: Client, ray_cluster: Any
) -> None:
    done, info = await run_to_end(client, entrypoint="echo a-clean-job")
    assert info["status"] == "SUCCEEDED"
    running = await submit(client, entrypoint="sleep 120")
    # The driver log is read through the failing dashboard (a local file of this machine's head would be read
    # without it: then the log is known, which is not what this test is about).
    server = build_server(
        Settings(address=ray_cluster.dashboard_url, local_logs=False),
        http_transport=Failing("/api/v0/", "/api/cluster_status"),
    )
    try:
        async with Client(server) as faulty:
            ended = (await call_ok(faulty, "diagnose_job", {"job": done})).structured_content
            with anyio.fail_after(60):
                while (await call_ok(client, "get_job", {"job": running})).structured_content[
                    "status"
                ] == "PENDING":
                    await anyio.sleep(0.5)
            live = await call_ok(faulty, "diagnose_job", {"job": running})
    finally:
        await call_ok(client, "stop_job", {"job": running})
        await server.app.aclose()
    assert "the driver log" in ended["unchecked"] and "could not check" in ended["verdict"], ended
    data = live.structured_content
    assert "the driver log" in data["unchecked"] and "No finding" not in text_of(live), text_of(live)
    assert data["verdict"].startswith("Unknown") or "could not check" in data["verdict"], data["verdict"]


@pytest.mark.parametrize(
    ("tool", "path"), [("cluster_status", "/api/cluster_status"), ("serve_status", "/api/serve/")]
)
async def test_a_status_tool_whose_source_fails_errors_instead_of_concluding(
    ray_cluster: Any, tool: str, path: str
) -> None:
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url), http_transport=Failing(path)
    ) as client:
        result = await client.call_tool(tool, {})
    text = text_of(result)
    assert result.is_error and "HTTP 500" in text, text
    assert "not running" not in text and "alive" not in text


@dataclass(frozen=True)
class NoGcsFound(GcsLookup):
    """A dashboard reached alone (e.g. a port-forward of 8265): its GCS cannot be found from here."""

    asked: list[str] = field(default_factory=list)

    def gcs_of(self, dashboard_url: str, timeout_s: float) -> str | None:
        self.asked.append(dashboard_url)
        return None


async def test_a_dashboard_whose_gcs_cannot_be_found_is_not_looked_up_again_by_every_call(
    ray_cluster: Any,
) -> None:
    """A dashboard reached alone (a port-forward, KubeRay's service proxy): every answer comes from it, the
    GCS's facts are stated unknown, and the GCS is looked for once, not by every call."""
    lookup = NoGcsFound()
    tag = f"nogcs{uuid.uuid4().hex[:6]}"
    group = 'g = placement_group([{"CPU": 0.01}], name=f"{sys.argv[2]}-g")\nray.get(g.ready())\n'
    with driver(ray_cluster.gcs_address, group, tag):
        async with mcp_client(Settings(address=ray_cluster.dashboard_url), gcs_lookup=lookup) as client:
            for _ in range(3):
                with anyio.fail_after(60):
                    while (
                        result := await client.call_tool("pg_status", {"placement_group": f"{tag}-g"})
                    ).is_error:
                        await anyio.sleep(0.5)  # until the driver made it
                assert "Strategies and counts per state unknown (no GCS found" in text_of(result), text_of(
                    result
                )
            health = await call_ok(client, "cluster_health", {})
            assert "dead actors" in (health.structured_content or {})["checked"], text_of(health)
    assert lookup.asked == [ray_cluster.dashboard_url]
