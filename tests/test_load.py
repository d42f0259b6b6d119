"""A small version of bench/load.py: concurrent calls from several HTTP sessions, no failures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.load import run_load
from tests.conftest import local_head

from ray_mcp.local_head import LocalHead


@pytest.fixture(scope="module")
def fresh_head() -> Iterator[LocalHead]:
    """A head of this module's own: what is measured is ray-mcp under concurrent sessions, and late in a full
    run the session head holds every earlier test's tasks, which made the State API's task list alone take
    over 10 s (8 list_tasks timeouts of 40 calls there; none on a fresh head)."""
    with local_head(num_cpus=1) as head:
        yield head


@pytest.mark.live
async def test_concurrent_calls_from_four_http_sessions_all_succeed(
    fresh_head: LocalHead, tmp_path: Path
) -> None:
    report = await run_load(
        fresh_head.dashboard_url, calls=40, sessions=4, rounds=1, log=tmp_path / "server.log"
    )
    (only,) = report["rounds"]
    assert only["failures"] == 0, only["failure_examples"]
    assert only["rss_mb"]["peak"] < 1024
