"""cluster_health reads each source once: the State API's lists (one per filter), one job list, the per-area
checks only when the evidence graph cannot stand in for them; what it could not read in full, it says (a
stated cap), never silently.

Live parts run on the session's real cluster (actors, a dead actor and placement groups made by a driver);
the caps, which need thousands of records, are unit tests (the read scope's own: tests/test_read_scope.py).
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import httpx
from tests.state_drivers import driver
from tests.support import call_ok, mcp_client, text_of

from ray_mcp.diagnosis import evidence
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.limits import TASKS_READ
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


class Counting(httpx.AsyncBaseTransport):
    """Forwards to the real dashboard and records each request (path, and path with its query)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.requests: list[str] = []
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        self.requests.append(f"{request.url.path}?{request.url.query.decode()}")
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


async def test_cluster_health_reads_each_source_once_and_keeps_every_finding(ray_cluster: Any) -> None:
    tag = f"once{uuid.uuid4().hex[:6]}"
    with driver(ray_cluster.gcs_address, POPULATION, tag):
        counting = Counting()
        async with mcp_client(Settings(address=ray_cluster.dashboard_url), http_transport=counting) as client:
            with anyio.fail_after(120):
                while True:
                    result = await call_ok(client, "cluster_health", {})
                    text = text_of(result)
                    if f"{tag}-huge" in text:
                        break
                    await anyio.sleep(1)
            # Once more, counted: the first call of a server also asks the job list for the secrets of jobs the
            # Jobs API does not list (Ray's own), at most once per 30 s.
            counting.paths.clear()
            counting.requests.clear()
            result = await call_ok(client, "cluster_health", {})
            text = text_of(result)
    data = result.structured_content or {}
    assert data["status"] == "PROBLEMS_FOUND" and data["unchecked"] == [], text
    assert {"dead actors", "actor restarts", "failed tasks", "placement groups"} <= set(data["checked"])
    # The pending group that can never fit still found, named and explained (its strategy from the GCS).
    assert any(f"{tag}-huge" in f["title"] and "STRICT_SPREAD" in f["title"] for f in data["findings"]), text
    # One job list (for failed jobs and the graph), none of the State API's job list, no job looked up again
    # one by one, and no State API list asked twice with the same filters.
    assert counting.paths.count("/api/jobs/") == 1, counting.paths
    assert "/api/v0/jobs" not in counting.paths, counting.paths
    assert not [p for p in counting.paths if p.startswith("/api/jobs/") and p != "/api/jobs/"], counting.paths
    lists = [
        r
        for r in counting.requests
        if r.startswith(
            ("/api/v0/actors?", "/api/v0/tasks?", "/api/v0/placement_groups?", "/api/v0/workers?")
        )
    ]
    assert len(lists) == len(set(lists)), sorted(lists)


class Rows:
    """A stand-in RayAPI for evidence.read_rows: its State API answers every list with ``result``."""

    def __init__(self, result: dict[str, Any]) -> None:
        self.result = result
        self.sources = self.state = self

    async def page(self, resource: str, **_: Any) -> dict[str, Any]:
        return self.result


async def test_a_filtered_read_cut_at_its_limit_says_how_many_it_left_out() -> None:
    ev = GraphInputs()
    result = {
        "total": 5_000,
        "num_after_truncation": 5_000,
        "num_filtered": 3_208,
        "result": [{"task_id": f"t{i}", "state": "FAILED"} for i in range(1000)],
    }
    rows = await evidence.read_rows(
        Rows(result),
        ev,
        "tasks",
        "the failed tasks",
        filters=[("state", "=", "FAILED")],  # type: ignore[arg-type]
        limit=1000,
    )
    assert rows is not None and len(rows) == 1000
    assert ev.capped == ["The failed tasks: 1,000 of 3,208 read; the counts above cover those."]
    assert ev.unreadable == []  # a cap is stated, not taken for a source that could not be read


async def test_a_read_at_the_state_apis_own_cap_says_at_least() -> None:
    ev = GraphInputs()
    result = {
        "total": 11_250,
        "num_after_truncation": 10_000,
        "num_filtered": 9_000,
        "result": [{"task_id": f"t{i}"} for i in range(1000)],
    }
    await evidence.read_rows(
        Rows(result),
        ev,
        "tasks",
        "the failed tasks",
        filters=[("state", "=", "FAILED")],  # type: ignore[arg-type]
        limit=1000,
    )
    # Ray read 10,000 of the 11,250 tasks (its cap): 9,000 of those failed, and maybe more of the rest.
    assert ev.capped == ["The failed tasks: 1,000 of at least 9,000 read; the counts above cover those."]


async def test_the_unfinished_tasks_are_split_by_state_each_part_cut_with_a_stated_cap() -> None:
    ev = GraphInputs()
    rows = [{"task_id": f"f{i}", "state": "FAILED"} for i in range(TASKS_READ + 2)]
    rows += [{"task_id": "r", "state": "RUNNING"}, {"task_id": "w", "state": "PENDING_NODE_ASSIGNMENT"}]
    n = len(rows)
    result = {"total": n + 50, "num_after_truncation": n + 50, "num_filtered": n + 7, "result": rows}
    failed, waiting, running = await evidence._tasks(Rows(result), ev)  # type: ignore[arg-type]
    assert failed is not None and len(failed) == TASKS_READ
    assert waiting == [rows[-1]] and running == [rows[-2]]
    assert ev.capped == [
        f"The unfinished tasks: {n:,} of {n + 7:,} read; the counts above cover those.",
        f"The failed tasks: {TASKS_READ:,} of {TASKS_READ + 2:,} read; the counts above cover those.",
    ]


class NothingRead:
    """A RayAPI whose every read fails the test: what has no node must not be read."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read {name} for work that has no node")


async def test_work_with_no_node_yet_has_no_worker_log_read_and_fails_nothing() -> None:
    """A restarting actor between two lives, or a task that died before it was placed, has node_id None: its
    crash log is not looked for (it used to be asked of node "None", and the whole cluster_health failed)."""
    ev = GraphInputs(
        actors=[
            {
                "actor_id": "a" * 32,
                "state": "RESTARTING",
                "num_restarts": 2,
                "node_id": None,
                "job_id": "01000000",
            },
            {
                "actor_id": "b" * 32,
                "state": "DEAD",
                "node_id": None,
                "pid": 7,
                "death_cause": {"actor_died_error_context": {"reason": "WORKER_DIED", "pid": 7}},
            },
        ],
        tasks=[{"task_id": "c" * 48, "error_type": "WORKER_DIED", "node_id": None, "worker_pid": 9}],
        workers=[],
    )
    await evidence.read_crash_logs(NothingRead(), ev, dead_actors=True)  # type: ignore[arg-type]
    assert ev.worker_logs == {} and ev.unreadable == []
