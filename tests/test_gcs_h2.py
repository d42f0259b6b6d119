"""gcs_h2: the GCS reads a fresh server makes before Ray is imported answer exactly what Ray's own channel does.

Against Ray's generated protobuf modules (the wire reader) and the session's real GCS (the calls, the lookup,
and pg_status in a fresh server process, first call against warm, with groups in every state it can show).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import Cluster
from tests.state_drivers import driver
from tests.support import fresh_answers

from ray_mcp.ray_api import gcs, gcs_h2

# Placement groups in every state pg_status tells apart, with every strategy: created, pending on resources it
# could get, infeasible, removed. Not detached: they go with the driver.
GROUPS = """
created = placement_group([{"CPU": 0.01}], strategy="STRICT_PACK", name="h2-created")
ray.get(created.ready())
removed = placement_group([{"CPU": 0.01}], strategy="PACK", name="h2-removed")
ray.get(removed.ready())
ray.util.remove_placement_group(removed)
spread = placement_group([{"CPU": 0.01}] * 3, strategy="STRICT_SPREAD", name="h2-strict-spread")
infeasible = placement_group([{"GPU": 8}], strategy="SPREAD", name="h2-infeasible")
time.sleep(1)
"""


def test_the_enum_names_are_rays() -> None:
    from ray.core.generated import common_pb2, gcs_pb2

    assert tuple(common_pb2.PlacementStrategy.keys()) == gcs_h2.STRATEGIES  # type: ignore[attr-defined]
    states = gcs_pb2.PlacementGroupTableData.PlacementGroupState  # type: ignore[attr-defined]
    assert tuple(sorted(states.keys(), key=states.Value)) == gcs_h2.PG_STATES
    assert list(states.values()) == list(range(len(gcs_h2.PG_STATES)))


ids = st.binary(max_size=28)
group = st.fixed_dictionaries(
    {
        "placement_group_id": ids,
        "name": st.text(max_size=30),
        "strategy": st.integers(0, 3),
        "state": st.integers(0, 4),
        "creator_job_id": ids,
        "creator_actor_id": ids,
        "is_detached": st.booleans(),
        "ray_namespace": st.text(max_size=10),
        "bundles": st.lists(
            st.dictionaries(st.sampled_from(["CPU", "GPU", "memory"]), st.floats(0, 64)), max_size=3
        ),
        "scheduling_state": st.integers(0, 5),
        "created_ms": st.integers(0, 2**62),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups=st.lists(group, max_size=8), total=st.integers(0, 2**40), code=st.just(0))
def test_the_wire_reader_reads_every_group_as_rays_own_modules_do(
    groups: list[dict], total: int, code: int
) -> None:
    from ray.core.generated import gcs_service_pb2

    reply = gcs_service_pb2.GetAllPlacementGroupReply(total=total)  # type: ignore[attr-defined]
    reply.status.code = code
    for g in groups:
        d = reply.placement_group_table_data.add()
        d.placement_group_id, d.name, d.strategy, d.state = (
            g["placement_group_id"],
            g["name"],
            g["strategy"],
            g["state"],
        )
        d.creator_job_id, d.creator_actor_id, d.is_detached = (
            g["creator_job_id"],
            g["creator_actor_id"],
            g["is_detached"],
        )
        d.ray_namespace, d.placement_group_creation_timestamp_ms = g["ray_namespace"], g["created_ms"]
        d.stats.scheduling_state = g["scheduling_state"]
        for i, resources in enumerate(g["bundles"]):
            b = d.bundles.add()
            b.bundle_id.bundle_index = i
            for k, v in resources.items():
                b.unit_resources[k] = v
    data = reply.SerializeToString()
    assert gcs_h2.placement_group_rows(data) == gcs.placement_group_table_rows(
        gcs_service_pb2.GetAllPlacementGroupReply.FromString(data)  # type: ignore[attr-defined]
    )


resource_ids = st.lists(
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=True)), max_size=3
)
address = st.fixed_dictionaries(
    {"worker_id": ids, "node_id": ids, "ip": st.text(max_size=15), "port": st.integers(0, 65535)}
)
actor = st.fixed_dictionaries(
    {
        "actor_id": ids,
        "address": address,
        "owner": address,
        "state": st.integers(0, 4),
        "class_name": st.text(max_size=20),
        "mapping": st.lists(
            st.tuples(st.sampled_from(["CPU", "GPU", "TPU", "custom"]), resource_ids), max_size=3
        ),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actors=st.lists(actor, max_size=6), total=st.integers(0, 2**40))
def test_the_wire_reader_reads_every_actor_as_rays_own_modules_do(actors: list[dict], total: int) -> None:
    from ray.core.generated import gcs_service_pb2

    reply = gcs_service_pb2.GetAllActorInfoReply(total=total, num_filtered=total)  # type: ignore[attr-defined]
    for a in actors:
        d = reply.actor_table_data.add()
        d.actor_id, d.state, d.class_name = a["actor_id"], a["state"], a["class_name"]
        for target, given_address in ((d.address, a["address"]), (d.owner_address, a["owner"])):
            target.worker_id, target.node_id = given_address["worker_id"], given_address["node_id"]
            target.ip_address, target.port = given_address["ip"], given_address["port"]
        for name, slots in a["mapping"]:
            entry = d.resource_mapping.add()
            entry.name = name
            for index, quantity in slots:
                rid = entry.resource_ids.add()
                rid.index, rid.quantity = index, quantity
    data = reply.SerializeToString()
    assert gcs_h2.job_actor_rows(data) == gcs.job_actor_table_rows(
        gcs_service_pb2.GetAllActorInfoReply.FromString(data)  # type: ignore[attr-defined]
    )


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_a_malformed_reply_fails_as_grpc_failed_and_nothing_else(data: bytes) -> None:
    for read in (gcs_h2.placement_group_rows, gcs_h2.job_actor_rows, gcs_h2.kv_value):
        with contextlib.suppress(gcs_h2.GrpcFailed):
            read(data)


def test_a_reply_with_an_error_status_fails() -> None:
    from ray.core.generated import gcs_service_pb2

    reply = gcs_service_pb2.GetAllPlacementGroupReply()  # type: ignore[attr-defined]
    reply.status.code, reply.status.message = 5, "not found: something"
    reply.placement_group_table_data.add().name = "x"
    with pytest.raises(gcs_h2.GrpcFailed, match="status 5: not found"):
        gcs_h2.placement_group_rows(reply.SerializeToString())


async def test_the_calls_and_the_lookup_answer_what_rays_channel_answers(ray_cluster: Cluster) -> None:
    address = ray_cluster.gcs_address
    with driver(address, GROUPS, namespace="gcs-h2"):
        assert address is not None
        channel = gcs.open_channel(address, None)
        try:
            rays = await anyio.to_thread.run_sync(gcs.placement_group_table, channel, 10.0)
        finally:
            channel.close()
        ours = await gcs_h2.placement_group_table(address, None, 10.0)
        assert ours == rays
        names = {r["name"]: (r["state"], r["strategy"]) for r in ours}
        assert names["h2-created"] == ("CREATED", "STRICT_PACK")
        assert names["h2-removed"] == ("REMOVED", "PACK")
        assert names["h2-strict-spread"] == ("PENDING", "STRICT_SPREAD")  # one node: 3 bundles cannot spread
        assert names["h2-infeasible"] == ("PENDING", "SPREAD")
    reported = await gcs_h2.reported_dashboard(address, None, 10.0)
    assert reported == await anyio.to_thread.run_sync(gcs.reported_dashboard, address, 10.0, None)
    found = await gcs_h2.find_gcs_for_dashboard(ray_cluster.dashboard_url, None, 5.0)
    assert found == await anyio.to_thread.run_sync(
        gcs.find_gcs_for_dashboard, ray_cluster.dashboard_url, 10.0
    )
    assert found is not None and found.rsplit(":", 1)[1] == address.rsplit(":", 1)[1]


async def test_a_call_that_cannot_be_answered_fails_within_its_timeout(ray_cluster: Cluster) -> None:
    address = ray_cluster.gcs_address
    if address is None:
        pytest.skip("needs the session's own cluster (GCS address)")
    with pytest.raises(gcs_h2.GrpcFailed, match="gRPC status 12"):  # UNIMPLEMENTED
        await gcs_h2.unary(address, "/ray.rpc.NoSuchService/Nothing", b"", authorization=None, timeout_s=10)
    dashboard = ray_cluster.dashboard_url.split("//", 1)[1]  # HTTP/1.1 only
    with pytest.raises(gcs_h2.GrpcFailed):
        await gcs_h2.unary(dashboard, gcs_h2.PG_TABLE_METHOD, b"", authorization=None, timeout_s=5)
    # Nothing listening, and a listener that never answers: both end within the timeout, as GrpcFailed.
    held: list[asyncio.StreamWriter] = []  # open, never written to
    silent = await asyncio.start_server(lambda _r, w: held.append(w), "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    try:
        started = time.monotonic()
        with pytest.raises(gcs_h2.GrpcFailed, match=r"did not answer within 0\.5 s"):
            await gcs_h2.placement_group_table(f"127.0.0.1:{port}", None, 0.5)
        assert time.monotonic() - started < 2
    finally:
        silent.close()
        for w in held:
            w.close()
    with pytest.raises(gcs_h2.GrpcFailed):
        await gcs_h2.placement_group_table(f"127.0.0.1:{port}", None, 2)
    assert await gcs_h2.find_gcs_for_dashboard(f"http://127.0.0.1:{port}", None, 1.0) is None


@pytest.mark.parametrize("given", ["dashboard", "gcs"])
async def test_a_fresh_servers_pg_status_answers_without_ray_exactly_as_rays_path_does(
    ray_cluster: Cluster, given: str
) -> None:
    """Given the dashboard (the GCS found over gcs_h2) or the GCS (its dashboard asked over gcs_h2)."""
    cases: list[dict[str, Any]] = [
        {},
        {"state": "PENDING"},
        {"placement_group": "h2-strict-spread"},
        {"limit": 1},
        {"state": "CREATED", "limit": 2},
    ]
    address = ray_cluster.dashboard_url if given == "dashboard" else ray_cluster.gcs_address
    with driver(ray_cluster.gcs_address, GROUPS, namespace=f"gcs-h2-fresh-{given}"):
        out = await fresh_answers(str(address), "pg_status", cases)
    for entry in out:
        assert not entry["error"], entry
        assert entry["ray_before"] is False, entry["args"]  # answered before Ray was imported
        assert entry["first"] == entry["warm"], entry["args"]
        assert entry["text"] == entry["warm_text"], entry["args"]
    spread = out[2]["first"]["placement_groups"][0]
    assert spread["strategy"] == "STRICT_SPREAD" and spread["state"] == "PENDING", spread
    assert "Strategies unknown" not in out[0]["text"]
    assert set(out[0]["first"]["by_state"]) >= {"CREATED", "PENDING", "REMOVED"}, out[0]["first"]


def test_the_local_gcs_scan_finds_what_rays_does(ray_cluster: Cluster) -> None:
    from ray._private.services import find_gcs_addresses

    rays = sorted(f"127.0.0.1:{a.rsplit(':', 1)[1]}" for a in find_gcs_addresses())
    assert gcs_h2.local_gcs_addresses() == rays
    if ray_cluster.gcs_address is not None:
        assert any(a.endswith(":" + ray_cluster.gcs_address.rsplit(":", 1)[1]) for a in rays)


def test_tls_leaves_it_to_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_USE_TLS", "1")
    assert not gcs_h2.usable()
    monkeypatch.setenv("RAY_USE_TLS", "0")
    assert gcs_h2.usable()


def test_the_process_scan_runs_without_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where there is no /proc (macOS), psutil reads the command lines."""
    real = gcs_h2.os.path.isdir
    monkeypatch.setattr(gcs_h2.os.path, "isdir", lambda p: False if p == "/proc/self" else real(p))
    from ray._private.services import find_gcs_addresses

    assert gcs_h2.local_gcs_addresses() == sorted(
        f"127.0.0.1:{a.rsplit(':', 1)[1]}" for a in find_gcs_addresses()
    )
