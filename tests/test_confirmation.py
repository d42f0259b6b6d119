"""Destructive calls: the user is asked when the client supports elicitation, else the confirm token path.

Both protocol generations are driven: the 2026-07-28 one (the in-memory client's default, where the question
rides an InputRequiredResult round) and the older handshake (a standalone elicitation/create request).
"""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import ElicitRequestParams, ElicitResult
from tests.state_drivers import driver
from tests.support import call_ok, run_to_end, text_of

from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.confirm import ClusterRef, Pending, is_confirmed, token_for
from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings


class User:
    """An elicitation callback that answers like a user would, and remembers what it was asked."""

    def __init__(self, action: str, proceed: bool = True) -> None:
        self.action = action
        self.proceed = proceed
        self.asked: list[str] = []

    async def __call__(self, _context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        assert "proceed" in str(params.requested_schema)
        content = {"proceed": self.proceed} if self.action == "accept" else None
        return ElicitResult(action=self.action, content=content)  # type: ignore[arg-type]


MODES = pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "handshake"])


@MODES
async def test_an_accepted_elicitation_deletes_the_job_it_named(
    ray_cluster: Any, tmp_path: Path, mode: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    server = build_server(
        Settings(address=ray_cluster.dashboard_url, allow_destructive=True, audit_log=audit)
    )
    user = User("accept")
    async with Client(server, elicitation_callback=user, mode=mode) as client:  # type: ignore[arg-type]
        sid, _ = await run_to_end(client, entrypoint="python -c \"print('to be deleted')\"")
        done = await call_ok(client, "delete_job", {"job": sid})
        assert done.structured_content["done"] is True, text_of(done)
        gone = await client.call_tool("get_job", {"job": sid})
        assert gone.is_error and "list_jobs" in text_of(gone)
    assert len(user.asked) == 1
    assert sid in user.asked[0] and "SUCCEEDED" in user.asked[0]
    assert "to be deleted" not in user.asked[0]  # the id, not the cluster's text (the entrypoint)
    outcomes = [json.loads(line)["outcome"] for line in audit.read_text().splitlines()]
    assert outcomes[-1] == "ok" and outcomes.count("ok") == 2  # submit_job, then the delete itself
    await server.app.aclose()


@MODES
async def test_a_declined_elicitation_leaves_the_actor_alive_and_says_so(
    server: RayMCPServer, ray_cluster: Any, mode: str
) -> None:
    user = User("decline")
    body = """
        @ray.remote(num_cpus=0)
        class Keeper:
            def ping(self):
                return 1
        k = Keeper.options(name="precious").remote()
        ray.get(k.ping.remote())
    """
    with driver(ray_cluster.gcs_address, body, namespace=f"confirm-{mode}"):
        async with Client(server, elicitation_callback=user, mode=mode) as client:  # type: ignore[arg-type]
            found = await call_ok(client, "list_actors", {"name": "precious", "state": "ALIVE"})
            actor = found.structured_content["actors"][0]
            refused = await call_ok(client, "kill_actor", {"actor_id": actor["actor_id"]})
            assert refused.structured_content["done"] is False
            assert "nothing changed" in text_of(refused) and "declined" in text_of(refused)
            assert "confirm-" not in text_of(refused)  # no token to route around the user's no
            said_no = User("accept", proceed=False)
            async with Client(server, elicitation_callback=said_no, mode=mode) as second:  # type: ignore[arg-type]
                unticked = await call_ok(second, "kill_actor", {"actor_id": actor["actor_id"]})
            assert unticked.structured_content["done"] is False and "said no" in text_of(unticked)
            still = await call_ok(client, "get_actor", {"actor_id": actor["actor_id"]})
            assert still.structured_content["state"] == "ALIVE"
    question = user.asked[0]
    assert actor["actor_id"] in question and "ALIVE" in question
    assert "Keeper" not in question and "precious" not in question  # the id, not the cluster's names
    assert re.search(r"job [0-9a-f]{8}", question), question
    await server.app.aclose()


async def test_without_elicitation_the_confirm_token_path_is_kept(client: Client) -> None:
    sid, _ = await run_to_end(client, entrypoint="python -c \"print('token path')\"")
    dry = (await call_ok(client, "delete_job", {"job": sid})).structured_content
    assert dry["done"] is False and dry["dry_run"] is True and dry["confirm_token"]
    assert "nothing changed" in dry["message"]
    still = await call_ok(client, "get_job", {"job": sid})
    assert still.structured_content["status"] == "SUCCEEDED"
    with anyio.fail_after(60):
        done = await call_ok(client, "delete_job", {"job": sid, "confirm": dry["confirm_token"]})
    assert done.structured_content["done"] is True


def test_a_token_is_bound_to_its_cluster_target_and_instance_and_expires() -> None:
    prod = ClusterRef("prod", "http://prod-head:8265")
    pending = Pending(
        "delete_job", "raysubmit_x", "delete job raysubmit_x", instance="start_ms=1 job_id=01", cluster=prod
    )
    token = token_for(pending.binding, ttl_s=300, now=1_000)
    assert is_confirmed(pending, token, now=1_299) is True
    with pytest.raises(InvalidArgument, match="expired"):
        is_confirmed(pending, token, now=1_301)
    others = [
        replace(pending, cluster=ClusterRef("staging", "http://prod-head:8265")),  # same URL, other name
        replace(pending, cluster=ClusterRef("prod", "http://other-head:8265")),  # same name, other URL
        replace(pending, instance="start_ms=2 job_id=05"),  # a new job reusing the submission id
        replace(pending, target="raysubmit_y"),
        replace(pending, tool="kill_actor"),
    ]
    for other in others:
        with pytest.raises(InvalidArgument, match="does not match"):
            is_confirmed(other, token, now=1_001)
    forged = token.replace(token.split("-")[1], str(10**10))  # a later expiry breaks the HMAC
    with pytest.raises(InvalidArgument, match="does not match"):
        is_confirmed(pending, forged, now=1_001)
    with pytest.raises(InvalidArgument, match="does not match"):
        is_confirmed(pending, "confirm-garbage", now=1_001)


async def test_a_token_for_a_reused_submission_id_does_not_delete_the_new_job(client: Client) -> None:
    sid = f"reused-{uuid.uuid4().hex[:8]}"
    await run_to_end(client, entrypoint="echo first-incarnation", submission_id=sid)
    first = (await call_ok(client, "delete_job", {"job": sid})).structured_content
    stale = first["confirm_token"]
    fresh = (await call_ok(client, "delete_job", {"job": sid})).structured_content["confirm_token"]
    assert (await call_ok(client, "delete_job", {"job": sid, "confirm": fresh})).structured_content["done"]
    await run_to_end(client, entrypoint="echo second-incarnation", submission_id=sid)
    refused = await client.call_tool("delete_job", {"job": sid, "confirm": stale})
    assert refused.is_error and "does not match" in text_of(refused), text_of(refused)
    still = await call_ok(client, "get_job", {"job": sid})
    assert still.structured_content["entrypoint"] == "echo second-incarnation"
    dry = (await call_ok(client, "delete_job", {"job": sid})).structured_content
    assert sid in dry["message"] and "minutes" in dry["message"]
    # the question names the new incarnation (its job id and start time), not the old one
    assert dry["message"].splitlines()[0] != first["message"].splitlines()[0]


async def test_a_token_for_an_actor_does_not_kill_it_after_it_restarted(
    server: RayMCPServer, ray_cluster: Any
) -> None:
    body = """
        @ray.remote(num_cpus=0, max_restarts=-1)
        class Phoenix:
            def pid(self):
                return os.getpid()
        p = Phoenix.options(name="phoenix").remote()
        ray.get(p.pid.remote())
    """
    with driver(ray_cluster.gcs_address, body, namespace="confirm-restart"):
        async with Client(server) as client:
            found = await call_ok(client, "list_actors", {"name": "phoenix", "state": "ALIVE"})
            actor = found.structured_content["actors"][0]
            dry = (await call_ok(client, "kill_actor", {"actor_id": actor["actor_id"]})).structured_content
            assert dry["done"] is False
            token = re.search(r"confirm='([^']+)'", dry["message"]).group(1)  # type: ignore[union-attr]
            os.kill(int(actor["pid"]), signal.SIGKILL)  # the actor dies and Ray restarts it
            with anyio.fail_after(120):
                while True:
                    now = (
                        await call_ok(client, "get_actor", {"actor_id": actor["actor_id"]})
                    ).structured_content
                    if now["state"] == "ALIVE" and now.get("restarts", 0) >= 1:
                        break
                    await anyio.sleep(0.5)
            refused = await client.call_tool("kill_actor", {"actor_id": actor["actor_id"], "confirm": token})
            assert refused.is_error and "does not match" in text_of(refused), text_of(refused)
            alive = await call_ok(client, "get_actor", {"actor_id": actor["actor_id"]})
            assert alive.structured_content["state"] == "ALIVE"
    await server.app.aclose()
