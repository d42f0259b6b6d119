"""Profiling by task id (Ray 2.60's /task/traceback, /task/cpu_profile), memory profiles (/memory_profile with
memray) and GPU profiles (/worker/gpu_profile).

The session head runs with RAY_DASHBOARD_ENABLE_PROFILING=1 (LocalHead turns it on) and its PATH starts with
this Python's bin, where the dev extra installs memray, so the dashboard's routes run for real. The GPU route
cannot run here (no GPU): its answers are the recording tests/recorded_routes/gpu_profile_route.json, served in place
of that one route while every other request reaches the real head.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from tests.conftest import Cluster
from tests.support import call_ok, mcp_client, submit, text_of
from tests.test_stacks import BUSY_JOB, job_dir, line_of, poll, sizes, stop

from ray_mcp.settings import Settings

BUDGET = 6_000
RECORDED_GPU = Path(__file__).parent / "recorded_routes" / "gpu_profile_route.json"

# A plain task (not an actor) that burns CPU in a project function: found by its task id.
BUSY_TASK_JOB = """\
import ray

ray.init()


def crunch(n):
    total = 0
    for i in range(n):
        total += (i * i) % 7
    return total


@ray.remote(num_cpus=0)
def churn():
    while True:
        crunch(20000)


print("churning", flush=True)
ray.get(churn.remote())
"""

# An actor that keeps 256 KiB more every 20 ms in one project line, and never lets go.
HOARD_JOB = """\
import time

import ray

ray.init()


@ray.remote(num_cpus=0)
class Hoarder:
    def __init__(self):
        self.kept = []

    def grow(self):
        self.kept.append(bytearray(256 * 1024))

    def run(self):
        while True:
            self.grow()
            time.sleep(0.02)
            if len(self.kept) > 2000:
                self.kept.clear()


hoarder = Hoarder.remote()
print("hoarding", flush=True)
ray.get(hoarder.run.remote())
"""


@pytest.fixture
async def pclient(ray_cluster: Cluster) -> AsyncIterator[Client]:
    """A server that lists the profiling toolset (memory_profile, gpu_profile) for the session head."""
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, toolsets="default,profiling")) as c:
        yield c


async def running_task(client: Client, name: str) -> str:
    async def found() -> Any:
        result = await call_ok(client, "list_tasks", {"state": "RUNNING", "name": name})
        tasks = result.structured_content.get("tasks") or []
        return tasks[0]["task_id"] if tasks else None

    return str(await poll(found, 240, f"the RUNNING task {name}"))


async def alive_actor(client: Client, class_name: str) -> str:
    async def found() -> Any:
        result = await call_ok(client, "list_actors", {"class_name": class_name, "state": "ALIVE"})
        actors = result.structured_content["actors"]
        return actors[0]["actor_id"] if actors else None

    return str(await poll(found, 240, f"the {class_name} actor"))


async def test_a_task_is_profiled_and_its_stack_read_by_its_id_alone(client: Client, tmp_path: Path) -> None:
    sid = await submit(client, **job_dir(tmp_path, "churn.py", BUSY_TASK_JOB))
    crunch_line = line_of(BUSY_TASK_JOB, "total += (i * i) % 7")
    try:
        task_id = await running_task(client, "churn")

        async def stack() -> Any:
            result = await client.call_tool("stack_traces", {"task_id": task_id})
            return None if result.is_error else result

        result = await poll(stack, 120, "the task's stack")
        data = result.structured_content
        assert data["source"] == "dashboard-task", data  # /task/traceback: found by id, no pid asked for
        frames = "\n".join(f for g in data["groups"] for f in g["frames"])
        assert "churn.py" in frames and ("crunch" in frames or "churn" in frames), data

        async def busy() -> Any:
            result = await client.call_tool("cpu_profile", {"task_id": task_id, "duration_s": 2})
            return None if result.is_error or not result.structured_content["samples"] else result

        result = await poll(busy, 120, "a CPU profile of the task")
        data = result.structured_content
        assert data["source"] == "dashboard-task", data
        hot = data["functions"][0]
        assert hot["function"] == "crunch" and hot["file"] == "churn.py" and hot["line"] == crunch_line, data
        assert text_of(result).startswith(data["verdict"]) and max(sizes(result)) <= BUDGET
    finally:
        await stop(client, sid)


async def test_memory_profile_names_the_line_a_worker_keeps_allocating_in(
    client: Client, pclient: Client, tmp_path: Path
) -> None:
    sid = await submit(client, **job_dir(tmp_path, "hoard.py", HOARD_JOB))
    grow_line = line_of(HOARD_JOB, "self.kept.append(bytearray")
    try:
        actor_id = await alive_actor(client, "Hoarder")

        async def profiled(**args: Any) -> Any:
            result = await pclient.call_tool(
                "memory_profile", {"actor_id": actor_id, "duration_s": 3, **args}
            )
            assert not result.is_error or "not running" in text_of(result).lower(), text_of(result)
            return None if result.is_error or not result.structured_content["total_bytes"] else result

        result = await poll(lambda: profiled(leaks_only=True), 180, "a leaks-only memory profile")
        data, text = result.structured_content, text_of(result)
        assert data["mode"] == "leaks" and data["source"] == "dashboard", data
        top = data["leak_candidates"][0]
        assert top["where"] == f"hoard.py:{grow_line} in grow", data["leak_candidates"]
        assert top["held_bytes"] >= 256 * 1024 * 10, top  # 3 s at 50 allocations a second, each 256 KiB
        assert f"hoard.py:{grow_line}" in data["verdict"] and text.startswith(data["verdict"])
        assert max(sizes(result)) <= BUDGET, sizes(result)

        result = await poll(lambda: profiled(top=5), 180, "a peak memory profile")
        data = result.structured_content
        assert data["mode"] == "peak" and not data.get("leak_candidates"), data
        assert len(data["allocators"]) <= 5 and data["allocators_total"] >= len(data["allocators"])
        project = [a for a in data["allocators"] if a["project"]]
        assert project[0]["file"] == "hoard.py" and project[0]["line"] == grow_line, data["allocators"]
        assert project[0]["total_bytes"] >= project[0]["own_bytes"] > 0
        assert any("leaks_only=true" in h for h in data["hints"])
    finally:
        await stop(client, sid)


async def test_memory_profile_refuses_a_pid_that_is_not_a_worker_of_the_cluster(pclient: Client) -> None:
    client = pclient
    none = await client.call_tool("memory_profile", {})
    assert none.is_error and "memory_profile needs one target" in text_of(none), text_of(none)
    node = (await call_ok(client, "list_nodes", {})).structured_content["nodes"][0]["node_id"]
    stranger = await client.call_tool("memory_profile", {"pid": 1, "node": node})
    assert stranger.is_error and "not an alive Ray worker or driver" in text_of(stranger), text_of(stranger)


# -- the GPU route: a recording, on the real head's other routes -------------------------------------------


class GpuRecording(httpx.AsyncBaseTransport):
    """The real head for every request but /worker/gpu_profile, which gets the recorded answer ``case``; with
    ``gpu`` the State API's nodes say each node has one GPU (the real head has none)."""

    def __init__(self, case: str, *, gpu: bool) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.recorded = json.loads(RECORDED_GPU.read_text())[case]
        self.gpu = gpu
        self.asked: list[httpx.URL] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/worker/gpu_profile":
            self.asked.append(request.url)
            ip, pid = request.url.host, request.url.params["pid"]
            rec = self.recorded
            headers = (
                {"location": rec["location_template"].format(ip=ip, pid=pid)}
                if "location_template" in rec
                else {}
            )
            return httpx.Response(rec["status"], headers=headers, text=rec["body"].format(ip=ip))
        response = await self.inner.handle_async_request(request)
        if not (self.gpu and request.url.path == "/api/v0/nodes"):
            return response
        body = json.loads(await response.aread())
        for node in body["data"]["result"]["result"]:
            node.setdefault("resources_total", {})["GPU"] = 1.0
        return httpx.Response(response.status_code, headers={"content-type": "application/json"}, json=body)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_recorded_gpu_answers_are_the_ones_ray_260_sends() -> None:
    """The recording's texts come from the installed wheel: a Ray that words them otherwise fails here."""
    import inspect

    from ray.dashboard.modules.reporter import gpu_profile_manager, reporter_head

    recorded = json.loads(RECORDED_GPU.read_text())
    assert recorded["disabled"][
        "body"
    ] == gpu_profile_manager.GpuProfilingManager._DISABLED_ERROR_MESSAGE.format(ip_address="{ip}")
    route = inspect.getsource(reporter_head.ReportHead.gpu_profile)
    assert 'redirect_url = f"/api/v0/logs/file?{query}"' in route and "HTTPFound(redirect_url)" in route
    for name in ("node_ip", "filename", "download_filename", "lines"):
        assert f'"{name}"' in route, name
    assert "gputrace_" in inspect.getsource(gpu_profile_manager.GpuProfilingManager._get_trace_filename)


async def test_gpu_profile_says_when_there_is_no_gpu_and_where_the_trace_is_when_there_is(
    client: Client, pclient: Client, ray_cluster: Cluster, tmp_path: Path
) -> None:
    sid = await submit(client, **job_dir(tmp_path, "indexer.py", BUSY_JOB))
    try:
        actor_id = await alive_actor(client, "Indexer")

        # The real head: no GPU on the worker's node, so the route is not even asked.
        result = await call_ok(pclient, "gpu_profile", {"actor_id": actor_id})
        data = result.structured_content
        assert data["gpu"] is False and "without a GPU" in data["verdict"], data

        for case, gpu in (("traced", True), ("disabled", True)):
            recording = GpuRecording(case, gpu=gpu)
            settings = Settings(address=ray_cluster.dashboard_url, toolsets="default,profiling")
            async with mcp_client(settings, http_transport=recording) as c:
                result = await call_ok(c, "gpu_profile", {"actor_id": actor_id, "steps": 2})
            data = result.structured_content
            assert recording.asked and recording.asked[0].params["num_iterations"] == "2", recording.asked
            if case == "traced":
                assert data["gpu"] is True and data["trace_file"].startswith("profiles/gputrace_"), data
                assert data["trace_file"] in data["verdict"] and data["node_ip"], data
            else:
                assert "GPU profiling off" in data["verdict"] and "dynolog" in data["hints"][0], data
    finally:
        await stop(client, sid)


@pytest.mark.parametrize("tool", ["memory_profile", "gpu_profile"])
async def test_the_profilers_need_the_node_of_a_pid(pclient: Client, tool: str) -> None:
    result = await pclient.call_tool(tool, {"pid": 5})
    assert result.is_error and "needs node" in text_of(result)


# -- diagnose_job and cluster_health offer memory_profile (not live: the engine over recorded evidence) -------


def test_diagnose_job_offers_memory_profile_for_a_job_the_memory_monitor_killed() -> None:
    from tests.causal_support import replay

    from ray_mcp.diagnosis import report

    model, text = report.job_report("recorded", replay("oom_task"), max_bytes=6000)
    [oom] = [f for f in model.findings if f.kind == "oom"][:1]
    assert any(step.startswith("memory_profile ") and "leaks_only=true" in step for step in oom.next_steps), (
        text
    )


def test_cluster_health_offers_memory_profile_where_a_nodes_memory_fills() -> None:
    from ray_mcp.diagnosis import report
    from ray_mcp.diagnosis.graph import GraphInputs

    node = {"node_id": "c" * 56, "state": "ALIVE", "resources": {"memory": {"used": 9.0e9, "total": 10.0e9}}}
    model, text = report.health_report(
        "recorded", GraphInputs(now_ms=1.0, status={"nodes": [node]}), max_bytes=6000
    )
    [full] = [f for f in model.findings if f.kind == "memory"]
    assert any(step.startswith("memory_profile ") for step in full.next_steps), text
