from __future__ import annotations

import json
import re
import uuid
from typing import Any

import anyio
from mcp import Client
from tests.support import call, mcp_client, text_of

from ray_mcp.answers import RayAPI
from ray_mcp.models import Actor, ActorKill, ActorList
from ray_mcp.settings import Settings
from state_drivers import driver

ACTORS = """
@ray.remote(num_cpus=0)
class Keeper:
    def ping(self):
        return os.getpid()

@ray.remote(num_cpus=0)
class BrokenInit:
    def __init__(self):
        raise ValueError("cannot open /data/model.bin")
    def ping(self):
        return 1

@ray.remote(num_cpus=0)
class Quitter:
    def quit(self):
        os._exit(1)

keeper = Keeper.options(name="keeper", lifetime="detached").remote()
ray.get(keeper.ping.remote())
broken = BrokenInit.remote()
try:
    ray.get(broken.ping.remote(), timeout=60)
except Exception:
    pass
quitter = Quitter.remote()
try:
    ray.get(quitter.quit.remote(), timeout=60)
except Exception:
    pass
"""


async def actors_of(client: Client, namespace: str, **args: Any) -> tuple[ActorList, str]:
    result = await call(client, "list_actors", namespace=namespace, **args)
    return ActorList.model_validate(result.structured_content), text_of(result)


async def test_list_actors_shows_death_causes_and_kill_actor_stops_a_detached_actor(
    client: Client, ray_cluster
) -> None:
    namespace = f"mcp-test-{uuid.uuid4().hex[:8]}"
    with driver(ray_cluster.gcs_address, ACTORS, namespace):
        with anyio.fail_after(60):
            while True:
                page, text = await actors_of(client, namespace)
                if page.by_state.get("DEAD") == 2 and page.by_state.get("ALIVE") == 1:
                    break
                await anyio.sleep(0.5)
        assert page.matched == 3 and page.shown == 3 and page.total >= 3
        by_class = {a.class_name: a for a in page.actors}
        keeper, broken, quitter = by_class["Keeper"], by_class["BrokenInit"], by_class["Quitter"]
        assert keeper.state == "ALIVE" and keeper.name == "keeper" and keeper.pid and keeper.restarts == 0
        assert keeper.node_id and len(keeper.node_id) == 56 and keeper.death_cause is None
        # The exception raised in __init__: type, message and the traceback's end.
        assert broken.state == "DEAD" and broken.death_cause is not None
        assert broken.death_cause.reason == "CREATION_TASK_ERROR"
        assert broken.death_cause.error_type == "ValueError"
        assert broken.death_cause.message == "cannot open /data/model.bin"
        exception = broken.death_cause.exception or ""
        assert 'File "<string>", line' in exception and "in __init__" in exception and "^^^" not in exception
        # os._exit(1): the worker died.
        assert quitter.death_cause is not None and quitter.death_cause.reason == "WORKER_DIED"
        assert "worker process has died" in (quitter.death_cause.message or "")
        assert "ValueError: cannot open /data/model.bin" in text and "WORKER_DIED" in text
        assert keeper.actor_id in text and "null" not in json.dumps(page.model_dump(exclude_none=True))
        # Filters narrow with exact counts; restarts are numbers, not int64 strings.
        dead, _ = await actors_of(client, namespace, state="DEAD")
        assert dead.matched == 2 and {a.state for a in dead.actors} == {"DEAD"}
        # A page smaller than the match: the totals per state are counted apart (the State API's summary),
        # with the same filters, and agree with the full page.
        part, _ = await actors_of(client, namespace, limit=1)
        assert part.shown == 1 and part.matched == 3 and part.by_state == page.by_state
        part_dead, _ = await actors_of(client, namespace, state="dead", limit=1)
        assert part_dead.shown == 1 and part_dead.by_state == {"DEAD": 2}
        counts, _ = await actors_of(client, namespace, limit=0)
        assert counts.shown == 0 and counts.matched == 3 and counts.by_state == page.by_state
        one, _ = await actors_of(client, namespace, class_name="BrokenInit")
        assert one.matched == 1 and one.actors[0].actor_id == broken.actor_id
        detail, _ = await actors_of(client, namespace, detail=True, name="keeper")
        assert detail.actors[0].is_detached is True and detail.actors[0].namespace == namespace

        full = Actor.model_validate(
            (await call(client, "get_actor", actor_id=broken.actor_id)).structured_content
        )
        assert full.death_cause and "Traceback" in (full.death_cause.exception or "") and full.job_id
        part_job, _ = await actors_of(client, namespace, job=full.job_id, limit=1)
        assert part_job.shown == 1 and part_job.by_state == page.by_state

        # kill_actor: a detached actor is refused without force; then dry run, then confirm.
        refused = await client.call_tool("kill_actor", {"actor_id": keeper.actor_id})
        assert refused.is_error and "detached" in text_of(refused) and "force=true" in text_of(refused)
        dry = await call(client, "kill_actor", actor_id=keeper.actor_id, force=True)
        dry_model = ActorKill.model_validate(dry.structured_content)
        assert not dry_model.done and "Not done yet" in text_of(dry)
        still, _ = await actors_of(client, namespace, name="keeper")
        assert still.actors[0].state == "ALIVE"
        token = re.search(r"confirm='([^']+)'", text_of(dry))
        assert token
        wrong = await client.call_tool(
            "kill_actor", {"actor_id": keeper.actor_id, "force": True, "confirm": "x"}
        )
        assert wrong.is_error and "does not match" in text_of(wrong)
        done = await call(client, "kill_actor", actor_id=keeper.actor_id, force=True, confirm=token.group(1))
        killed = ActorKill.model_validate(done.structured_content)
        assert killed.done and killed.state_before == "ALIVE" and killed.state_after == "DEAD"
        gone = Actor.model_validate(
            (await call(client, "get_actor", actor_id=keeper.actor_id)).structured_content
        )
        assert gone.state == "DEAD" and gone.death_cause is not None
        again = await call(client, "kill_actor", actor_id=keeper.actor_id, force=True)
        assert "already DEAD" in text_of(again)


async def test_actor_tools_reject_bad_ids_and_clamp_limits(client: Client) -> None:
    unknown = await client.call_tool("get_actor", {"actor_id": "f" * 32})
    assert unknown.is_error and "No actor" in text_of(unknown) and "list_actors" in text_of(unknown)
    malformed = await client.call_tool("get_actor", {"actor_id": "not-an-id"})
    assert malformed.is_error and "32 lowercase hex" in text_of(malformed)
    bad_kill = await client.call_tool("kill_actor", {"actor_id": "1234"})
    assert bad_kill.is_error and "is not an actor id" in text_of(bad_kill)
    bad_job = await client.call_tool("list_actors", {"job": "zz"})
    assert bad_job.is_error and "job id" in text_of(bad_job)
    counts = await call(client, "list_actors", limit=0)
    page = ActorList.model_validate(counts.structured_content)
    assert page.shown == 0 and any("counts only" in n for n in page.notes)
    huge = await call(client, "list_actors", limit=10**9)
    page = ActorList.model_validate(huge.structured_content)
    assert any("clamped to 1,000" in n for n in page.notes)
    negative = await client.call_tool("list_actors", {"limit": -1})
    assert negative.is_error


async def test_kill_actor_without_a_reachable_gcs_says_what_it_needs_and_changes_nothing(ray_cluster) -> None:
    """A dashboard reached alone (a port-forward, KubeRay's service proxy): reads still answer, but killing an
    actor goes through the GCS (the dashboard has no route for it), so the call says so."""
    namespace = f"mcp-test-{uuid.uuid4().hex[:8]}"
    settings = Settings(address=ray_cluster.dashboard_url, allow_destructive=True)
    with driver(ray_cluster.gcs_address, ACTORS, namespace):
        async with mcp_client(settings, gcs_lookup=None) as alone:
            with anyio.fail_after(60):
                while True:
                    page, _ = await actors_of(alone, namespace, name="keeper")
                    if page.actors and page.actors[0].state == "ALIVE":
                        break
                    await anyio.sleep(0.5)
            keeper = page.actors[0]
            dry = await call(alone, "kill_actor", actor_id=keeper.actor_id, force=True)
            token = re.search(r"confirm='([^']+)'", text_of(dry))
            assert token, text_of(dry)
            result = await alone.call_tool(
                "kill_actor", {"actor_id": keeper.actor_id, "force": True, "confirm": token.group(1)}
            )
            text = text_of(result)
            assert result.is_error and "No GCS found for the dashboard" in text and "--address" in text, text
            still, _ = await actors_of(alone, namespace, name="keeper")
            assert still.actors[0].state == "ALIVE"
        api = RayAPI(ray_cluster.dashboard_url, timeout_s=30, gcs_address=ray_cluster.gcs_address)
        try:  # the detached keeper would outlive the test: killed where the GCS is known
            killed = await api.actors.kill(keeper, no_restart=True)
        finally:
            await api.aclose()
        assert killed.done and killed.state_after == "DEAD", killed
