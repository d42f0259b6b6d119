"""The object store (summarize_objects), cluster events (list_events) and a node's log files (tail_logs with a
glob), on a head of this module's own: an 80 MB object store that a driver of ours fills past full, so that Ray
spills; a detached actor that outlives its job holding an object (a leak); a job that fails (its events); a
Serve deployment that asks for more replicas than the head's CPUs hold (why fewer run)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import call_ok, mcp_client, run_to_end, structured, text_of

from ray_mcp.local_head import LocalHead, free_ports
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

STORE_BYTES = 80 * 1024**2
# Eight 10 MB objects held by the driver: more than the store holds, so Ray spills some of them to disk.
FILLER = """
import sys, time, numpy as np, ray
ray.init(address=sys.argv[1])
held = [ray.put(np.ones(10 * 1024**2, dtype=np.uint8)) for _ in range(8)]
print("filled", flush=True)
time.sleep(600)
"""
# A detached actor that keeps an object after the job that made it has ended.
LEAKER = """
import numpy as np, ray
ray.init(namespace="leak")
@ray.remote(num_cpus=0)
class Keeper:
    def hold(self):
        self.ref = ray.put(np.ones(5 * 1024**2, dtype=np.uint8))
        return True
k = Keeper.options(name="keeper", lifetime="detached").remote()
ray.get(k.hold.remote())
"""


@pytest.fixture(scope="module")
def head() -> Iterator[LocalHead]:
    env = {"RAY_record_ref_creation_sites": "1"}
    with local_head(num_cpus=2, object_store_memory=STORE_BYTES, extra_env=env) as h:
        yield h


@pytest.fixture(scope="module")
def filler(head: LocalHead) -> Iterator[subprocess.Popen[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env["RAY_record_ref_creation_sites"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", FILLER, head.gcs_address],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        for line in proc.stdout:
            if "filled" in line or time.monotonic() > deadline:
                break
        assert proc.poll() is None, "the driver filling the store exited"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
async def client(head: LocalHead, tmp_path: Path) -> AsyncIterator[Client]:
    async with mcp_client(Settings(address=head.dashboard_url, upload_roots=[tmp_path])) as c:
        yield c


async def test_the_object_store_shows_what_spilled_who_holds_it_and_a_leak(
    client: Client, filler: subprocess.Popen[str], tmp_path: Path
) -> None:
    (tmp_path / "leak.py").write_text(LEAKER)
    _, job = await run_to_end(client, entrypoint="python leak.py", runtime_env={"working_dir": str(tmp_path)})
    assert job["status"] == "SUCCEEDED", job
    with anyio.fail_after(120):  # the raylet reports its spill counters every few seconds
        while True:
            result = await call_ok(client, "summarize_objects", {})
            s = dict(result.structured_content or {})
            if s["nodes"] and s["nodes"][0].get("spilled_bytes"):
                break
            await anyio.sleep(2)
    text = text_of(result)
    node = s["nodes"][0]
    assert node["spilled_bytes"] > 0 and abs(node["total"] - STORE_BYTES) < STORE_BYTES / 20, s["nodes"]
    assert "spilled" in s["verdict"], s["verdict"]
    top = s["groups"][0]  # the driver's 80 MB, from the line of FILLER that made them
    assert f"pid {filler.pid}" in top["owner"] and top["objects"] == 8, top
    assert top["bytes"] >= 8 * 10 * 1024**2 and "put" in top["call_site"], top
    assert s["leaks"] == len([g for g in s["groups"] if g.get("leak")]) and s["verdict"] in text


async def test_events_of_a_failed_job_filtered_newest_first(client: Client, tmp_path: Path) -> None:
    sid, job = await run_to_end(client, entrypoint="python -c 'import sys; sys.exit(3)'")
    assert job["status"] == "FAILED"
    # The dashboard agent reads the event files every 2 s: the job's events reach it a few seconds after
    # the job ends (later on a loaded machine), so they are asked for until they are there.
    with anyio.fail_after(60):
        while not (events := await structured(client, "list_events", job=sid))["matched"]:
            await anyio.sleep(1)
    assert all(sid in e["message"] for e in events["events"]), events
    fatal = await structured(client, "list_events", job=sid, severity="FATAL")
    assert all(e["severity"] == "FATAL" for e in fatal["events"]) and fatal["matched"] < events["matched"]
    everything = await structured(client, "list_events", source="jobs", since_s=3600, limit=200)
    times = [e["time"] for e in everything["events"]]
    assert times == sorted(times, reverse=True) and everything["matched"] >= events["matched"]
    assert (
        sum(e["count"] for e in everything["events"]) == everything["matched"]
    )  # repeats counted, none lost
    bad = await client.call_tool("list_events", {"node": "10.255.255.1"})
    assert bad.is_error and "cluster_status" in text_of(bad)


async def test_tail_logs_lists_a_nodes_files_by_pattern(client: Client, head: LocalHead) -> None:
    node = (await structured(client, "cluster_status"))["nodes"][0]["node_id"]
    listing = await structured(client, "tail_logs", node=node, filename="*.out")
    files = {f["name"]: f for f in listing["files"]}
    assert "raylet.out" in files and listing["sections"] == [], listing
    raylet = files["raylet.out"]
    on_disk = (head.temp_dir / "session_latest/logs/raylet.out").stat().st_size
    assert 0 < raylet["bytes"] <= on_disk  # the raylet keeps writing it
    assert raylet["modified"] >= time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86400))
    none = await structured(client, "tail_logs", node=node, filename="no-such-*.log")
    assert none["files"] == [] and "filename='*'" in none["hints"][0]


SCALED_APP = """
from ray import serve

@serve.deployment(ray_actor_options={"num_cpus": 1},
                  autoscaling_config={"min_replicas": 3, "max_replicas": 3, "target_ongoing_requests": 2})
class Wide:
    def __call__(self, request):
        return "ok"

app = Wide.bind()
"""


async def test_serve_status_says_why_fewer_replicas_run_than_the_target(
    head: LocalHead, tmp_path: Path
) -> None:
    (tmp_path / "wide_app.py").write_text(SCALED_APP)
    config = {
        "http_options": {"host": "127.0.0.1", "port": free_ports(1)[0]},
        "applications": [
            {
                "name": "wide",
                "import_path": "wide_app:app",
                "route_prefix": "/wide",
                "runtime_env": {"env_vars": {"PYTHONPATH": str(tmp_path)}},
            }
        ],
    }
    settings = Settings(address=head.dashboard_url, upload_roots=[tmp_path])
    async with mcp_client(settings) as client:
        await call_ok(client, "serve_deploy", {"config": config})
        with anyio.fail_after(180):  # 2 CPUs hold 2 of its 3 replicas: the third waits for one
            while True:
                status = await structured(client, "serve_status", app="wide")
                deployments = [d for a in status.get("apps", []) for d in a.get("deployments", [])]
                if deployments and deployments[0].get("running_replicas") == 2:
                    break
                await anyio.sleep(1)
        wide = deployments[0]
        assert wide["target_replicas"] == 3 and wide["required_resources"] == {"CPU": 1.0}, wide
        assert "needs" in wide["scaling"] and "max_replicas=3" in wide["scaling"], wide
        assert "scaling:" in text_of(await call_ok(client, "serve_status", {"app": "wide"}))
