"""Trends over time (issue 37 step 5), on real parts: the session's Ray head, the real Prometheus scraping it
(tests/prometheus.py) and drivers of our own. A worker that leaks memory steadily (diagnose_job names the leak
with its rate and the time left before the memory monitor), a job that holds a CPU idle while it fills the
object store, a throughput drop, a Serve deployment that gets slower, a Prometheus that goes away mid-call and
one that stops answering (trends over time unknown, in bounded time, never healthy).

The scenarios that take minutes (the held CPU and filling store, the throughput drop and the slower deployment)
each run one driver for the module (module-scoped fixtures): get_metrics' step and the diagnosis' finding are
both read from it, so the second check finds the change already there instead of waiting minutes for its own
copy. Every driver starts with the module's first test (the leak), so the four scenarios' phases run side by
side rather than one after another, and the two quick tests of a Prometheus that goes away run before the
longer scenarios' checks, while they wait: the module takes about as long as its longest scenario (the
throughput drop), not their sum. (The held CPU was a module of its own, and cost a full minute after this one.)
The findings are each job's own, or named by what they are about, so the scenarios do not hide each other.

Each diagnosis check is also run with its rule taken out of the registry, over the same evidence read again:
the finding must then be missing (so the check cannot pass without the rule).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.prometheus import SETTLE_S, ask_until, check_against_raw, epoch, going_away, running_prometheus
from tests.rule_checks import without
from tests.state_drivers import driver_with_args
from tests.support import mcp_client, text_of, whole_bytes

from ray_mcp.answers import RayAPI
from ray_mcp.diagnosis import evidence, job_evidence, report
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.limits import DIAGNOSIS_BYTES, DIAGNOSIS_WHOLE_SHARE, TRENDS_TIMEOUT_S
from ray_mcp.settings import Settings
from ray_mcp.sources.prometheus import Configured
from ray_mcp.sources.scope import read_scope

pytestmark = pytest.mark.live
# Started with the leak test, the module's first (see the module's docstring); each check still waits for its
# own condition.
SCENARIOS = pytest.mark.usefixtures("holds_and_fills", "throughput_drop", "serve_slowing")

LEAK = """
import threading
@ray.remote
class Leaker:
    def __init__(self):
        self.kept = []
    def step(self):
        self.kept.append(bytearray(b"x" * (1 << 20)))  # 1 MiB, written: counted in the worker's USS
        return len(self.kept)
leaker = Leaker.remote()
def load():
    while True:  # the job makes progress (its calls finish) while its worker's memory grows
        ray.get(leaker.step.remote())
        time.sleep(0.5)
threading.Thread(target=load, daemon=True).start()
print("JOB", ray.get_runtime_context().get_job_id(), flush=True)
"""

THROUGHPUT = """
import threading
@ray.remote
def tick():
    return 1
def load():
    fast_until = time.time() + float(sys.argv[3])
    while time.time() < fast_until:
        ray.get([tick.remote() for _ in range(20)])
        time.sleep(0.1)
    while True:
        time.sleep(20.0)
        ray.get(tick.remote())
threading.Thread(target=load, daemon=True).start()
print("JOB", ray.get_runtime_context().get_job_id(), flush=True)
"""


SERVE_SLOWER = """
from ray import serve
@serve.deployment(max_ongoing_requests=100, ray_actor_options={"num_cpus": 0})  # the ticks keep a CPU
class Slowing:
    async def __call__(self, delay_s: float) -> str:
        import asyncio
        await asyncio.sleep(delay_s)
        return "ok"
serve.start(http_options={"host": "127.0.0.1", "port": int(sys.argv[4])})
handle = serve.run(Slowing.bind(), name=sys.argv[5], route_prefix=None)
import threading
def load():
    fast_until = time.time() + float(sys.argv[3])
    while True:
        delay = 0.005 if time.time() < fast_until else 0.5
        handle.remote(delay).result(timeout_s=30)
        time.sleep(0.05)
threading.Thread(target=load, daemon=True).start()
"""


HOLDS_AND_FILLS = """
import threading
import numpy as np
@ray.remote(num_cpus=1)
class Holder:
    def ready(self):
        return 1
holder = Holder.remote()
ray.get(holder.ready.remote())  # placed: it holds its CPU from here on, and never works
kept = []
def fill():
    while True:  # 16 MiB a second into the store, every object still referenced
        kept.append(ray.put(np.ones(8 << 20, dtype=np.uint8)))
        time.sleep(0.5)
threading.Thread(target=fill, daemon=True).start()
print("JOB", ray.get_runtime_context().get_job_id(), flush=True)
"""


@dataclass(frozen=True)
class Scenario:
    """A driver of the module's: when it started (epoch seconds, as Prometheus stamps its points), how long its
    fast phase lasts, and what it runs (its job, or its Serve application)."""

    started: float
    fast_s: float
    job: str = ""
    app: str = ""


@pytest.fixture(scope="module")
def holds_and_fills(ray_cluster: Any, prometheus: str) -> Iterator[Scenario]:
    """An actor that holds a CPU and does nothing, while its driver fills the object store steadily."""
    started = time.time()
    with driver_with_args(ray_cluster.gcs_address, HOLDS_AND_FILLS) as job_id:
        assert job_id
        yield Scenario(started, 0.0, job=job_id)


@pytest.fixture(scope="module")
def throughput_drop(ray_cluster: Any, prometheus: str) -> Iterator[Scenario]:
    """45 s of 20-task rounds, then one task every 20 s: a drop both get_metrics and the diagnosis see. What
    the wait is made of is the time after the drop (rate() over MIN_RATE_WINDOW_S ramps down, and the step's
    "after" must outweigh the ramp); a longer fast phase only adds to it."""
    started, fast_s = time.time(), 45.0
    with driver_with_args(ray_cluster.gcs_address, THROUGHPUT, str(fast_s)) as job_id:
        assert job_id
        yield Scenario(started, fast_s, job=job_id)


@pytest.fixture(scope="module")
def serve_slowing(ray_cluster: Any, prometheus: str) -> Iterator[Scenario]:
    """A Serve deployment answering in 5 ms for 60 s, then in 500 ms: a step that stands out of a loaded
    machine's noise (a busy box put the fast p99 at 65 ms; 250 ms after it was less than 5x). 60 s holds
    four of cluster_health's 15 s steps, and about a thousand requests per p99 window."""
    from ray_mcp.local_head import free_ports

    started, fast_s, app = time.time(), 60.0, "trend-slowing"
    try:
        with driver_with_args(ray_cluster.gcs_address, SERVE_SLOWER, str(fast_s), str(free_ports(1)[0]), app):
            yield Scenario(started, fast_s, app=app)
    finally:
        # Shut Serve down, not only the app: test_serve's first test needs a session cluster without Serve.
        with driver_with_args(ray_cluster.gcs_address, "from ray import serve\nserve.shutdown()\n"):
            pass


async def diagnose_until(
    client: Client, job: str, kind: str, deadline_s: float, about: str = ""
) -> tuple[dict[str, Any], str]:
    """diagnose_job until a finding of ``kind`` whose title names ``about`` shows (Ray reports every few
    seconds; a trend needs a minute)."""
    with anyio.fail_after(deadline_s):
        while True:
            result = await client.call_tool("diagnose_job", {"job": job})
            assert not result.is_error, text_of(result)
            answer = dict(result.structured_content or {})
            if any(f["kind"] == kind and about in f["title"] for f in answer["findings"]):
                assert whole_bytes(result) <= DIAGNOSIS_BYTES.default * DIAGNOSIS_WHOLE_SHARE, whole_bytes(
                    result
                )
                return answer, text_of(result)
            await anyio.sleep(5)


async def evidence_of(ray_cluster: Any, prometheus: str, job: str) -> GraphInputs:
    """The evidence diagnose_job reads, read again (to judge it with a rule taken out)."""
    api = RayAPI(ray_cluster.dashboard_url, timeout_s=10, prometheus=Configured(prometheus, "the test's"))
    try:
        with read_scope():
            return await job_evidence.gather_job(api, job)
    finally:
        await api.aclose()


async def cluster_evidence(ray_cluster: Any, prometheus: str) -> GraphInputs:
    api = RayAPI(ray_cluster.dashboard_url, timeout_s=10, prometheus=Configured(prometheus, "the test's"))
    try:
        with read_scope():
            return await evidence.gather_cluster(api)
    finally:
        await api.aclose()


def kinds(ev: GraphInputs) -> set[str]:
    model, _ = report.job_report("recorded", ev, max_bytes=DIAGNOSIS_BYTES.default)
    return {f.kind for f in model.findings}


@SCENARIOS
async def test_a_worker_that_leaks_memory_steadily_is_named_with_its_rate_and_the_time_left(
    metrics_client: Client, ray_cluster: Any, prometheus: str
) -> None:
    with driver_with_args(ray_cluster.gcs_address, LEAK) as job_id:
        assert job_id
        # The worker's leak: the node's memory can grow too on a shared machine (other processes start), and
        # is then a leak finding of its own, ranked by its rate.
        worker = '"ray::Leaker'
        answer, text = await diagnose_until(metrics_client, job_id, "memory_leak", 360, about=worker)
        leak = next(f for f in answer["findings"] if f["kind"] == "memory_leak" and worker in f["title"])
        title = leak["title"]
        print(answer["verdict"], title, sep="\n")  # the figures, for the log (-rP)
        assert '"ray::Leaker' in title and "grows steadily" in title, title
        # the job progresses (its calls finish): the leak is what is wrong, and the verdict says it
        assert answer["verdict"].startswith("RUNNING") and "not healthy" in answer["verdict"], text
        assert "grows steadily" in answer["verdict"] and answer["findings"][0]["kind"] == "memory_leak", text
        # 1 MiB every 0.5 s: 120 MiB/min, read through Ray's reporting and Prometheus's slope
        rate = float(title.split("grows steadily: ")[1].split(" MiB/min")[0])
        assert 40 <= rate <= 200, title
        assert "the memory monitor's threshold (95%, Ray's default)" in title, title
        assert "in about" in title or "past" in title, title
        assert any("get_metrics question=worker_memory" in s for s in leak["next_steps"]), leak
        ev = await evidence_of(ray_cluster, prometheus, job_id)
        assert "memory_leak" in kinds(ev), ev.trends
        with without("trends.job_trends"):
            assert "memory_leak" not in kinds(ev)


async def test_a_cpu_held_idle_and_a_store_filling_are_named_with_their_figures(
    metrics_client: Client, ray_cluster: Any, prometheus: str, holds_and_fills: Scenario
) -> None:
    """Each from Prometheus's history of Ray's own metrics (test_trend_rules.py checks the same rules over
    written records; this checks the PromQL behind them against what Ray exports)."""
    job_id = holds_and_fills.job
    answer, text = await diagnose_until(metrics_client, job_id, "idle_resources", 300)
    idle = next(f for f in answer["findings"] if f["kind"] == "idle_resources")
    print(answer["verdict"], idle["title"], sep="\n")  # the figures, for the log (-rP)
    assert "the job holds 1 CPU(s) but its workers used" in idle["title"], idle["title"]
    used = float(idle["title"].split("its workers used ")[1].split("%")[0])
    assert used < 10, idle["title"]  # an actor that sleeps: a few percent of one core at most
    answer, text = await diagnose_until(metrics_client, job_id, "store_filling", 300)
    filling = next(f for f in answer["findings"] if f["kind"] == "store_filling")
    print(filling["title"])
    assert answer["verdict"].startswith("RUNNING"), text
    ev = await evidence_of(ray_cluster, prometheus, job_id)
    assert {"idle_resources", "store_filling"} <= kinds(ev), ev.trends
    with without("trends.job_trends"):
        assert not {"idle_resources", "store_filling"} & kinds(ev)


async def test_a_prometheus_that_goes_away_mid_call_leaves_trends_unknown_never_healthy(
    ray_cluster: Any, tmp_path: Any
) -> None:
    import httpx

    session = httpx.get(f"{ray_cluster.dashboard_url}/api/version", timeout=30).json()["session_name"]
    session_dir = ray_cluster.temp_dir / "session_latest"
    with running_prometheus(session_dir, tmp_path / "prom", session) as prom, going_away(prom) as proxy:
        async with mcp_client(Settings(address=ray_cluster.dashboard_url, prometheus=proxy)) as client:
            result = await client.call_tool("cluster_health", {})
    assert not result.is_error, text_of(result)
    health = dict(result.structured_content or {})
    assert health["status"] != "HEALTHY" and "trends over time" in health["unchecked"], text_of(result)
    assert any(n.startswith("Could not check trends over time") for n in health["notes"]), health["notes"]


async def test_a_prometheus_that_stops_answering_costs_the_diagnosis_at_most_its_trend_timeout(
    ray_cluster: Any, tmp_path: Any
) -> None:
    """A real Prometheus, stopped (SIGSTOP): it accepts connections and never answers. cluster_health says the
    trends are unknown, and takes no longer than without a Prometheus plus TRENDS_TIMEOUT_S. The call without
    one is timed side by side, just before and just after, so that a load that comes or goes in between is in
    the comparison too."""
    import httpx

    session = httpx.get(f"{ray_cluster.dashboard_url}/api/version", timeout=30).json()["session_name"]
    session_dir = ray_cluster.temp_dir / "session_latest"
    async with mcp_client(Settings(address=ray_cluster.dashboard_url)) as plain:

        async def without() -> float:
            began = time.monotonic()
            result = await plain.call_tool("cluster_health", {})
            took = time.monotonic() - began
            unchecked = (result.structured_content or {})["unchecked"]
            assert not result.is_error and "trends over time" not in unchecked, text_of(result)
            return took

        before = await without()
        with running_prometheus(session_dir, tmp_path / "prom", session) as prom:
            assert prom.process is not None
            os.kill(prom.process.pid, signal.SIGSTOP)
            try:
                async with mcp_client(
                    Settings(address=ray_cluster.dashboard_url, prometheus=prom.url)
                ) as client:
                    began = time.monotonic()
                    result = await client.call_tool("cluster_health", {})
                    took = time.monotonic() - began
            finally:
                os.kill(prom.process.pid, signal.SIGCONT)
        without_prometheus = max(before, await without())
    health = dict(result.structured_content or {})
    assert "trends over time" in health["unchecked"], text_of(result)
    assert any(f"within {TRENDS_TIMEOUT_S:g} s" in n for n in health["notes"]), health["notes"]
    print(f"cluster_health: {without_prometheus:.2f} s without a Prometheus, {took:.2f} s with a stopped one")
    assert took <= without_prometheus + TRENDS_TIMEOUT_S + 3, (took, without_prometheus)


async def test_a_throughput_drop_is_named_with_the_rates_before_and_after(
    metrics_client: Client, ray_cluster: Any, prometheus: str, throughput_drop: Scenario
) -> None:
    job_id = throughput_drop.job
    answer, text = await diagnose_until(
        metrics_client, job_id, "throughput_drop", throughput_drop.fast_s + 300
    )
    drop = next(f for f in answer["findings"] if f["kind"] == "throughput_drop")
    title = drop["title"]
    print(answer["verdict"], title, sep="\n")
    assert "tasks finished per minute collapsed at" in title, text
    before = float(title.split(": ")[1].split("/min before")[0].replace(",", ""))
    after = float(title.split("/min before, ")[1].split("/min after")[0].replace(",", ""))
    assert before > 60 and after < before / 4, title
    ev = await evidence_of(ray_cluster, prometheus, job_id)
    assert "throughput_drop" in kinds(ev), ev.trends
    with without("trends.job_trends"):
        assert "throughput_drop" not in kinds(ev)


async def test_a_throughput_drop_is_a_step_down_in_tasks_finished_per_minute(
    metrics_client: Client, prometheus: str, throughput_drop: Scenario
) -> None:
    started, fast_s = throughput_drop.started, throughput_drop.fast_s

    def finished_of(answer: dict[str, Any]) -> dict[str, Any] | None:
        ended = next(p for p in answer["panels"] if p["title"] == "Tasks ended per minute")
        return next((s for s in ended["series"] if s["name"] == "FINISHED"), None)

    def dropped(answer: dict[str, Any]) -> bool:
        finished = finished_of(answer)
        late = time.time() > started + fast_s + 90
        return late and finished is not None and finished["trend"] == "stepped_down"

    window = {"question": "tasks", "job": throughput_drop.job, "since": f"{started:.0f}"}
    answer, text = await ask_until(
        metrics_client, lambda: {**window, "until": f"{time.time() - 5:.0f}"}, dropped, fast_s + SETTLE_S
    )
    finished = finished_of(answer)
    assert finished is not None
    change = finished["change"]
    assert change["before"] > 3 * max(change["after"], 1), change
    assert started + fast_s - 30 <= epoch(change["at"]) <= started + fast_s + 90, (change, started)
    assert "stepped down" in text
    assert check_against_raw(prometheus, answer) >= 1


async def test_a_serve_deployment_that_gets_slower_is_named_with_when_and_the_deploy_nearest(
    metrics_client: Client, ray_cluster: Any, prometheus: str, serve_slowing: Scenario
) -> None:
    started, fast_s, app = serve_slowing.started, serve_slowing.fast_s, serve_slowing.app
    with anyio.fail_after(fast_s + 300):
        while True:
            result = await metrics_client.call_tool("cluster_health", {})
            assert not result.is_error, text_of(result)
            health = dict(result.structured_content or {})
            rose = [
                f for f in health["findings"] if f["kind"] == "serve_regression" and f'"{app}"' in f["title"]
            ]
            if rose and time.time() > started + fast_s:
                break
            await anyio.sleep(5)
    ev = await cluster_evidence(ray_cluster, prometheus)
    found = report.health_report("recorded", ev, max_bytes=DIAGNOSIS_BYTES.default)[0].findings
    assert any(f.kind == "serve_regression" for f in found), ev.trends
    with without("trends.cluster_trends"):
        found = report.health_report("recorded", ev, max_bytes=DIAGNOSIS_BYTES.default)[0].findings
        assert all(f.kind != "serve_regression" for f in found)
    title = rose[0]["title"]
    print(health["verdict"], title, sep="\n")
    assert "p99 latency rose at" in title and f'nearest: application "{app}" deployed at' in title, title
    before = float(title.split(": ")[1].split(" ms before")[0])
    after = float(title.split("ms before, ")[1].split(" ms after")[0])
    assert after >= 200 and after >= 2 * before, title
    assert health["status"] == "PROBLEMS_FOUND", text_of(result)


async def test_a_serve_deployment_that_gets_slower_is_a_step_up_in_its_latency(
    metrics_client: Client, prometheus: str, serve_slowing: Scenario
) -> None:
    started, fast_s, app = serve_slowing.started, serve_slowing.fast_s, serve_slowing.app

    def p99_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
        return next(p for p in answer["panels"] if p["title"] == "p99 latency")["series"]

    def slower(answer: dict[str, Any]) -> bool:
        p99 = p99_of(answer)
        return bool(p99) and p99[0]["trend"] == "stepped_up" and time.time() > started + fast_s + 60

    window = {"question": "serve", "deployment": "Slowing", "since": f"{started:.0f}"}
    answer, _ = await ask_until(
        metrics_client, lambda: {**window, "until": f"{time.time() - 5:.0f}"}, slower, fast_s + SETTLE_S
    )
    p99 = p99_of(answer)
    change = p99[0]["change"]
    assert p99[0]["labels"] == {"application": app, "deployment": "Slowing"}
    assert change["after"] > 5 * change["before"] and change["after"] >= 200, change
    assert started + fast_s - 30 <= epoch(change["at"]) <= started + fast_s + 60, (change, started)
    requests = next(p for p in answer["panels"] if p["title"] == "Requests")["series"][0]
    assert requests["last"] > 0
    assert check_against_raw(prometheus, answer) >= 3
