"""A real Prometheus scraping the test session's Ray head, for the tests that ask for it (``prometheus``).

Debian's ``prometheus`` (/usr/bin/prometheus; .ci/run installs it) runs on Ray's own generated config (the
session's metrics/prometheus/prometheus.yml and its file service discovery) with a 1 s scrape interval, on a free
loopback port, its TSDB in a temp dir, started by ray-mcp's own LocalPrometheus (the embedded cluster's) and
stopped by pid. The fixture is session-scoped and only the tests that name it start it; it is ready once
Prometheus holds ``ray_*`` series of the head's session.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

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


@contextmanager
def alerting_prometheus(work_dir: Path, rules: list[dict[str, Any]]) -> Iterator[str]:
    """A real Prometheus that scrapes nothing and evaluates ``rules`` (alerting rules) every second: its URL once
    its API answers. Stopped by its pid."""
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
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
