"""get_metrics against a real Prometheus scraping the session head (tests/prometheus.py), its summaries checked
against the same PromQL sent raw; scenarios from drivers of our own (a throughput drop, a Serve deployment that
gets slower, a Prometheus that goes away mid-call); bad input; no Prometheus at all.

Stand-ins (not live): "a Prometheus that echoes a header into its error" (the masking of RAY_PROMETHEUS_HEADERS).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tests.prometheus import SCRAPE_INTERVAL_S, query, running_prometheus
from tests.state_drivers import driver
from tests.support import mcp_client, serve_asgi, text_of, whole_bytes

from ray_mcp.limits import RESPONSE_BUDGET_BYTES
from ray_mcp.local_head import free_ports
from ray_mcp.settings import Settings

SECRET = "prom-token-9c1f0a77e2b54d8e"
# How long Ray takes to show a change in a rate: it reports task and Serve metrics every few seconds, and
# rate() looks back MIN_RATE_WINDOW_S.
SETTLE_S = 240


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


async def ask(client: Client, **args: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool("get_metrics", args)
    assert not result.is_error, text_of(result)
    assert whole_bytes(result) <= RESPONSE_BUDGET_BYTES, whole_bytes(result)
    return dict(result.structured_content or {}), text_of(result)


async def refused(client: Client, **args: Any) -> str:
    result = await client.call_tool("get_metrics", args)
    assert result.is_error, text_of(result)
    return text_of(result)


def check_against_raw(url: str, answer: dict[str, Any]) -> int:
    """Every series shown equals what the same PromQL, sent raw over the same window, gives: first, min, max,
    last, mean and the count of points. Returns how many series were checked."""
    window = answer["window"]
    checked = 0
    for panel in answer["panels"]:
        rows = query(
            url,
            panel["promql"],
            start=epoch(window["start"]),
            end=epoch(window["end"]),
            step=window["step_s"],
        )
        for s in panel["series"]:
            row = next(r for r in rows if all(r["metric"].get(k) == v for k, v in s["labels"].items()))
            values = [float(v) for _t, v in row["values"] if math.isfinite(float(v))]
            assert s["points"] == len(values), (panel["title"], s["name"])
            if not values:
                continue
            expected = (values[0], min(values), max(values), values[-1], sum(values) / len(values))
            got = (s["first"], s["min"], s["max"], s["last"], s["mean"])
            assert got == pytest.approx(expected, rel=1e-9), (panel["title"], s["name"])
            checked += 1
    return checked


def a_past_window(seconds: float) -> dict[str, str]:
    """A window that ended a few scrapes ago: Prometheus holds all of it, so two reads of it agree."""
    until = time.time() - 5 * SCRAPE_INTERVAL_S
    return {"since": f"{until - seconds:.0f}", "until": f"{until:.0f}"}


@pytest.fixture
async def metrics(ray_cluster: Any, prometheus: str) -> Any:
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, prometheus=prometheus)) as client:
        yield client


# -- summaries, checked -------------------------------------------------------------------------------------


ACTIVITY = """
import threading
@ray.remote
class Counter:
    def add(self):
        return 1
counter = Counter.remote()
@ray.remote
def work():
    return 1
def loop():
    while True:
        ray.get([work.remote() for _ in range(5)] + [counter.add.remote()])
        time.sleep(1)
threading.Thread(target=loop, daemon=True).start()
"""
QUESTIONS = (
    "node_cpu",
    "node_memory",
    "node_disk",
    "object_store",
    "tasks",
    "actors",
    "worker_memory",
    "worker_cpu",
)


async def test_named_questions_give_the_summaries_of_the_same_promql_sent_raw(
    metrics: Client, ray_cluster: Any, prometheus: str
) -> None:
    with driver_with_args(ray_cluster.gcs_address, ACTIVITY):
        for question in QUESTIONS:
            answer, text = await ask_until(
                metrics,
                lambda question=question: {"question": question, **a_past_window(120)},
                lambda a: all(p["series"] and p["series"][0]["points"] >= 3 for p in a["panels"][:1]),
            )
            assert answer["source"] == "prometheus" and answer["prometheus"].startswith(prometheus)
            assert text.startswith(question) and answer["verdict"] in text
            for panel in answer["panels"]:
                assert 'SessionName="session_' in panel["promql"]
            assert check_against_raw(prometheus, answer) >= 1, question


async def ask_until(
    client: Client, arguments: Any, done: Any, deadline_s: float = SETTLE_S
) -> tuple[dict[str, Any], str]:
    """Ask (``arguments()`` each time: the window moves) until the answer is no error and ``done(answer)``:
    Ray reports every few seconds, and a fresh Prometheus holds only what it has scraped."""
    with anyio.fail_after(deadline_s):
        while True:
            result = await client.call_tool("get_metrics", arguments())
            if not result.is_error and done(result.structured_content or {}):
                assert whole_bytes(result) <= RESPONSE_BUDGET_BYTES, whole_bytes(result)
                return dict(result.structured_content or {}), text_of(result)
            await anyio.sleep(3)


async def test_a_node_narrows_every_series_to_that_node(metrics: Client, ray_cluster: Any) -> None:
    nodes = httpx.get(f"{ray_cluster.dashboard_url}/api/v0/nodes", timeout=30).json()["data"]["result"][
        "result"
    ]
    ip = nodes[0]["node_ip"]
    answer, _ = await ask(metrics, question="node_memory", node=nodes[0]["node_id"], last="2m")
    for panel in answer["panels"]:
        assert panel["series"] and all(s["name"].startswith(f"{ip}:") for s in panel["series"])
    text = await refused(metrics, question="node_memory", node="10.255.255.254")
    assert "No node" in text and "cluster_status" in text


async def test_thousands_of_series_are_cut_to_the_most_significant_with_a_count(metrics: Client) -> None:
    answer, text = await ask(metrics, promql='{__name__=~"ray_.+"}', last="1m", limit=10)
    panel = answer["panels"][0]
    assert panel["total"] > 500 and len(panel["series"]) <= 10 and answer["total"] == panel["total"]
    assert f"of {panel['total']} series" in text
    assert any("not scoped to this cluster's session" in n for n in answer["notes"])


async def test_a_chart_comes_as_a_png_on_request(metrics: Client) -> None:
    result = await metrics.call_tool("get_metrics", {"question": "node_cpu", "last": "2m", "chart": True})
    assert not result.is_error, text_of(result)
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    import base64

    assert base64.b64decode(images[0].data).startswith(b"\x89PNG")


# -- bad input ----------------------------------------------------------------------------------------------


async def test_bad_promql_unknown_metrics_and_empty_windows_are_errors_with_the_next_call(
    metrics: Client,
) -> None:
    text = await refused(metrics, promql="sum(rate(ray_tasks[1m]")
    assert "cannot parse" in text and "parse error" in text
    text = await refused(metrics, promql="sum(ray_node_cpu_utilisation)")
    assert '"ray_node_cpu_utilisation"' in text and "ray_node_cpu_utilization" in text
    text = await refused(metrics, question="node_cpu", since=f"{time.time() + 3600:.0f}")
    assert "window is empty" in text
    text = await refused(
        metrics, question="node_cpu", since="2001-01-01T00:00:00Z", until="2001-01-01T01:00:00Z"
    )
    assert "no series of this cluster" in text and "since=" in text
    text = await refused(metrics, question="node_cpu", deployment="x")
    assert "cannot be narrowed by deployment" in text


# -- scenarios ----------------------------------------------------------------------------------------------

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
        ray.get(tick.remote())
        time.sleep(2.0)
threading.Thread(target=load, daemon=True).start()
print("JOB", ray.get_runtime_context().get_job_id(), flush=True)
"""


async def test_a_throughput_drop_is_a_step_down_in_tasks_finished_per_minute(
    metrics: Client, ray_cluster: Any, prometheus: str
) -> None:
    fast_s = 120.0
    started = time.time()
    with driver_with_args(ray_cluster.gcs_address, THROUGHPUT, str(fast_s)) as job_id:

        def finished_of(answer: dict[str, Any]) -> dict[str, Any] | None:
            ended = next(p for p in answer["panels"] if p["title"] == "Tasks ended per minute")
            return next((s for s in ended["series"] if s["name"] == "FINISHED"), None)

        def dropped(answer: dict[str, Any]) -> bool:
            finished = finished_of(answer)
            late = time.time() > started + fast_s + 90
            return late and finished is not None and finished["trend"] == "stepped_down"

        window = {"question": "tasks", "job": job_id, "since": f"{started:.0f}"}
        answer, text = await ask_until(
            metrics, lambda: {**window, "until": f"{time.time() - 5:.0f}"}, dropped, fast_s + SETTLE_S
        )
        finished = finished_of(answer)
        assert finished is not None
        change = finished["change"]
        assert change["before"] > 3 * max(change["after"], 1), change
        assert started + fast_s - 30 <= epoch(change["at"]) <= started + fast_s + 90, (change, started)
        assert "stepped down" in text
        assert check_against_raw(prometheus, answer) >= 1


SERVE_SLOWER = """
from ray import serve
@serve.deployment(max_ongoing_requests=100)
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
        delay = 0.005 if time.time() < fast_until else 0.25
        handle.remote(delay).result(timeout_s=30)
        time.sleep(0.05)
threading.Thread(target=load, daemon=True).start()
"""


async def test_a_serve_deployment_that_gets_slower_is_a_step_up_in_its_latency(
    metrics: Client, ray_cluster: Any, prometheus: str
) -> None:
    fast_s, app = 100.0, "prom-slowing"
    started = time.time()
    try:
        with driver_with_args(ray_cluster.gcs_address, SERVE_SLOWER, str(fast_s), str(free_ports(1)[0]), app):

            def p99_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
                return next(p for p in answer["panels"] if p["title"] == "p99 latency")["series"]

            def slower(answer: dict[str, Any]) -> bool:
                p99 = p99_of(answer)
                return bool(p99) and p99[0]["trend"] == "stepped_up" and time.time() > started + fast_s + 60

            window = {"question": "serve", "deployment": "Slowing", "since": f"{started:.0f}"}
            answer, _ = await ask_until(
                metrics, lambda: {**window, "until": f"{time.time() - 5:.0f}"}, slower, fast_s + SETTLE_S
            )
            p99 = p99_of(answer)
            change = p99[0]["change"]
            assert p99[0]["labels"] == {"application": app, "deployment": "Slowing"}
            assert change["after"] > 5 * change["before"] and change["after"] >= 200, change
            assert started + fast_s - 30 <= epoch(change["at"]) <= started + fast_s + 60, (change, started)
            requests = next(p for p in answer["panels"] if p["title"] == "Requests")["series"][0]
            assert requests["last"] > 0
            assert check_against_raw(prometheus, answer) >= 3
    finally:
        # Shut Serve down, not only the app: test_serve's first test needs a session cluster without Serve.
        with driver_with_args(ray_cluster.gcs_address, "from ray import serve\nserve.shutdown()\n"):
            pass


async def test_a_prometheus_that_goes_away_mid_call_leaves_history_unknown_never_healthy(
    ray_cluster: Any, tmp_path: Any
) -> None:
    session = httpx.get(f"{ray_cluster.dashboard_url}/api/version", timeout=30).json()["session_name"]
    session_dir = ray_cluster.temp_dir / "session_latest"
    with running_prometheus(session_dir, tmp_path / "prom", session) as prom, going_away(prom) as proxy:
        async with mcp_client(Settings(address=ray_cluster.dashboard_url, prometheus=proxy)) as client:
            answer, text = await ask(client, question="node_memory", last="2m")
    assert answer["source"] == "node_endpoints" and "window" not in answer
    assert text.startswith("node_memory now (history unknown") and "Prometheus at" in text
    assert any("apt install prometheus" in n for n in answer["notes"])
    assert answer["panels"][0]["series"][0]["trend"] == "instant"


@contextmanager
def going_away(prom: Any) -> Iterator[str]:
    """A proxy before a real Prometheus that stops it for good after forwarding the first query."""
    lock = threading.Lock()

    async def forward(request: Request) -> Response:
        body = await request.body()
        with lock:
            alive = prom.process is not None
            try:
                answer = httpx.request(
                    request.method,
                    f"{prom.url}{request.url.path}",
                    params=request.query_params,
                    content=body,
                    headers={"content-type": request.headers.get("content-type", "")},
                    timeout=30,
                )
            finally:
                if alive:
                    prom.stop()  # gone, mid-call: the next query finds nothing listening
        return Response(answer.content, answer.status_code, media_type="application/json")

    app = Starlette(routes=[Route("/api/v1/{rest:path}", forward, methods=["GET", "POST"])])
    with serve_asgi(app) as url:
        yield url


# -- without a Prometheus -----------------------------------------------------------------------------------


async def test_without_a_prometheus_answers_say_what_is_true_now_and_how_to_get_history(
    ray_cluster: Any, prometheus: str
) -> None:
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, metrics_tools=True)) as client:
        answer, text = await ask(client, question="node_disk")
        assert answer["source"] == "node_endpoints" and answer["panels"][0]["series"][0]["trend"] == "instant"
        assert text.startswith("node_disk now (no history: no Prometheus is known")
        assert any("--prometheus" in n and "apt install prometheus" in n for n in answer["notes"])
        disk = answer["panels"][0]["series"][0]
        raw = query(prometheus, answer["panels"][0]["promql"])
        assert disk["last"] == pytest.approx(float(raw[0]["value"][1]), abs=1.0)  # disk use moves slowly
        text = await refused(client, question="serve")
        assert "need history" in text and "--prometheus" in text
        text = await refused(client, promql="up")
        assert "Raw PromQL needs a Prometheus" in text


# -- helpers ------------------------------------------------------------------------------------------------


@contextmanager
def driver_with_args(gcs: str, body: str, *args: str) -> Iterator[str | None]:
    """tests.state_drivers.driver with argv after its own (sys.argv[3:]); yields the job id the body printed
    on a line "JOB <id>", if it did."""
    with driver(gcs, body, "prom-tests", timeout_s=300, args=args) as printed:
        marker = "JOB "
        yield next((ln[len(marker) :].strip() for ln in printed.splitlines() if ln.startswith(marker)), None)


# -- a stand-in: masking (not live) -------------------------------------------------------------------------


async def test_configured_prometheus_headers_are_sent_and_masked_in_every_answer() -> None:
    """RAY_PROMETHEUS_HEADERS reaches Prometheus; a Prometheus (or proxy) that echoes it gets it masked."""
    seen: list[str] = []

    async def echo(request: Request) -> Response:
        seen.append(request.headers.get("authorization", ""))
        said = f"parse error near {request.headers['authorization']}"
        return JSONResponse({"status": "error", "errorType": "bad_data", "error": said}, status_code=400)

    app = Starlette(routes=[Route("/api/v1/{rest:path}", echo, methods=["GET", "POST"])])
    with serve_asgi(app) as url:
        headers = json.dumps({"Authorization": f"Bearer {SECRET}"})
        settings = Settings(address="http://127.0.0.1:9", prometheus=url, prometheus_headers=headers)
        async with mcp_client(settings) as client:
            result = await client.call_tool("get_metrics", {"promql": "up"})
    assert seen == [f"Bearer {SECRET}"]
    assert result.is_error and "cannot parse" in text_of(result)
    assert SECRET not in text_of(result), text_of(result)


@pytest.mark.live
def test_without_matplotlib_a_chart_request_says_how_to_get_one() -> None:
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from ray_mcp.shaping import charts\n"
        "try:\n    charts.png([], {}, 't')\nexcept charts.ChartUnavailable as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "pip install 'ray-mcp[charts]'" in out.stdout, out
