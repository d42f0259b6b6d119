"""A real Prometheus scraping the test session's Ray head, for the tests that ask for it (``prometheus``).

Debian's ``prometheus`` (/usr/bin/prometheus; .ci/run installs it) runs on Ray's own generated config (the
session's metrics/prometheus/prometheus.yml and its file service discovery) with a 1 s scrape interval, on a free
loopback port, its TSDB in a temp dir, started by ray-mcp's own LocalPrometheus (the embedded cluster's) and
stopped by pid. The fixture is session-scoped and only the tests that name it start it; it is ready once
Prometheus holds ``ray_*`` series of the head's session.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.support import text_of, whole_bytes

from ray_mcp.limits import RESPONSE_BUDGET_BYTES
from ray_mcp.local_prometheus import LocalPrometheus, prometheus_binary

SCRAPE_INTERVAL_S = 1.0
READY_TIMEOUT_S = 120.0


@contextmanager
def running_prometheus(session_dir: Path, work_dir: Path, session_name: str) -> Iterator[LocalPrometheus]:
    """Prometheus on the session's config, returned once it holds that session's ``ray_*`` series."""
    prom = LocalPrometheus(
        session_dir, work_dir, scrape_interval_s=SCRAPE_INTERVAL_S, binary=prometheus_binary()
    )
    try:
        # Started from this thread (the session's, or the test's): the process dies with the thread that
        # started it, and an async test cannot nest an event loop for LocalPrometheus.start.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not prom.ray_config.exists():
            assert time.monotonic() < deadline, f"Ray wrote no {prom.ray_config}"
            time.sleep(0.2)
        prom.launch()
        wait_for_series(prom.url, f'count({{__name__=~"ray_.+",SessionName="{session_name}"}})')
        yield prom
    finally:
        prom.stop()


def query(url: str, promql: str, **params: Any) -> list[dict[str, Any]]:
    """The raw answer of Prometheus's HTTP API to one query (instant, or range with start/end/step): what the
    tests compare ray-mcp's summaries with."""
    endpoint = "query_range" if "step" in params else "query"
    response = httpx.post(f"{url}/api/v1/{endpoint}", data={"query": promql, **params}, timeout=30)
    response.raise_for_status()
    body = response.json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def wait_for_series(url: str, promql: str, deadline_s: float = READY_TIMEOUT_S) -> list[dict[str, Any]]:
    """Poll until the query has a non-zero answer (Prometheus scrapes every second; Ray reports every few)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            result = query(url, promql)
            if result and any(float(r["value"][1]) > 0 for r in result):
                return result
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(
                f"Prometheus at {url} has no answer to {promql} after {deadline_s:g} s; its targets: {targets(url)}"
            )
        time.sleep(0.5)


def targets(url: str) -> list[tuple[str, str, str]]:
    """What Prometheus scrapes and how it went (address, health, last error): why a series would be missing."""
    try:
        active = httpx.get(f"{url}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return [("?", "unknown", repr(exc))]
    return [(t["scrapeUrl"], t["health"], t.get("lastError", "")) for t in active]


class AlertingPrometheus:
    """A real Prometheus that scrapes nothing and evaluates alerting rules every second; ``set_rules`` swaps
    them (Prometheus's own ``/-/reload``), so a test fires and clears an alert when it is ready to see it."""

    def __init__(self, url: str, rules_file: Path) -> None:
        self.url = url
        self.rules_file = rules_file

    def set_rules(self, rules: list[dict[str, Any]]) -> None:
        """Write ``rules`` (alerting rules) and have Prometheus load them; it answers once they are loaded."""
        import yaml

        self.rules_file.write_text(yaml.safe_dump({"groups": [{"name": "ray-mcp-test", "rules": rules}]}))
        response = httpx.post(f"{self.url}/-/reload", timeout=30)
        assert response.status_code == 200, response.text


@contextmanager
def alerting_prometheus(work_dir: Path, rules: list[dict[str, Any]]) -> Iterator[AlertingPrometheus]:
    """A real Prometheus that scrapes nothing and evaluates ``rules`` (alerting rules) every second, once its
    API answers. Stopped by its pid."""
    import subprocess

    import yaml

    from ray_mcp.local_head import free_ports

    binary = prometheus_binary()
    assert binary is not None, "no prometheus binary"
    work_dir.mkdir(parents=True, exist_ok=True)
    (work_dir / "rules.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "ray-mcp-test", "rules": rules}]})
    )
    config = {
        "global": {"evaluation_interval": f"{SCRAPE_INTERVAL_S:g}s"},
        "rule_files": [str(work_dir / "rules.yml")],
    }
    (work_dir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_ports(1)[0]
    with open(work_dir / "prometheus.log", "ab") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",  # POST /-/reload: set_rules
                "--log.level=warn",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=work_dir,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            assert process.poll() is None, (work_dir / "prometheus.log").read_text()[-500:]
            try:
                if httpx.get(f"{url}/-/ready", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "prometheus did not answer"
            time.sleep(0.2)
        yield AlertingPrometheus(url, work_dir / "rules.yml")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextmanager
def going_away(prom: LocalPrometheus) -> Iterator[str]:
    """A proxy before a real Prometheus that stops it for good after forwarding the first query."""
    import threading

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
    from tests.support import serve_asgi

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


# How long Ray takes to show a change in a rate: it reports task and Serve metrics every few seconds, and
# rate() looks back MIN_RATE_WINDOW_S.
SETTLE_S = 240


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


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
