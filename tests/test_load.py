"""A small version of bench/load.py: concurrent calls from several HTTP sessions, no failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.load import run_load


async def test_concurrent_calls_from_four_http_sessions_all_succeed(ray_cluster: Any, tmp_path: Path) -> None:
    report = await run_load(
        ray_cluster.dashboard_url, calls=40, sessions=4, rounds=1, log=tmp_path / "server.log"
    )
    (only,) = report["rounds"]
    assert only["failures"] == 0, only["failure_examples"]
    assert only["rss_mb"]["peak"] < 1024
