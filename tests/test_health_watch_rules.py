"""The cluster health watch without a cluster: what counts as a change (pure), which alerts are problems, the
problems of a recorded round, the refusals and the bound per client connection."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ray_mcp.diagnosis.explain import explain_cluster
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.diagnosis.watch import Source, alert_problems, problems_of
from ray_mcp.server.build import build_server
from ray_mcp.server.context import App
from ray_mcp.server.health_watch import health_watchers
from ray_mcp.settings import Settings
from ray_mcp.shaping.health_watch import Problem, Round, advance, keyed
from ray_mcp.sources.prometheus import Alert

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


def problem(key: str, severity: int, source: str = Source.CLUSTER) -> Problem:
    return Problem(key, severity, "node_died", f"title of {key}", source)


def test_a_change_is_a_problem_that_appears_changes_severity_or_clears_and_nothing_else() -> None:
    held = keyed([problem("a", 90), problem("b", 60), problem("c", 40)])
    now = Round(keyed([problem("a", 90), problem("b", 50), problem("d", 100)]))
    state, changes = advance(held, now)
    assert set(state) == {"a", "b", "d"}
    assert {(c.problem.key, c.before, c.after) for c in changes} == {
        ("d", None, 100),
        ("b", 60, 50),
        ("c", 40, None),
    }
    assert advance(state, now)[1] == []  # the same round again: no change


def test_a_problem_whose_source_was_not_read_is_kept_not_cleared() -> None:
    held = keyed([problem("node", 90), problem("alert", 90, Source.ALERTS)])
    state, changes = advance(held, Round({}, frozenset({Source.ALERTS})))
    assert set(state) == {"alert"} and [c.problem.key for c in changes] == ["node"]


def test_only_firing_alerts_are_problems_ranked_by_their_severity_label() -> None:
    def alert(name: str, state: str, severity: str) -> Alert:
        return Alert(
            {"alertname": name, "severity": severity}, {"summary": "s"}, state, "2026-01-01T00:00:00Z", "1"
        )

    found = alert_problems(
        [alert("A", "firing", "critical"), alert("B", "pending", "critical"), alert("C", "firing", "")]
    )
    assert [(p.key.split("|")[1], p.severity > 40) for p in found] == [("A", True), ("C", False)]


def test_each_failed_job_is_its_own_problem_and_an_unread_round_keeps_them() -> None:
    jobs = [
        {
            "submission_id": f"raysubmit_{n}",
            "job_id": f"0{n}000000",
            "status": "FAILED",
            "start_time": n,
            "message": "boom",
        }
        for n in (1, 2)
    ]
    ev = GraphInputs(now_ms=1e12, jobs=jobs, nodes=[], actors=[], tasks=[], pgs=[], events=[], workers=[])
    now = problems_of(ev, explain_cluster(ev), [], [])
    assert {k for k in now.problems if k.startswith("failed_jobs|")} == {
        "failed_jobs|raysubmit_1",
        "failed_jobs|raysubmit_2",
    }
    ev.unchecked = ["failed jobs"]
    assert Source.CLUSTER in problems_of(ev, [], [], []).unread


async def test_only_the_health_uri_of_a_served_cluster_is_watched_and_a_client_watches_a_bounded_number(
    tmp_path: Path,
) -> None:
    clusters = tmp_path / "clusters.toml"
    clusters.write_text("".join(f'[clusters.c{n}]\naddress = "http://127.0.0.1:9"\n' for n in range(3)))
    server = build_server(Settings(clusters_file=clusters))
    try:
        async with Client(server, mode="legacy") as client:
            for uri in (
                "ray://cluster/health",
                "ray://cluster/health?cluster=elsewhere",
                "ray://cluster/healthy",
            ):
                with pytest.raises(MCPError) as raised:
                    await client.subscribe_resource(uri)
                assert raised.value.error.code == -32602, uri
            await client.subscribe_resource("ray://cluster/health?cluster=c0")  # unreachable: its baseline
            watch = server.health_watchers.watch_of("c0")
            assert watch is not None and list(watch.state.problems or {}) == ["unreachable"]
            text = (await client.read_resource("ray://cluster/health?cluster=c0")).contents[0]
            assert "Subscribe to ray://cluster/health?cluster=c0" in getattr(text, "text", "")
        with anyio.fail_after(30):  # the connection closed without unsubscribing: the poller stops
            while server.health_watchers.watched:
                await anyio.sleep(0.05)
    finally:
        await server.app.aclose()
    app = App(Settings(clusters_file=clusters))

    async def publish(uri: str) -> None:
        pass

    watchers = health_watchers(app, publish, per_session=2, poll_interval_s=0.05)
    try:
        await watchers.subscribe("ray://cluster/health?cluster=c0", None, owner=1)
        await watchers.subscribe("ray://cluster/health?cluster=c1", None, owner=1)
        with pytest.raises(MCPError, match="already watches the health of 2 clusters"):
            await watchers.subscribe("ray://cluster/health?cluster=c2", None, owner=1)
        await watchers.subscribe("ray://cluster/health?cluster=c2", None, owner=2)  # another client's share
        assert watchers.watched == {"c0": 1, "c1": 1, "c2": 1}
        await watchers.unsubscribe("ray://cluster/health?cluster=c0", None, owner=1)
        await watchers.subscribe("ray://cluster/health?cluster=c2", None, owner=1)
        assert watchers.watched == {"c1": 1, "c2": 2}
    finally:
        await watchers.aclose()
        await app.aclose()
    assert watchers.watched == {}


def test_a_serve_deployment_told_as_failing_then_as_a_loop_is_one_problem_not_a_new_one() -> None:
    """Ray's words for a deployment failing its health check, in two rounds: after one replica was killed, its
    replacement waiting for a worker (the engine says the deployment is UNHEALTHY; the wait is part of it), and
    after three were (it says the replicas are replaced in a loop). The app stays UNHEALTHY: the same problem,
    at the same severity, so the second round changes nothing."""
    from tests.test_causal_reasoning import HEAD, NOW, actor, node

    dep = {
        "name": "Flaky",
        "status": "UNHEALTHY",
        "status_trigger": "HEALTH_CHECK_FAILED",
        "message": "A replica's health check failed. This deployment will be UNHEALTHY until the replica recovers.",
        "deployment_config": {"health_check_period_s": 1, "health_check_timeout_s": 5},
        "target_num_replicas": 1,
        "replicas": [{"replica_id": "r1", "state": "RUNNING"}],
    }
    serve = {
        "controller_info": {"node_id": HEAD},
        "applications": {"flaky": {"status": "UNHEALTHY", "deployments": {"Flaky": dep}}},
    }
    replica = actor("0" * 32, "ServeReplica:flaky:Flaky", "01000000")
    dead = [actor(f"{i:032x}", "ServeReplica:flaky:Flaky", "01000000", "DEAD") for i in (1, 2, 3)]
    # The replacement of the first replica killed, waiting for its worker: the failing deployment's next turn.
    waiting = actor("f" * 32, "ServeReplica:flaky:Flaky", "01000000", "PENDING_CREATION")

    def round_of(actors: list[dict]) -> Round:
        ev = GraphInputs(
            now_ms=NOW, nodes=[node(HEAD)], jobs=[], pgs=[], tasks=[], actors=actors, serve=serve
        )
        return problems_of(ev, explain_cluster(ev), [], [])

    failing, looping = round_of([dead[0], waiting]), round_of([*dead, replica])
    assert [p.kind for p in failing.problems.values()] == ["serve"], failing.problems
    assert [p.kind for p in looping.problems.values()] == ["serve_loop"], looping.problems
    state, changes = advance(failing.problems, looping)
    assert changes == [], changes
    assert [p.kind for p in state.values()] == ["serve_loop"]  # what it is told as now
