"""Serve's autoscaler in Ray's own words: a deployment that scales up under load and down after it, on a head
of its own (the test asserts a HEALTHY cluster; the head is stopped with the test, Serve with it), its decisions
in serve_status, cluster_health, diagnose_job of the job that deployed it and the controller's health; and
autoscaling_detail as Ray's schema defines it, for the Rays that fill it.

Ray 2.60's controller declares ``autoscaling_detail`` in its REST schema but never fills it (null on a real
head): the decisions then come from the lines its controller logs with each decision. The second half of this
file builds an ``autoscaling_detail`` with Ray's own pydantic model (ray.serve.schema), so a Ray that fills it
is read the same way.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import call_ok, submit, text_of

from ray_mcp.local_head import free_ports
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.shaping.serve import build_serve_status, render_serve_status

AUTOSCALING = {
    "min_replicas": 1,
    "max_replicas": 3,
    "target_ongoing_requests": 1,
    "upscale_delay_s": 1,
    "downscale_delay_s": 3,
    "metrics_interval_s": 0.5,
    "look_back_period_s": 2,
}
# A driver that deploys the app and stays: its job started Serve's controller, so the replicas carry its job id
# and diagnose_job of this job tells their decisions.
DRIVER = textwrap.dedent(
    f"""
    import asyncio
    import sys
    import threading

    from ray import serve

    @serve.deployment
    class Slow:
        async def __call__(self, request):
            await asyncio.sleep(1.5)
            return "ok"

    serve.start(http_options={{"host": "127.0.0.1", "port": int(sys.argv[1])}})
    scaled = Slow.options(
        ray_actor_options={{"num_cpus": 0}}, max_ongoing_requests=2, autoscaling_config={AUTOSCALING!r}
    )
    serve.run(scaled.bind(), name="scaler", route_prefix="/scaler")
    print("deployed", flush=True)
    threading.Event().wait()  # the driver stays while the test drives load; stop_job ends it
    """
)
REQUEST_TIMEOUT_S = 10.0  # every request to the Serve app: a DEPLOYING app can hang


async def deployment(client: Client) -> dict[str, Any]:
    result = await client.call_tool("serve_status", {"app": "scaler", "log_lines": 0})
    if result.is_error:  # the driver has not deployed it yet
        assert "No Serve application 'scaler'" in text_of(result), text_of(result)
        return {}
    status = result.structured_content
    deployments = status["apps"][0].get("deployments") or [{}] if status.get("apps") else [{}]
    return dict(deployments[0])


async def poll(client: Client, what: str, ok: Any, deadline_s: float = 180) -> dict[str, Any]:
    last: dict[str, Any] = {}
    try:
        with anyio.fail_after(deadline_s):
            while True:
                last = await deployment(client)
                if last and ok(last):
                    return last
                await anyio.sleep(1)
    except TimeoutError:
        raise AssertionError(f"{what} did not happen in {deadline_s} s; last: {last}") from None


async def load(url: str, until: anyio.Event) -> None:
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S) as http:
        while not until.is_set():
            try:
                await http.get(url)
            except httpx.HTTPError:
                await anyio.sleep(0.2)


def decisions(dep: dict[str, Any]) -> list[dict[str, Any]]:
    return list((dep.get("autoscaling") or {}).get("decisions") or [])


async def scenario(dashboard: str, tmp_path: Path) -> None:
    (tmp_path / "scaler_job.py").write_text(DRIVER)
    port = free_ports(1)[0]
    server = build_server(Settings(address=dashboard, allow_destructive=True, upload_roots=[tmp_path]))
    try:
        async with Client(server) as client:
            job = await submit(
                client, entrypoint=f"python scaler_job.py {port}", runtime_env={"working_dir": str(tmp_path)}
            )
            quiet = await poll(client, "the app RUNNING", lambda d: d.get("status") == "HEALTHY")
            assert quiet["autoscaling"]["status"] == "STABLE" and not decisions(quiet), quiet

            started = time.monotonic()
            done = anyio.Event()
            async with anyio.create_task_group() as tg:
                for _ in range(6):
                    tg.start_soon(load, f"http://127.0.0.1:{port}/scaler", done)
                up = await poll(
                    client, "an upscale", lambda d: any(x["new_replicas"] > 1 for x in decisions(d))
                )
                done.set()
            print(f"upscale seen after {time.monotonic() - started:.1f} s")
            first = decisions(up)[0]
            assert first["prev_replicas"] == 1 and first["new_replicas"] > 1, first
            assert (
                first["source"] == "controller log"
                and "requests ongoing on 1 running replica" in first["reason"]
            )
            assert up["autoscaling"]["ongoing_requests"] > 1, up["autoscaling"]

            down = await poll(
                client, "a downscale", lambda d: decisions(d)[:1] and decisions(d)[0]["new_replicas"] == 1
            )
            newest, before = decisions(down)[:2]
            assert newest["prev_replicas"] == before["new_replicas"] > 1 and newest["new_replicas"] == 1, down
            assert newest["reason"].startswith("0 requests ongoing"), newest

            result = await call_ok(client, "serve_status", {"app": "scaler"})
            text, data = text_of(result), result.structured_content
            assert f"{before['prev_replicas']} -> {before['new_replicas']} replicas because" in text, text
            assert "does not report the requests ongoing" not in text
            controller = data["controller"]
            assert controller["state"] == "ok" and controller["loops_per_second"] > 0, controller
            assert "Controller: ok:" in text

            health = await call_ok(client, "cluster_health", {})
            scaled = [f for f in health.structured_content["findings"] if f["kind"] == "serve_scaling"]
            assert scaled, health.structured_content
            said = scaled[0]["title"]
            assert (
                f'deployment "Slow" scaled {newest["prev_replicas"]} → 1 at {newest["at"]} because' in said
            ), said
            assert health.structured_content["status"] == "HEALTHY", (
                health.structured_content
            )  # a fact, not a fault

            diagnosed = await call_ok(client, "diagnose_job", {"job": job})
            mine = [f for f in diagnosed.structured_content["findings"] if f["kind"] == "serve_scaling"]
            assert mine, text_of(diagnosed)  # the job deployed the app: its replicas carry the job's id
            assert (
                f'deployment "Slow" scaled {newest["prev_replicas"]} → 1 at {newest["at"]} because 0 requests '
                "ongoing" in mine[0]["title"]
            ), mine[0]
            await call_ok(client, "stop_job", {"job": job})
    finally:
        await server.app.aclose()


@pytest.mark.live
def test_a_deployment_that_scales_shows_each_decision_in_serve_status_and_cluster_health(
    tmp_path: Path,
) -> None:
    # A head of its own: the test asserts a HEALTHY cluster, which the session head, after the suite's failing
    # jobs, never is.
    with local_head(num_cpus=2) as head:
        anyio.run(scenario, head.dashboard_url, tmp_path)


# -- autoscaling_detail as Ray's schema defines it (not live: pure shaping) ---------------------------------


def details_with(detail: dict[str, Any] | None, *, status: str = "UPSCALING") -> dict[str, Any]:
    return {
        "controller_info": {"node_id": "a" * 56, "log_file_path": "/serve/controller_1.log"},
        "controller_health_metrics": {
            "timestamp": 100.0,
            "last_control_loop_time": 99.9,
            "num_control_loops": 50,
            "loops_per_second": 2.5,
            "loop_duration_s": {"mean": 0.2, "std": 0.1, "min": 0.1, "max": 0.9},
            "event_loop_delay_s": 1.6,
            "num_asyncio_tasks": 40,
        },
        "applications": {
            "app": {
                "status": "RUNNING",
                "deployments": {
                    "Model": {
                        "name": "Model",
                        "status": status,
                        "target_num_replicas": 8,
                        "deployment_config": {"autoscaling_config": {"min_replicas": 1, "max_replicas": 8}},
                        "replicas": [{"replica_id": f"r{i}", "state": "RUNNING"} for i in range(3)],
                        "autoscaling_detail": detail,
                    }
                },
            }
        },
    }


@pytest.mark.parametrize("filled", [True, False])
def test_autoscaling_detail_is_read_in_rays_schema_and_its_absence_is_said(filled: bool) -> None:
    from ray.serve.schema import DeploymentAutoscalingDetail, ScalingDecision

    detail = DeploymentAutoscalingDetail(
        scaling_status="UPSCALING",
        decisions=[
            ScalingDecision(
                timestamp_s=1_796_392_000.0,
                reason="load 2.0 > target",
                prev_num_replicas=1,
                curr_num_replicas=3,
                policy="default",
            ),
            ScalingDecision(
                timestamp_s=1_796_392_300.0,
                reason="load 7.5 > target",
                prev_num_replicas=3,
                curr_num_replicas=8,
                policy="default",
            ),
        ],
        metrics={"total_ongoing_requests": 24.0, "queued": 3},
        metrics_health="delayed",
        errors=["metrics from 2 replicas are 12 s old"],
    ).model_dump(mode="json")
    unknown = "the Serve controller's log serve/controller_1.log could not be read (HTTP 500)"
    status = build_serve_status(details_with(detail if filled else None), app=None, unknown=unknown)
    auto = status.apps[0].deployments[0].autoscaling
    assert auto is not None
    text = render_serve_status(status)
    if filled:
        assert auto.status == "UPSCALING" and auto.metrics_health == "delayed", auto
        assert [(d.prev_replicas, d.new_replicas) for d in auto.decisions] == [(3, 8), (1, 3)]
        assert auto.decisions[0].source == "autoscaling_detail" and auto.decisions[0].policy == "default"
        assert auto.ongoing_requests == 24.0 and auto.errors == ["metrics from 2 replicas are 12 s old"]
        assert '3 -> 8 replicas because "load 7.5 > target" (policy "default")' in text, text
        assert "metrics delayed" in text
    else:
        assert auto.unknown == unknown and not auto.decisions
        assert f"decisions: unknown, because {unknown}" in text, text
    assert status.controller is not None and status.controller.state == "lagging", status.controller
    assert "Controller: lagging" in text


# -- the diagnosis: "wants 8, held at 3" and a job's decisions (not live: the engine over Ray's records) ----

# Ray 2.60's own message (deployment_state.py, SLOW_STARTUP_WARNING_S) for replicas it could not schedule.
UNSCHEDULED = (
    "Deployment 'Model' in application 'app' has 5 replicas that have taken more than 30s to be scheduled. "
    "This may be due to waiting for the cluster to auto-scale or for a runtime environment to be installed. "
    "Resources required for each replica: {'CPU': 1.0}, total resources available: {'CPU': 0.0}. "
    "Use `ray status` for more details."
)


def test_cluster_health_says_a_deployment_wants_more_replicas_than_the_cluster_can_place() -> None:
    from ray_mcp.diagnosis import report
    from ray_mcp.diagnosis.facts import PROBLEM
    from ray_mcp.diagnosis.graph import GraphInputs

    details = details_with(None)
    details["applications"]["app"]["deployments"]["Model"]["message"] = UNSCHEDULED
    model, text = report.health_report("recorded", GraphInputs(now_ms=1.0, serve=details), max_bytes=6000)
    [held] = [f for f in model.findings if f.kind == "serve_scaling"]
    assert held.severity >= PROBLEM and model.status == "PROBLEMS_FOUND", text
    assert (
        "wants 8 replicas, held at 3: each replica needs {'CPU': 1.0}, the cluster has {'CPU': 0.0} free"
        in (held.title)
    ), text
    assert "cluster_status" in held.next_steps


def test_diagnose_job_tells_the_scaling_decisions_of_the_apps_the_job_deployed() -> None:
    from ray_mcp.diagnosis import report
    from ray_mcp.diagnosis.graph import GraphInputs

    job_id = "02000000"
    replica = {
        "actor_id": "b" * 32,
        "class_name": "ServeReplica:app:Model",
        "state": "ALIVE",
        "job_id": job_id,
        "name": "SERVE_REPLICA::app#Model#r0",
    }
    logged = [
        {
            "app": "app",
            "deployment": "Model",
            "at": "2026-12-04 14:05:00",
            "prev_replicas": 5,
            "new_replicas": 2,
            "reason": "0.5 requests ongoing on 5 running replica(s)",
            "source": "controller log",
        }
    ]
    ev = GraphInputs(
        now_ms=1.0,
        job={"job_id": job_id, "submission_id": "raysubmit_x", "status": "RUNNING"},
        serve=details_with(None, status="HEALTHY"),
        serve_decisions=logged,
        actors=[replica],
        tasks=[],
        driver_lines=[],
    )
    model, text = report.job_report("raysubmit_x", ev, max_bytes=6000)
    [scaled] = [f for f in model.findings if f.kind == "serve_scaling"]
    assert (
        'deployment "Model" scaled 5 → 2 at 2026-12-04 14:05:00 because 0.5 requests ongoing' in scaled.title
    ), text
    other = GraphInputs(**{**ev.__dict__, "actors": [{**replica, "job_id": "03000000"}]})
    assert not [
        f
        for f in report.job_report("raysubmit_x", other, max_bytes=6000)[0].findings
        if f.kind == "serve_scaling"
    ]  # another job's app: not this job's finding
