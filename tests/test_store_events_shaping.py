"""The object store and cluster events answers, shaped from records in the dashboard's own form (no Ray head)."""

from __future__ import annotations

from typing import Any

from ray_mcp.diagnosis.explain import explain_cluster
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.shaping.events import EventFilter, build_event_list, render_event_list
from ray_mcp.shaping.objects import Owners, build_object_store, render_object_store, store_nodes

MIB = 1024**2
NODE = "ab" * 28


def node(used: int, **stats: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = [
        {
            "node_id": NODE,
            "node_ip": "10.0.0.1",
            "state": "ALIVE",
            "resources_total": {"object_store_memory": 100 * MIB},
        }
    ]
    raylet = {"nodeId": NODE, "objectStoreUsedMemory": used, "storeStats": stats}
    return rows, {"summary": [{"raylet": raylet}]}


def obj(
    i: int, pid: int, size: int, site: str, ref: str = "LOCAL_REFERENCE", kind: str = "DRIVER"
) -> dict[str, Any]:
    return {
        "object_id": f"{i:040x}",
        "object_size": size,
        "reference_type": ref,
        "call_site": site,
        "type": kind,
        "pid": pid,
        "ip": "10.0.0.1",
    }


def test_a_spilling_store_names_its_largest_holder_and_a_leak() -> None:
    stores = store_nodes(*node(92 * MIB, spilledBytesTotal=str(300 * MIB), spilledObjectsTotal="30"))
    assert (
        stores[0].fraction == 0.92
        and stores[0].spilled_bytes == 300 * MIB
        and stores[0].restored_bytes == 0  # protobuf JSON leaves out counters that are 0
    )
    objects = [obj(i, 11, 10 * MIB, "train.py:12 ray.put") for i in range(8)]
    objects += [obj(100, 22, 5 * MIB, "keeper.py:3 ray.put", kind="WORKER")]
    objects += [obj(0, 22, 10 * MIB, "keeper.py:9", ref="USED_BY_PENDING_TASK", kind="WORKER")]  # a borrower
    owners = Owners.of(
        workers=[{"ip": "10.0.0.1", "pid": 22, "is_alive": True}],
        actors=[
            {
                "pid": 22,
                "node_ip": "10.0.0.1",
                "class_name": "Keeper",
                "actor_id": "c" * 32,
                "job_id": "02000000",
                "state": "ALIVE",
            }
        ],
        jobs=[
            {
                "job_id": "01000000",
                "status": "RUNNING",
                "driver_info": {"pid": "11", "node_ip_address": "10.0.0.1"},
            },
            {"job_id": "02000000", "status": "SUCCEEDED"},
        ],
    )
    s = build_object_store(stores=stores, objects=objects, owners=owners, limit=1, notes=[])
    assert s.objects == 9 and s.bytes == 85 * MIB  # distinct objects: the borrowed one counts once
    assert [g.objects for g in s.groups] == [8] and "driver pid 11" in s.groups[0].owner
    assert s.groups[0].job_id == "01000000" and s.leaks == 2
    assert "92% full" in s.verdict and "spilled 300 MiB in 30 objects" in s.verdict and "Keeper" in s.verdict
    assert any("larger limit" in h for h in s.hints) and "LEAK" not in render_object_store(s)
    chain = explain_cluster(GraphInputs(now_ms=1.0, store=s.model_dump(mode="json")))[0]
    assert (
        chain.kind == "object_store"
        and "near full" in chain.cause
        and "driver pid 11" in chain.links[0].quote
    )


def test_a_store_with_room_says_so_and_raises_no_finding() -> None:
    s = build_object_store(stores=store_nodes(*node(MIB)), objects=[], owners=Owners(), limit=5, notes=[])
    assert (
        "none near full, nothing spilled" in s.verdict
        and explain_cluster(GraphInputs(now_ms=1.0, store=s.model_dump(mode="json"))) == []
    )


def event(
    ts: int, message: str, severity: str = "INFO", source: str = "RAYLET", **fields: str
) -> dict[str, Any]:
    return {
        "timestamp": ts,
        "message": message,
        "severity": severity,
        "source_type": source,
        "custom_fields": fields,
    }


def test_events_are_filtered_deduplicated_and_newest_first() -> None:
    rows = [event(100 + i, f"Worker {1000 + i} died of OOM", "ERROR", node_id=NODE) for i in range(5)]
    rows += [event(50, "Started a ray job raysubmit_x.", source="JOBS", submission_id="raysubmit_x")]
    rows += [event(200, "Node added", "INFO", "GCS")]
    every = build_event_list(rows, EventFilter(), limit=10, notes=[])
    assert [e.message for e in every.events] == [
        "Node added",
        "Worker 1004 died of OOM",
        "Started a ray job raysubmit_x.",
    ]
    assert every.events[1].count == 5 and every.events[1].first_time and every.matched == 7
    errors = build_event_list(rows, EventFilter(severity="WARNING"), limit=10, notes=[])
    assert errors.matched == 5 and errors.shown == 1 and errors.events[0].node == NODE
    assert build_event_list(rows, EventFilter(submission_id="raysubmit_x"), limit=10, notes=[]).matched == 1
    assert build_event_list(rows, EventFilter(source="GCS", since=150), limit=10, notes=[]).matched == 1
    one = build_event_list(rows, EventFilter(), limit=1, notes=[])
    assert one.shown == 1 and "2 older distinct messages" in one.hints[0]
    assert "x5 since" in render_event_list(every)


def deployment(
    message: str = "",
    states: tuple[str, ...] = ("RUNNING", "RUNNING", "STARTING"),
    target: int = 3,
    **auto: Any,
) -> dict[str, Any]:
    return {
        "name": "Wide",
        "status": "UPSCALING",
        "message": message,
        "target_num_replicas": target,
        "required_resources": {"CPU": 1},
        "deployment_config": {"autoscaling_config": auto},
        "replicas": [{"replica_id": str(i), "state": s} for i, s in enumerate(states)],
    }


def test_serve_scaling_says_why_fewer_replicas_run_than_the_target() -> None:
    from ray_mcp.shaping.serve import serve_deployment

    starting = serve_deployment(deployment(max_replicas=3, target_ongoing_requests=2))
    assert starting.scaling == (
        '1 replica(s) STARTING, each needs {"CPU": 1}; at max_replicas=3: more load queues instead of adding '
        "replicas; target_ongoing_requests=2 per replica"
    )
    waited = (
        "Deployment 'Wide' in application 'w' has 1 replicas that have taken more than 30s to be scheduled. "
    )
    waited += "This may be ... Resources required for each replica: {'CPU': 1}, total resources available: {'CPU': 0.0}. "
    unscheduled = serve_deployment(deployment(waited)).scaling or ""
    assert unscheduled.startswith(
        "1 replica(s) unscheduled for over 30 s: each needs {'CPU': 1}, the cluster has {'CPU': 0.0}"
    )
    down = serve_deployment(
        deployment(states=("RUNNING",) * 3, target=1, downscale_delay_s=600, min_replicas=1)
    )
    assert down.scaling == "downscaling to 1 (after downscale_delay_s=600); at min_replicas=1"
    assert (
        serve_deployment(deployment(states=("RUNNING",) * 3, min_replicas=1, max_replicas=5)).scaling is None
    )


def test_cluster_status_carries_the_autoscalers_decisions() -> None:
    from ray_mcp.shaping.cluster import build_cluster_status, render_cluster_status, with_decisions

    status = build_cluster_status(
        dashboard_url="http://h",
        source="external",
        version={},
        nodes=[],
        status={},
        pending_placement_groups=0,
        max_nodes=5,
    )
    decision = (
        "2026-01-01 00:00:00 ERROR: Failed to launch 2 node(s) of type gpu: InsufficientInstanceCapacity"
    )
    with_decisions(status, [decision], ["a note"])
    assert status.autoscaler is not None and status.autoscaler.decisions == [decision]
    assert any("failed to launch" in h for h in status.hints) and status.notes == ["a note"]
    assert decision in render_cluster_status(status)
