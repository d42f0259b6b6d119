"""The cluster's health, live: ray://cluster/health reads cluster_health's answer; its subscribers (a 2025 session
and a 2026 listen stream) hear once when a problem appears: a job that fails, a node that dies, a Serve app that
turns UNHEALTHY (and not again while it stays so).

The cluster is this module's own (a head and a worker joined with `ray start --address`, tests/test_multi_node.py's
LocalWorker), since the worker is stopped by its pids halfway: run it with `ray-slot --all`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.conftest import joined, local_head
from tests.support import call, submit, wait_until
from tests.test_live import Updates, read_text
from tests.test_multi_node import WORKER_RESOURCES, LocalWorker, worker_id

from ray_mcp.local_head import LocalHead
from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.server.context import DEFAULT_CLUSTER
from ray_mcp.server.health_watch import HEALTH_URI, HealthState
from ray_mcp.server.pollers import Watch
from ray_mcp.settings import Settings
from ray_mcp.shaping.health_watch import Change, change_line

pytestmark = [pytest.mark.live, pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")]


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[tuple[LocalHead, LocalWorker]]:
    with local_head(num_cpus=1) as head:
        spec = LocalWorker(
            num_cpus=1, resources=json.dumps(WORKER_RESOURCES), head_gcs_address=head.gcs_address
        )
        with joined(spec) as worker:
            yield head, worker


# A round every second instead of the product's HEALTH_POLL_S (5 s): what these tests check is counted in rounds
# (heard once, then not again over the next rounds), so shorter rounds check the same thing sooner. Shorter
# rounds also see more of the problems that last a moment (a job's supervisor waiting for a worker process):
# each check is about its own problem, never about how many notifications there were in all.
QUICK_POLL_S = 1.0


def watched_server(settings: Settings) -> RayMCPServer:
    """A server whose health watchers poll every QUICK_POLL_S."""
    server = build_server(settings)
    server.health_watchers.poll_interval_s = QUICK_POLL_S
    return server


async def rounds_pass(watch: Watch[str, HealthState], n: int) -> None:
    """Wait until the poller has made ``n`` more rounds (what "nothing more was notified" is checked over)."""
    target = watch.rounds + n
    with anyio.fail_after(120):
        while watch.rounds < target:
            await anyio.sleep(0.1)


class Heard:
    """The changes a watch notified, collected round by round (each round notifies at most once; a
    notification that lands just after its round is picked up with the next)."""

    def __init__(self, watch: Watch[str, HealthState]) -> None:
        self.watch, self.told, self.changes = watch, watch.notified, list[Change]()

    async def round(self) -> None:
        await rounds_pass(self.watch, 1)
        if self.watch.notified > self.told:
            self.changes.extend(self.watch.state.last_changes)
            self.told = self.watch.notified

    async def until(self, kind: str) -> None:
        """Round by round until a change of ``kind`` was notified. Other problems may come and go meanwhile
        (a job's supervisor waits a moment for a worker process on a busy machine): each is news of its own."""
        with anyio.fail_after(180):
            while not self.of(kind):
                await self.round()

    def of(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.problem.kind == kind]


async def delivered(updates: Updates, listened: list[Any], watch: Watch[str, HealthState]) -> None:
    """Every notification of the watch reached both subscribers (the 2025 session and the 2026 stream)."""
    with anyio.fail_after(180):
        while not len(updates.uris) == len(listened) == watch.notified:
            await anyio.sleep(0.1)


async def test_subscribers_hear_once_when_a_job_fails_and_when_a_node_dies(two_nodes) -> None:
    head, worker = two_nodes
    server = watched_server(Settings(address=head.dashboard_url))
    watchers = server.health_watchers
    updates, listened = Updates(), []
    try:
        async with Client(server, mode="legacy", message_handler=updates) as legacy, Client(server) as modern:
            await worker_id(legacy)  # the worker has joined: its death is news later, not now
            await legacy.subscribe_resource(HEALTH_URI)  # answered once the baseline round is in
            async with modern.listen(resource_subscriptions=[HEALTH_URI]) as subscription:
                assert watchers.watched == {DEFAULT_CLUSTER: 2}  # one poller for both subscribers
                watch = watchers.watch_of(DEFAULT_CLUSTER)
                assert watch is not None and watch.notified == 0
                heard = Heard(watch)

                async def listen() -> None:
                    async for event in subscription:
                        listened.append(event)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(listen)
                    job = await submit(legacy, entrypoint="python -c \"raise SystemExit('watch-boom')\"")
                    await wait_until(legacy, job, {"FAILED"})
                    await heard.until("failed_jobs")
                    await delivered(updates, listened, watch)
                    text = await read_text(legacy, HEALTH_URI)
                    assert job in text and "failed_jobs" in text, text[-1500:]
                    for _ in range(2):  # heard once: not again while the job stays failed
                        await heard.round()
                    [failed] = heard.of("failed_jobs")
                    assert failed.before is None, change_line(failed)  # it appeared

                    worker.stop()  # the worker node dies (its processes, by pid)
                    await heard.until("node_died")
                    await delivered(updates, listened, watch)
                    text = await read_text(legacy, HEALTH_URI)
                    assert "node_died" in text and "DEAD" in text, text[-1500:]
                    for _ in range(2):
                        await heard.round()
                    assert len(heard.of("node_died")) == 1 and len(heard.of("failed_jobs")) == 1, [
                        change_line(c) for c in heard.changes
                    ]
                    await delivered(updates, listened, watch)
                    assert set(updates.uris) == {HEALTH_URI}
                    tg.cancel_scope.cancel()
            await legacy.unsubscribe_resource(HEALTH_URI)
            with anyio.fail_after(30):  # the last subscriber left: the poller stops
                while watchers.watched or not (watch.task and watch.task.done()):
                    await anyio.sleep(0.05)
            await call(legacy, "list_jobs")  # the server still serves
    finally:
        await server.app.aclose()


async def test_a_firing_prometheus_alert_is_part_of_the_health_and_notified_when_it_fires_and_clears(
    ray_cluster, tmp_path
) -> None:
    from tests.prometheus import alerting_prometheus
    from tests.rules import lacking

    from ray_mcp.local_prometheus import prometheus_binary

    if prometheus_binary() is None:
        lacking("prometheus", "install Debian's package: apt install prometheus")
    # The rule fires once the baseline is read and clears once the firing was heard: Prometheus reloads its
    # rules on demand, so no wall-clock window has to be guessed (one that opened before the subscription was
    # read would put the alert in the baseline; one that closed late was waited out).
    rule = {
        "alert": "RayWatchTestAlert",
        "expr": "vector(1) < 0",  # never, until set_rules below
        "labels": {"severity": "critical"},
        "annotations": {"summary": "the head is on fire (a test)"},
    }
    with alerting_prometheus(tmp_path / "prom", [rule]) as prom:
        server = watched_server(Settings(address=ray_cluster.dashboard_url, prometheus=prom.url))
        watchers, updates = server.health_watchers, Updates()
        try:
            async with Client(server, mode="legacy", message_handler=updates) as client:
                await client.subscribe_resource(HEALTH_URI)
                watch = watchers.watch_of(DEFAULT_CLUSTER)
                assert watch is not None and not any("alert" in k for k in watch.state.problems or {})

                async def next_read() -> str:  # the session head may change for other reasons too
                    with anyio.fail_after(120):
                        await updates.next()
                    return await read_text(client, HEALTH_URI)

                firing = [{**rule, "expr": "vector(1) > 0"}]  # firing from its next evaluation
                await anyio.to_thread.run_sync(prom.set_rules, firing)
                while "RayWatchTestAlert" not in (text := await next_read()):
                    pass
                assert "Firing Prometheus alerts" in text and "the head is on fire" in text, text[-1500:]
                assert "appeared (severity 90, alert)" in text
                await anyio.to_thread.run_sync(prom.set_rules, [rule])  # false again: the alert clears
                while "cleared (alert)" not in (text := await next_read()):
                    pass
                assert "Firing Prometheus alerts" not in text, text[-1500:]
        finally:
            await server.app.aclose()


SERVE_APP = """
import os
from ray import serve

@serve.deployment(health_check_period_s=1, health_check_timeout_s=5)
class Flaky:
    def check_health(self):
        if os.path.exists(os.environ["FLAG"]):
            raise RuntimeError("the model server lost its GPU context")

    def __call__(self, request):
        return "ok"

app = Flaky.bind()
"""


async def test_a_subscriber_hears_when_a_serve_app_turns_unhealthy(two_nodes, tmp_path) -> None:
    from ray_mcp.local_head import free_ports

    head, _worker = two_nodes
    (tmp_path / "watch_serve_app.py").write_text(SERVE_APP)
    flag = tmp_path / "unhealthy"
    config = {
        "http_options": {"host": "127.0.0.1", "port": free_ports(1)[0]},
        "applications": [
            {
                "name": "flaky",
                "import_path": "watch_serve_app:app",
                "route_prefix": "/flaky",
                "runtime_env": {"env_vars": {"PYTHONPATH": str(tmp_path), "FLAG": str(flag)}},
                "deployments": [{"name": "Flaky", "ray_actor_options": {"num_cpus": 0}}],
            }
        ],
    }
    server = watched_server(Settings(address=head.dashboard_url))
    updates = Updates()
    try:
        async with Client(server, mode="legacy", message_handler=updates) as client:
            deployed = await client.call_tool("serve_deploy", {"config": config})
            assert not deployed.is_error, deployed.content
            with anyio.fail_after(180):
                while (await structured_status(client)) != "RUNNING":
                    await anyio.sleep(0.5)
            await client.subscribe_resource(HEALTH_URI)
            watch = server.health_watchers.watch_of(DEFAULT_CLUSTER)
            assert watch is not None and not any("serve" in k for k in watch.state.problems or {})
            flag.write_text("now")
            seen: list[Change] = []  # every change notified, in order
            told = watch.notified

            async def next_round() -> None:
                nonlocal told
                await rounds_pass(watch, 1)
                if watch.notified > told:
                    seen.extend(watch.state.last_changes)
                    told = watch.notified

            with anyio.fail_after(180):
                while not serve_changes(seen):
                    await next_round()
            [appeared] = serve_changes(seen)
            assert appeared.before is None and appeared.after is not None, change_line(appeared)
            text = await read_text(client, HEALTH_URI)
            assert "flaky" in text and "appeared" in text, text[-1500:]
            # Notified once: the app stays UNHEALTHY while Serve replaces its failing replica again and again
            # (its replicas die, the deployment passes through UPDATING, the chain learns it is a loop): the
            # same problem, so no further notification about it.
            dead = await dead_replicas(client)
            with anyio.fail_after(240):
                while (await dead_replicas(client)) < dead + 2 or (
                    await structured_status(client)
                ) != "UNHEALTHY":
                    await next_round()
            await next_round()
            await next_round()
            assert serve_changes(seen) == [appeared], [change_line(c) for c in seen]
    finally:
        await server.app.aclose()


def serve_changes(changes: list[Change]) -> list[Change]:
    return [c for c in changes if c.problem.kind.startswith("serve")]


async def dead_replicas(client: Client) -> int:
    """The Flaky replicas Serve has replaced so far (DEAD replica actors)."""
    from tests.support import structured

    actors = await structured(client, "list_actors", class_name="ServeReplica:flaky:Flaky", state="DEAD")
    return int(actors.get("total") or len(actors["actors"]))


async def structured_status(client: Client) -> str:
    from tests.support import structured

    status = await structured(client, "serve_status")
    apps = [a for a in status.get("apps", []) if a.get("name") == "flaky"]
    return str(apps[0].get("status")) if apps else ""
