"""cluster_health reads each source once, the cheapest that answers (issue 16): the GCS's actor and placement
group tables instead of the State API's lists, one job list, the per-area checks only when the evidence graph
cannot stand in for them; what it could not read in full, it says (a stated cap), never silently.

Live parts run on the session's real cluster (actors, a dead actor and placement groups made by a driver);
the caps, which need thousands of records, and the shared read's faults are unit tests.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import anyio
import httpx
import pytest
from tests.state_drivers import driver
from tests.support import call_ok, mcp_client, text_of

from ray_mcp.diagnosis import evidence
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.limits import CLUSTER_ROWS_READ, TASKS_READ
from ray_mcp.ray_api import RayAPI, gcs
from ray_mcp.ray_api.client import RayClient
from ray_mcp.settings import Settings

POPULATION = """
@ray.remote(num_cpus=0)
class Keeper:
    def ping(self):
        return 1

@ray.remote(num_cpus=0, max_restarts=0)
class Doomed:
    def boom(self):
        os._exit(3)

keepers = [Keeper.options(name=f"{sys.argv[2]}-k{i}").remote() for i in range(3)]
ray.get([k.ping.remote() for k in keepers])
doomed = Doomed.options(name=f"{sys.argv[2]}-doomed").remote()
try:
    ray.get(doomed.boom.remote())
except Exception:
    pass
groups = [placement_group([{"CPU": 0.01}], name=f"{sys.argv[2]}-pg{i}") for i in range(3)]
ray.get([g.ready() for g in groups])
huge = placement_group([{"CPU": 64}], name=f"{sys.argv[2]}-huge", strategy="STRICT_SPREAD")
"""


@pytest.fixture(autouse=True, scope="module")
def ray_imported() -> None:
    """Import Ray once up front (the GCS reads below import it from a worker thread)."""
    import ray.job_submission  # noqa: F401


class Counting(httpx.AsyncBaseTransport):
    """Forwards to the real dashboard and counts the requests per path."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


async def state_rows(api: RayAPI, resource: str) -> list[dict[str, Any]]:
    result = await api.list_state(resource, what=resource, limit=10_000, detail=True)
    return [dict(r) for r in result["result"]]


async def test_the_gcs_gives_the_same_actor_and_placement_group_rows_as_the_state_api(
    ray_cluster: Any,
) -> None:
    tag = f"rows{uuid.uuid4().hex[:6]}"
    api = RayAPI(ray_cluster.dashboard_url, timeout_s=30, gcs_address=ray_cluster.gcs_address)
    try:
        with driver(ray_cluster.gcs_address, POPULATION, tag):
            with anyio.fail_after(120):
                while True:  # the State API and the GCS read the same table; it may change between the two
                    ours_a, ours_p = await api.actor_rows(), await api.pg_rows()
                    theirs_a, theirs_p = (
                        await state_rows(api, "actors"),
                        await state_rows(api, "placement_groups"),
                    )
                    names = {r["name"] for r in theirs_a}
                    settled = f"{tag}-doomed" in names and any(r["name"] == f"{tag}-huge" for r in theirs_p)
                    if (
                        settled
                        and ours_a == theirs_a
                        and [{k: v for k, v in r.items() if k != "strategy"} for r in ours_p or []]
                        == theirs_p
                    ):
                        break
                    await anyio.sleep(0.5)
            mine = {r["name"]: r for r in ours_p or [] if r["name"].startswith(tag)}
            assert (
                mine[f"{tag}-huge"]["strategy"] == "STRICT_SPREAD"
                and mine[f"{tag}-pg0"]["strategy"] == "PACK"
            )
            doomed = next(r for r in ours_a or [] if r["name"] == f"{tag}-doomed")
            assert (
                doomed["state"] == "DEAD"
                and doomed["death_cause"]["actor_died_error_context"]["actor_id"] == (doomed["actor_id"])
            )  # ids inside the death cause in hex, as the State API prints them
    finally:
        await api.aclose()


async def test_the_gcs_gives_the_same_unfinished_task_rows_as_the_state_api(ray_cluster: Any) -> None:
    tag = f"tasks{uuid.uuid4().hex[:6]}"
    api = RayAPI(ray_cluster.dashboard_url, timeout_s=30, gcs_address=ray_cluster.gcs_address)
    unfinished = [("state", "!=", "FINISHED")]
    try:
        with driver(ray_cluster.gcs_address, POPULATION, tag), anyio.fail_after(120):
            while True:  # tasks change state between the two reads: until both agree on a settled cluster
                read = await api.unfinished_tasks()
                result = await api.list_state(
                    "tasks", what="tasks", filters=unfinished, limit=10_000, detail=True
                )
                theirs = [dict(r) for r in result["result"]]
                failed = [
                    r for r in theirs if r["state"] == "FAILED" and r["func_or_class_name"] == "Doomed.boom"
                ]
                if read is not None and failed and read[0] == theirs:
                    break
                await anyio.sleep(0.5)
        rows, more = read
        assert more == 0 and not [r for r in rows if r["state"] == "FINISHED"]
        assert failed[0]["error_type"] == "ACTOR_DIED" and failed[0]["actor_id"]
    finally:
        await api.aclose()


async def test_the_gcs_gives_the_same_dead_worker_rows_as_the_state_api(ray_cluster: Any) -> None:
    tag = f"workers{uuid.uuid4().hex[:6]}"
    api = RayAPI(ray_cluster.dashboard_url, timeout_s=30, gcs_address=ray_cluster.gcs_address)
    dead = [("is_alive", "=", "False")]
    try:
        with driver(ray_cluster.gcs_address, POPULATION, tag), anyio.fail_after(120):
            while True:  # workers exit between the two reads: until both agree
                read = await api.dead_workers(50)
                result = await api.list_state("workers", what="workers", filters=dead, limit=50, detail=True)
                theirs = ([dict(r) for r in result["result"]], result["num_filtered"])
                if read is not None and read[0] and read == theirs:
                    break
                await anyio.sleep(0.5)
        rows, _n = read
        assert all(r["is_alive"] is False and len(r["worker_id"]) == 56 for r in rows)
    finally:
        await api.aclose()


async def test_cluster_health_reads_each_source_once_and_keeps_every_finding(ray_cluster: Any) -> None:
    tag = f"once{uuid.uuid4().hex[:6]}"
    with driver(ray_cluster.gcs_address, POPULATION, tag):
        counting = Counting()
        async with mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=counting) as client:
            with anyio.fail_after(120):
                while True:
                    counting.paths.clear()
                    result = await call_ok(client, "cluster_health", {})
                    text = text_of(result)
                    if f"{tag}-huge" in text:
                        break
                    await anyio.sleep(1)
            # Once more, counted: the first call of a server also asks the job list for the secrets of jobs the
            # Jobs API does not list (Ray's own), at most once per 30 s.
            counting.paths.clear()
            result = await call_ok(client, "cluster_health", {})
            text = text_of(result)
    data = result.structured_content or {}
    assert data["status"] == "PROBLEMS_FOUND" and data["unchecked"] == [], text
    assert {"dead actors", "actor restarts", "failed tasks", "placement groups"} <= set(data["checked"])
    # The pending group that can never fit still found, named and explained from the GCS's rows.
    assert any(f"{tag}-huge" in f["title"] and "STRICT_SPREAD" in f["title"] for f in data["findings"]), text
    # One job list (for failed jobs and the graph), no State API list of actors, groups, tasks or workers (the GCS
    # gave them),
    # no job looked up again one by one.
    assert counting.paths.count("/api/jobs/") == 1, counting.paths
    from_gcs = (
        "/api/v0/actors",
        "/api/v0/placement_groups",
        "/api/v0/jobs",
        "/api/v0/tasks",
        "/api/v0/workers",
    )
    assert not [p for p in counting.paths if p in from_gcs], counting.paths
    assert not [p for p in counting.paths if p.startswith("/api/jobs/") and p != "/api/jobs/"], counting.paths


class Rows:
    """A stand-in RayAPI for evidence._rows and _actors: fixed State API results and GCS actor rows."""

    def __init__(self, result: dict[str, Any], actors: list[dict[str, Any]] | None = None) -> None:
        self.result = result
        self.actors = actors

    async def list_state(self, resource: str, **_: Any) -> dict[str, Any]:
        return self.result

    async def actor_rows(self) -> list[dict[str, Any]] | None:
        return self.actors

    async def unfinished_tasks(self) -> tuple[list[dict[str, Any]], int] | None:
        return self.result["result"], self.result["more"]


async def test_a_filtered_read_cut_at_its_limit_says_how_many_it_left_out() -> None:
    ev = GraphInputs()
    result = {"total": 5_000, "num_after_truncation": 5_000, "num_filtered": 3_208,
              "result": [{"task_id": f"t{i}", "state": "FAILED"} for i in range(1000)]}  # fmt: skip
    rows = await evidence._rows(Rows(result), ev, "tasks", "the failed tasks", filters=[("state", "=", "FAILED")],  # type: ignore[arg-type]
                                limit=1000)  # fmt: skip
    assert rows is not None and len(rows) == 1000
    assert ev.capped == ["The failed tasks: 1,000 of 3,208 read; the counts above cover those."]
    assert ev.unreadable == []  # a cap is stated, not taken for a source that could not be read


async def test_a_read_at_the_state_apis_own_cap_says_at_least() -> None:
    ev = GraphInputs()
    result = {"total": 11_250, "num_after_truncation": 10_000, "num_filtered": 9_000,
              "result": [{"task_id": f"t{i}"} for i in range(1000)]}  # fmt: skip
    await evidence._rows(Rows(result), ev, "tasks", "the failed tasks", filters=[("state", "=", "FAILED")],  # type: ignore[arg-type]
                         limit=1000)  # fmt: skip
    # Ray read 10,000 of the 11,250 tasks (its cap): 9,000 of those failed, and maybe more of the rest.
    assert ev.capped == ["The failed tasks: 1,000 of at least 9,000 read; the counts above cover those."]


async def test_more_actors_than_the_graph_reads_are_cut_with_a_stated_cap() -> None:
    ev = GraphInputs()
    many = [{"actor_id": f"{i:032x}", "state": "DEAD"} for i in range(CLUSTER_ROWS_READ + 5)]
    dead, alive = await evidence._actors(Rows({}, [*many, {"actor_id": "a", "state": "ALIVE"}]), ev)  # type: ignore[arg-type]
    assert (
        dead is not None and len(dead) == CLUSTER_ROWS_READ and alive == [{"actor_id": "a", "state": "ALIVE"}]
    )
    assert ev.capped == [
        f"The actors that are not alive: {CLUSTER_ROWS_READ:,} of {CLUSTER_ROWS_READ + 5:,} read; "
        "the counts above cover those."
    ]


async def test_unfinished_tasks_past_the_gcss_limit_and_the_graphs_are_cut_with_stated_caps() -> None:
    ev = GraphInputs()
    rows = [{"task_id": f"f{i}", "state": "FAILED"} for i in range(TASKS_READ + 2)]
    rows += [{"task_id": "r", "state": "RUNNING"}, {"task_id": "w", "state": "PENDING_NODE_ASSIGNMENT"}]
    failed, waiting, running = await evidence._tasks(Rows({"result": rows, "more": 7}), ev)  # type: ignore[arg-type]
    assert failed is not None and len(failed) == TASKS_READ
    assert waiting == [rows[-1]] and running == [rows[-2]]
    n = len(rows)
    assert ev.capped == [
        f"The unfinished tasks: {n:,} of {n + 7:,} read (Ray's cap); the counts above cover those.",
        f"The failed tasks: {TASKS_READ:,} of {TASKS_READ + 2:,} read; the counts above cover those.",
    ]


def client() -> RayClient:
    return RayClient("http://127.0.0.1:9", timeout_s=1, gcs_lookup=None)


async def test_concurrent_askers_share_one_read_and_nothing_is_kept_after_it() -> None:
    c = client()
    reads = 0
    release = asyncio.Event()

    async def read() -> int:
        nonlocal reads
        reads += 1
        await release.wait()
        return reads

    tasks = [asyncio.create_task(c.shared("k", read)) for _ in range(5)]
    await asyncio.sleep(0)
    release.set()
    assert await asyncio.gather(*tasks) == [1] * 5 and reads == 1
    assert await c.shared("k", read) == 2  # a later call reads again: no stale answer
    await c.aclose()


async def test_a_failed_shared_read_fails_every_asker_and_the_next_call_retries() -> None:
    c = client()
    attempts = 0

    async def read() -> int:
        nonlocal attempts
        attempts += 1
        await asyncio.sleep(0.01)
        if attempts == 1:
            raise RuntimeError("the GCS did not answer")
        return attempts

    results = await asyncio.gather(c.shared("k", read), c.shared("k", read), return_exceptions=True)
    assert [type(r) for r in results] == [RuntimeError, RuntimeError] and attempts == 1
    assert await c.shared("k", read) == 2
    await c.aclose()


async def test_a_cancelled_first_asker_does_not_cancel_the_others() -> None:
    c = client()
    started = asyncio.Event()

    async def read() -> str:
        started.set()
        await asyncio.sleep(0.05)
        return "rows"

    first = asyncio.create_task(c.shared("k", read))
    await started.wait()
    second = asyncio.create_task(c.shared("k", read))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == "rows"  # it made its own read when the one it waited for was cancelled
    with pytest.raises(asyncio.CancelledError):
        await first
    await c.aclose()


def test_placement_group_ids_inside_bundles_are_hex_like_the_state_apis() -> None:
    import base64

    pg = base64.b64encode(bytes.fromhex("ab" * 18)).decode()
    row = {"placement_group_id": pg, "bundles": [{"bundle_id": {"placement_group_id": pg}, "node_id": None}]}
    assert gcs._hex_ids(row, gcs._PG_HEX_KEYS) == {
        "placement_group_id": "ab" * 18, "bundles": [{"bundle_id": {"placement_group_id": "ab" * 18}, "node_id": None}],
    }  # fmt: skip


def test_state_api_filters_are_applied_here_as_ray_applies_them() -> None:
    from ray_mcp.ray_api.query import matches

    row = {"class_name": "Keeper", "state": "DEAD", "is_detached": True, "pid": 42, "repr_name": None}
    assert matches(row, [("class_name", "=", "keeper"), ("state", "!=", "alive")])  # case-insensitive
    assert matches(row, [("is_detached", "=", "True"), ("pid", "=", "42")])
    assert not matches(row, [("node_id", "=", "ab")]) and not matches(
        row, [("node_id", "!=", "ab")]
    )  # absent
    assert not matches(row, [("repr_name", "=", "x")]) and matches(row, [("repr_name", "!=", "x")])  # null


def test_a_converted_row_is_reused_only_for_the_same_message_and_callers_get_their_own_dict() -> None:
    from ray.core.generated import gcs_pb2

    gcs._ROWS.clear()
    pg = gcs_pb2.PlacementGroupTableData(placement_group_id=bytes.fromhex("ab" * 18), name="g", state=0)
    first = gcs._state_row(pg, gcs.PG_COLUMNS, gcs._PG_HEX_KEYS)
    first["strategy"] = "PACK"  # a caller's own key stays its own
    again = gcs._state_row(pg, gcs.PG_COLUMNS, gcs._PG_HEX_KEYS)
    assert again == {k: v for k, v in first.items() if k != "strategy"} and "strategy" not in again
    assert again["placement_group_id"] == "ab" * 18 and again["state"] == "PENDING" and len(gcs._ROWS) == 1
    pg.state = gcs_pb2.PlacementGroupTableData.CREATED  # the group changed: converted anew
    assert gcs._state_row(pg, gcs.PG_COLUMNS, gcs._PG_HEX_KEYS)["state"] == "CREATED" and len(gcs._ROWS) == 2
    for i in range(gcs.ROW_CACHE_SIZE):  # full: cleared, never grown past its size
        gcs._ROWS[b"%d" % i] = {}
    pg.name = "h"
    gcs._state_row(pg, gcs.PG_COLUMNS, gcs._PG_HEX_KEYS)
    assert len(gcs._ROWS) == 1
    gcs._ROWS.clear()
