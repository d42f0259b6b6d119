"""The per-call read scope (sources/scope.py): within one call each distinct read is made once and shared, in
flight and after; a failure is the same failure for every asker; a write or a poll's round reads afresh; outside
a scope every read is made. Unit tests over the scope itself and over the dashboard's HTTP client on an
httpx.MockTransport that counts requests (the live request counts: tests/test_request_counts.py)."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import pytest

from ray_mcp.errors import RayMCPError
from ray_mcp.sources import scope
from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.scope import read_scope


async def test_concurrent_and_later_askers_in_one_scope_share_one_read() -> None:
    reads = 0
    release = asyncio.Event()

    async def read() -> int:
        nonlocal reads
        reads += 1
        await release.wait()
        return reads

    with read_scope():
        tasks = [asyncio.create_task(scope.shared("k", read)) for _ in range(5)]
        await asyncio.sleep(0)
        release.set()
        assert await asyncio.gather(*tasks) == [1] * 5
        assert await scope.shared("k", read) == 1  # later in the same call: the same answer, no new read
    with read_scope():
        assert await scope.shared("k", read) == 2  # the next call reads again: nothing is kept past a call
    assert reads == 2


async def test_outside_a_scope_every_read_is_made() -> None:
    reads = 0

    async def read() -> int:
        nonlocal reads
        reads += 1
        return reads

    assert [await scope.shared("k", read) for _ in range(3)] == [1, 2, 3]


async def test_a_failed_read_is_the_same_failure_for_the_whole_call() -> None:
    attempts = 0

    async def read() -> int:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        raise RayMCPError(f"the GCS did not answer (attempt {attempts})")

    with read_scope():
        results = await asyncio.gather(
            scope.shared("k", read), scope.shared("k", read), return_exceptions=True
        )
        with pytest.raises(RayMCPError) as later:
            await scope.shared("k", read)
    assert attempts == 1
    assert results[0] is results[1] is later.value  # one failure, told the same to every asker


async def test_a_cancelled_first_asker_does_not_cancel_the_others() -> None:
    started = asyncio.Event()

    async def read() -> str:
        started.set()
        await asyncio.sleep(0.05)
        return "rows"

    with read_scope():
        first = asyncio.create_task(scope.shared("k", read))
        await started.wait()
        second = asyncio.create_task(scope.shared("k", read))
        await asyncio.sleep(0)
        first.cancel()
        assert await second == "rows"  # it made its own read when the one it waited for was cancelled
        with pytest.raises(asyncio.CancelledError):
            await first


async def test_fresh_makes_the_next_asker_read_again() -> None:
    reads = 0

    async def read() -> int:
        nonlocal reads
        reads += 1
        return reads

    with read_scope():
        assert await scope.shared("k", read) == 1
        scope.fresh()
        assert await scope.shared("k", read) == 2
        assert await scope.shared("k", read) == 2


def counting_dashboard() -> tuple[Dashboard, Counter[str]]:
    seen: Counter[str] = Counter()

    def answer(request: httpx.Request) -> httpx.Response:
        seen[f"{request.method} {request.url.path}?{request.url.query.decode()}"] += 1
        if request.method == "POST":
            return httpx.Response(200, json={"stopped": True})
        return httpx.Response(200, json={"status": f"read {sum(seen.values())}"})

    return Dashboard("http://dash:8265", timeout_s=5, transport=httpx.MockTransport(answer)), seen


async def test_the_dashboard_sends_each_get_once_per_call_whatever_the_order_of_its_query() -> None:
    dashboard, seen = counting_dashboard()
    with read_scope():
        a, b, _y = await asyncio.gather(
            dashboard.get_json("/api/x", what="x", params={"limit": "5", "detail": "1"}),
            dashboard.get_json("/api/x", what="x", params=[("detail", "1"), ("limit", "5")]),
            dashboard.request_json("GET", "/api/y", what="y"),
        )
        assert a == b
        await dashboard.get_json("/api/x", what="x", params={"detail": "1", "limit": "5"})
    assert sum(seen.values()) == 2, seen
    await dashboard.aclose()


async def test_a_write_makes_the_call_read_again() -> None:
    dashboard, seen = counting_dashboard()
    with read_scope():
        before = await dashboard.request_json("GET", "/api/jobs/j", what="the job")
        await dashboard.request_json("POST", "/api/jobs/j/stop", what="stopping the job")
        after = await dashboard.request_json("GET", "/api/jobs/j", what="the job")
    assert before != after
    assert seen["GET /api/jobs/j?"] == 2 and seen["POST /api/jobs/j/stop?"] == 1
    await dashboard.aclose()
