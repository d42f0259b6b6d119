"""Read tools never create anything in the cluster: after every read tool, every resource read and completion,
no actor, job or placement group exists that did not before.

A private head (no Ray Data, Serve or Train ever ran on it: the dashboard creates Ray Data's detached stats actor
when its datasets route is called without one) runs a job whose driver made a decoy: a detached actor under the
stats actor's name in a namespace of its own. Ray identifies an actor by name *and* namespace, so the decoy is
not the stats actor, and a read that took it for one would make the dashboard create the real one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_types import PromptReference
from tests.conftest import local_head
from tests.support import RAY_TOOLSETS, call_ok, wait_until

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

DECOY_DRIVER = """
import time, ray
ray.init(namespace="decoy-ns")

@ray.remote(num_cpus=0)
class Decoy:
    def ping(self):
        return 1

decoy = Decoy.options(name="datasets_stats_actor", lifetime="detached").remote()
ray.get(decoy.ping.remote())
print("decoy ready", flush=True)
time.sleep(600)
"""


def from_schema(schema: dict[str, Any]) -> dict[str, Any]:
    samples = {
        "string": "no-such-thing",
        "integer": 1,
        "number": 1,
        "boolean": False,
        "object": {},
        "array": [],
    }
    properties = schema.get("properties", {})
    return {
        name: samples.get(str(properties.get(name, {}).get("type", "string")), "no-such-thing")
        for name in schema.get("required", [])
    }


async def what_exists(dashboard: str) -> dict[str, set[str]]:
    """Every actor, placement group and job the cluster holds (dead ones too), by id."""
    async with httpx.AsyncClient(base_url=dashboard, timeout=60) as http:
        actors = (await http.get("/api/v0/actors", params={"limit": 10000})).json()["data"]["result"][
            "result"
        ]
        groups = (await http.get("/api/v0/placement_groups", params={"limit": 10000})).json()
        jobs = (await http.get("/api/jobs/")).json()
        state_jobs = (await http.get("/api/v0/jobs", params={"limit": 10000})).json()
    return {
        "actors": {f"{a['actor_id']} {a.get('ray_namespace')}/{a.get('name')}" for a in actors},
        "placement groups": {g["placement_group_id"] for g in groups["data"]["result"]["result"]},
        "jobs": {f"{j.get('job_id')} {j.get('submission_id')}" for j in jobs},
        "jobs (State API)": {
            f"{j.get('job_id')} {j.get('submission_id')}" for j in state_jobs["data"]["result"]["result"]
        },
    }


def test_no_read_tool_creates_an_actor_a_job_or_a_placement_group(tmp_path: Path) -> None:
    from ray.job_submission import JobSubmissionClient

    (tmp_path / "decoy.py").write_text(DECOY_DRIVER)
    with local_head(num_cpus=2) as head:  # a private head: no Ray Data ever ran on it
        sid = JobSubmissionClient(head.dashboard_url).submit_job(
            entrypoint=f"{sys.executable} decoy.py", runtime_env={"working_dir": str(tmp_path)}
        )
        anyio.run(call_every_read, head.dashboard_url, sid, tmp_path)


async def call_every_read(dashboard: str, sid: str, tmp_path: Path) -> None:
    server = build_server(Settings(address=dashboard, upload_roots=[tmp_path], toolsets=RAY_TOOLSETS))
    try:
        async with Client(server) as client:
            await wait_until(client, sid, {"RUNNING"})
            with anyio.fail_after(120):  # the decoy exists once the driver says so
                while "decoy ready" not in str((await call_ok(client, "tail_logs", {"job": sid})).content):
                    await anyio.sleep(0.5)
            actors = (await call_ok(client, "list_actors", {"limit": 10})).structured_content or {}
            decoy = next(a["actor_id"] for a in actors["actors"] if a.get("name") == "datasets_stats_actor")
            before = await what_exists(dashboard)

            samples: dict[str, dict[str, Any]] = {
                "get_job": {"job": sid, "datasets": True},
                "diagnose_job": {"job": sid},
                "job_topology": {"job": sid},
                "wait_for_job": {"job": sid, "timeout_s": 1},
                "get_actor": {"actor_id": decoy},
                "cpu_profile": {"actor_id": decoy, "duration_s": 1},
                "stack_traces": {"actor_id": decoy},
                "tail_logs": {"job": sid, "lines": 5},
                "get_train_run": {"run": "no-such-run"},
            }
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            reads = sorted(n for n, kind in server.tool_kinds.items() if kind == "read" and n in schemas)
            for name in reads:
                await client.call_tool(name, samples.get(name) or from_schema(schemas[name]))
            await client.read_resource(f"ray://jobs/{sid}")
            for argument in ("job", "actor", "placement_group", "app", "deployment", "node"):
                await client.complete(
                    PromptReference(name="diagnose-failed-job"), {"name": argument, "value": ""}
                )
            after = await what_exists(dashboard)
            created = {kind: sorted(after[kind] - before[kind]) for kind in before}
            assert created == {kind: [] for kind in before}, f"read tools created: {created}"
            assert "get_job" in reads and "serve_status" in reads and "list_train_runs" in reads
    finally:
        await server.app.aclose()
