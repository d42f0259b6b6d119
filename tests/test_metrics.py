"""get_metrics against a real Prometheus scraping the session head (tests/prometheus.py), its summaries checked
against the same PromQL sent raw; a Prometheus that goes away mid-call; bad input; no Prometheus at all. The
scenarios that take minutes (a throughput drop, a Serve deployment that gets slower) are read by get_metrics and
by the diagnosis from one driver each, in tests/test_diagnosis_trends.py.

Stand-ins (not live): "a Prometheus that echoes a header into its error" (the masking of RAY_PROMETHEUS_HEADERS).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from tests.prometheus import (
    SCRAPE_INTERVAL_S,
    ask_until,
    check_against_raw,
    going_away,
    query,
    running_prometheus,
)
from tests.state_drivers import driver_with_args
from tests.support import mcp_client, serve_asgi, text_of, whole_bytes

from ray_mcp.limits import METRIC_SERIES, RESPONSE_BUDGET_BYTES
from ray_mcp.settings import Settings

SECRET = "prom-token-9c1f0a77e2b54d8e"


async def ask(client: Client, **args: Any) -> tuple[dict[str, Any], str]:
    result = await client.call_tool("get_metrics", args)
    assert not result.is_error, text_of(result)
    assert whole_bytes(result) <= RESPONSE_BUDGET_BYTES, whole_bytes(result)
    return dict(result.structured_content or {}), text_of(result)


async def refused(client: Client, **args: Any) -> str:
    result = await client.call_tool("get_metrics", args)
    assert result.is_error, text_of(result)
    return text_of(result)


def a_past_window(seconds: float) -> dict[str, str]:
    """A window that ended a few scrapes ago: Prometheus holds all of it, so two reads of it agree."""
    until = time.time() - 5 * SCRAPE_INTERVAL_S
    return {"since": f"{until - seconds:.0f}", "until": f"{until:.0f}"}


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
    metrics_client: Client, ray_cluster: Any, prometheus: str
) -> None:
    with driver_with_args(ray_cluster.gcs_address, ACTIVITY):
        for question in QUESTIONS:
            answer, text = await ask_until(
                metrics_client,
                lambda question=question: {"question": question, **a_past_window(120)},
                lambda a: all(p["series"] and p["series"][0]["points"] >= 3 for p in a["panels"][:1]),
            )
            assert answer["source"] == "prometheus" and answer["prometheus"].startswith(prometheus)
            assert text.startswith(question) and answer["verdict"] in text
            for panel in answer["panels"]:
                assert 'SessionName="session_' in panel["promql"]
            assert check_against_raw(prometheus, answer) >= 1, question


async def test_a_node_narrows_every_series_to_that_node(metrics_client: Client, ray_cluster: Any) -> None:
    nodes = httpx.get(f"{ray_cluster.dashboard_url}/api/v0/nodes", timeout=30).json()["data"]["result"][
        "result"
    ]
    ip = nodes[0]["node_ip"]
    answer, _ = await ask(metrics_client, question="node_memory", node=nodes[0]["node_id"], last="2m")
    for panel in answer["panels"]:
        assert panel["series"] and all(s["name"].startswith(f"{ip}:") for s in panel["series"])
    text = await refused(metrics_client, question="node_memory", node="10.255.255.254")
    assert "No node" in text and "cluster_status" in text


async def test_thousands_of_series_are_cut_to_the_most_significant_with_a_count(
    metrics_client: Client,
) -> None:
    answer, text = await ask(metrics_client, promql='{__name__=~"ray_.+"}', last="1m", limit=10)
    panel = answer["panels"][0]
    assert panel["total"] > 500 and len(panel["series"]) <= 10 and answer["total"] == panel["total"]
    assert f"of {panel['total']} series" in text
    assert any("not scoped to this cluster's session" in n for n in answer["notes"])


async def test_an_answer_over_the_budget_is_fitted_at_the_edge_keeping_the_most_significant_series(
    metrics_client: Client,
) -> None:
    asked = METRIC_SERIES.high  # far more series than fit: the edge leaves out the least significant
    answer, text = await ask(metrics_client, promql='{__name__=~"ray_.+"}', last="1m", limit=asked)
    (panel,) = answer["panels"]
    assert panel["total"] > asked and answer["shown"] == len(panel["series"]) < asked, answer["shown"]
    (note,) = [n for n in answer["notes"] if "left out" in n]
    assert (
        note.startswith(f"{asked - answer['shown']} more of these {asked} series left out") and note in text
    )
    assert text.count("left out") == 1


async def test_a_chart_comes_as_a_png_on_request(metrics_client: Client) -> None:
    result = await metrics_client.call_tool(
        "get_metrics", {"question": "node_cpu", "last": "2m", "chart": True}
    )
    assert not result.is_error, text_of(result)
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 1 and images[0].mime_type == "image/png"
    import base64

    assert base64.b64decode(images[0].data).startswith(b"\x89PNG")


# -- bad input ----------------------------------------------------------------------------------------------


async def test_bad_promql_unknown_metrics_and_empty_windows_are_errors_with_the_next_call(
    metrics_client: Client,
) -> None:
    text = await refused(metrics_client, promql="sum(rate(ray_tasks[1m]")
    assert "cannot parse" in text and "parse error" in text
    text = await refused(metrics_client, promql="sum(ray_node_cpu_utilisation)")
    assert '"ray_node_cpu_utilisation"' in text and "ray_node_cpu_utilization" in text
    text = await refused(metrics_client, question="node_cpu", since=f"{time.time() + 3600:.0f}")
    assert "window is empty" in text
    text = await refused(
        metrics_client, question="node_cpu", since="2001-01-01T00:00:00Z", until="2001-01-01T01:00:00Z"
    )
    assert "no series of this cluster" in text and "since=" in text
    text = await refused(metrics_client, question="node_cpu", deployment="x")
    assert "cannot be narrowed by deployment" in text


# -- a Prometheus that goes away ----------------------------------------------------------------------


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
