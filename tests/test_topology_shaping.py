"""job_topology's pure part on constructed evidence: sizes a machine without GPUs can't hold (8 nodes, 64 ranks).

The rows have the shapes Ray 2.60's State API, GCS actor table and dashboard return (see the live test,
tests/test_topology.py, for the same join on a real cluster).
"""

from __future__ import annotations

from typing import Any

from ray_mcp.limits import TOPOLOGY_ACTORS
from ray_mcp.shaping.topology import (
    MEMORY_USAGE_THRESHOLD,
    TopologySources,
    accelerator_ids,
    build_topology,
    split_pg_resources,
)
from ray_mcp.shaping.topology_text import compress_ints, render_topology

JOB = "02000000"
GIB = 1024**3


def node_id(i: int) -> str:
    return f"{i:02x}" * 28


def pg_id(i: int) -> str:
    return f"{i:02x}" * 14 + JOB


def actor_id(i: int) -> str:
    return f"{i:024x}" + JOB


def node_rows(n: int, gpus: int = 8) -> list[dict[str, Any]]:
    return [
        {
            "node_id": node_id(i),
            "node_ip": f"10.0.0.{i + 1}",
            "state": "ALIVE",
            "is_head_node": i == 0,
            "resources_total": {
                "CPU": 32.0,
                "GPU": float(gpus),
                "memory": 256.0 * GIB,
                "object_store_memory": 64.0 * GIB,
                f"node:10.0.0.{i + 1}": 1.0,
            },
        }
        for i in range(n)
    ]


def summary(n: int, memory_fraction: dict[int, float] | None = None) -> dict[str, Any]:
    out = {}
    for i in range(n):
        frac = (memory_fraction or {}).get(i, 0.4)
        total = 256 * GIB
        out[node_id(i)] = {
            "cpu": 35.0,
            "mem": [total, int(total * (1 - frac)), frac * 100],
            "raylet": {"nodeId": node_id(i), "objectStoreUsedMemory": 2 * GIB},
            "gpus": [],
        }
    return out


def pg_row(index: int, bundles: int, per_node: int, resources: dict[str, float], name: str, state="CREATED"):
    return {
        "placement_group_id": pg_id(index),
        "name": name,
        "creator_job_id": JOB,
        "state": state,
        "bundles": [
            {
                "bundle_id": {"placement_group_id": pg_id(index), "bundle_index": b},
                "unit_resources": resources,
                "node_id": node_id(b // per_node) if state == "CREATED" else None,
            }
            for b in range(bundles)
        ],
    }


def rank_row(
    i: int,
    pg: str,
    bundle: int | None,
    node: str | None,
    state: str = "ALIVE",
    cls="TrainWorker",
    gpu: float = 1.0,
    death: dict | None = None,
) -> dict[str, Any]:
    required = {f"GPU_group_{pg}": gpu, f"CPU_group_{pg}": 1.0, f"bundle_group_{pg}": 0.001}
    if bundle is not None:
        required |= {
            f"GPU_group_{bundle}_{pg}": gpu,
            f"CPU_group_{bundle}_{pg}": 1.0,
            f"bundle_group_{bundle}_{pg}": 0.001,
        }
    return {
        "actor_id": actor_id(i),
        "class_name": cls,
        "state": state,
        "job_id": JOB,
        "name": f"rank{i}",
        "node_id": node,
        "pid": 1000 + i,
        "placement_group_id": pg,
        "required_resources": required,
        "num_restarts": "0",
        "death_cause": death,
    }


def gpu_stats(slot: int, pg: str, bundle: int) -> dict[str, Any]:
    slots = {"resourceSlots": [{"slot": str(slot), "allocation": 1.0}]}
    return {"usedResources": {f"GPU_group_{pg}": slots, f"GPU_group_{bundle}_{pg}": slots}}


WORKER_DIED = {
    "actor_died_error_context": {
        "reason": "WORKER_DIED",
        "error_message": "The actor is dead because its worker process has died. Worker exit type: "
        "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
    }
}


def training_evidence(nodes: int = 8, per_node: int = 8, dead: int | None = 13) -> TopologySources:
    ranks = nodes * per_node
    pg = pg_id(1)
    rows, stats = [], {}
    for i in range(ranks):
        rows.append(
            rank_row(
                i,
                pg,
                i,
                node_id(i // per_node),
                "DEAD" if i == dead else "ALIVE",
                death=WORKER_DIED if i == dead else None,
            )
        )
        stats[actor_id(i)] = gpu_stats(i % per_node, pg, i)
    usage = {node_id(i): {"CPU": (8.0, 32.0), "GPU": (8.0, 8.0)} for i in range(nodes)}
    return TopologySources(
        details={
            "job_id": JOB,
            "submission_id": "raysubmit_train",
            "status": "RUNNING",
            "driver_info": {"node_ip_address": "10.0.0.1", "pid": "4242"},
            "driver_node_id": node_id(0),
        },
        pg_rows=[pg_row(1, ranks, per_node, {"CPU": 1.0, "GPU": 1.0}, "trainers")],
        pg_total=1,
        strategies={pg: "PACK"},
        actor_rows=rows,
        actors_total=ranks,
        worker_stats=stats,
        node_rows=node_rows(nodes),
        usage_by_node=usage,
        node_summary=summary(nodes),
    )


def test_the_tree_of_64_ranks_on_8_nodes_fits_in_6_kb_with_exact_counts() -> None:
    topo = build_topology(training_evidence(), job="raysubmit_train")
    text = render_topology(topo)
    assert len(text.encode()) < 6 * 1024, len(text.encode())
    assert topo.actors_total == 64 and topo.actors_by_state == {"ALIVE": 63, "DEAD": 1}
    assert topo.verdict.startswith(
        "Job raysubmit_train (02000000) RUNNING: 1 placement group(s), 64 actor(s) (63 alive) on 8 node(s)"
    )
    assert "ALIVE 63, DEAD 1" in text
    # Repeated structure is grouped: node 0's 8 ranks are one line with their GPU ids.
    assert "  bundles 0-7 {1 CPU, 1 GPU} on n1: 8× TrainWorker, ALIVE, 1 GPU each; ids GPU 0-7" in text
    # Node 1 is split around the dead rank 13.
    assert "  bundles 8-12 {1 CPU, 1 GPU} on n2: 5× TrainWorker, ALIVE, 1 GPU each; ids GPU 0-4" in text
    assert (
        f"  bundle 13 {{1 CPU, 1 GPU}} on n2: TrainWorker, DEAD, 1 GPU; ids GPU 5 [rank13 {actor_id(13)}"
        in text
    )
    assert "  bundles 14-15 {1 CPU, 1 GPU} on n2: 2× TrainWorker, ALIVE, 1 GPU each; ids GPU 6-7" in text
    dead = [g for g in topo.gaps if g.kind == "dead_rank"]
    assert [(g.bundle_index, g.actor_id) for g in dead] == [(13, actor_id(13))]
    assert "WORKER_DIED" in dead[0].text
    (short,) = [g for g in topo.gaps if g.kind == "short_group"]
    assert "63 live actor(s) for 64 bundles" in short.text
    assert len(topo.nodes) == 8 and all(n.job_share == {"CPU": 8.0, "GPU": 8.0} for n in topo.nodes)


def test_a_healthy_group_has_no_gaps_and_says_so() -> None:
    topo = build_topology(training_evidence(dead=None), job="raysubmit_train")
    assert topo.gaps == [] and topo.verdict.endswith("no gaps found.")


def test_an_unplaced_group_lists_its_bundles_as_unplaced() -> None:
    ev = training_evidence(nodes=1, per_node=4, dead=None)
    ev.pg_rows = [pg_row(1, 4, 4, {"GPU": 1.0}, "trainers", state="PENDING")]
    ev.actor_rows = []
    topo = build_topology(ev, job="j")
    assert [g.kind for g in topo.gaps].count("unplaced_bundle") == 4
    assert "short_group" not in {g.kind for g in topo.gaps}  # a PENDING group is reported as unplaced


def test_a_gpu_node_without_actors_of_the_job_is_a_gap() -> None:
    ev = training_evidence(nodes=2, per_node=4, dead=None)
    ev.node_rows = node_rows(3)  # a third GPU node the job does not use
    ev.usage_by_node = {node_id(2): {"GPU": (0.0, 8.0)}}
    topo = build_topology(ev, job="j")
    (idle,) = [g for g in topo.gaps if g.kind == "idle_gpu_node"]
    assert idle.node_id == node_id(2) and "0/8 GPUs in use" in idle.text


def test_memory_pressure_is_flagged_at_rays_memory_monitor_threshold() -> None:
    assert MEMORY_USAGE_THRESHOLD == 0.95
    ev = training_evidence(nodes=2, per_node=2, dead=None)
    ev.node_summary = summary(2, {1: 0.97})
    topo = build_topology(ev, job="j")
    flags = {n.node_id: n.memory_pressure for n in topo.nodes}
    assert flags == {node_id(0): False, node_id(1): True}
    assert [g.node_id for g in topo.gaps if g.kind == "memory_pressure"] == [node_id(1)]
    assert "MEMORY PRESSURE" in render_topology(topo)


def test_an_actor_asking_for_any_bundle_is_placed_where_ray_put_it() -> None:
    ev = training_evidence(nodes=1, per_node=2, dead=None)
    pg = pg_id(1)
    ev.actor_rows = [rank_row(0, pg, 0, node_id(0)), rank_row(1, pg, None, node_id(0), cls="Rollout", gpu=0)]
    slot = {"resourceSlots": [{"slot": "0", "allocation": 0.001}]}
    ev.worker_stats = {actor_id(1): {"usedResources": {f"bundle_group_1_{pg}": slot}}}
    topo = build_topology(ev, job="j")
    rollout = next(a for a in topo.actors if a.class_name == "Rollout")
    assert (rollout.bundle_index, rollout.any_bundle) == (1, True)
    assert not [g for g in topo.gaps if g.kind in ("empty_bundle", "short_group")]


def test_serve_apps_of_another_jobs_controller_are_unattributed() -> None:
    ev = training_evidence(nodes=1, per_node=1, dead=None)
    ev.serve_details = {"applications": {"llm": {"status": "RUNNING", "deployments": {}}}}
    ev.serve_controller_job_id = "09000000"
    topo = build_topology(ev, job="j")
    assert topo.serve is not None and not topo.serve.attributed
    assert "Unattributed" in topo.serve.how and "09000000" in topo.serve.how
    assert "Serve: Unattributed" in render_topology(topo)


def test_the_structured_actor_list_is_capped_with_exact_counts() -> None:
    ev = training_evidence(nodes=40, per_node=32, dead=None)  # 1,280 ranks
    topo = build_topology(ev, job="j")
    assert topo.actors_total == 1280 and len(topo.actors) == TOPOLOGY_ACTORS
    assert any(f"capped at {TOPOLOGY_ACTORS:,}" in n for n in topo.notes) and topo.hints
    assert len(render_topology(topo).encode()) <= 12 * 1024


def test_pg_formatted_resources_give_the_bundle_index_and_rays_names() -> None:
    pg = pg_id(3)
    resources, index = split_pg_resources(
        {
            f"GPU_group_2_{pg}": 1.0,
            f"GPU_group_{pg}": 1.0,
            f"bundle_group_{pg}": 0.001,
            f"bundle_group_2_{pg}": 0.001,
        }
    )
    assert (resources, index) == ({"GPU": 1.0}, 2)
    assert split_pg_resources({"CPU": 1.0}) == ({"CPU": 1.0}, None)
    used = {
        f"GPU_group_{pg}": {"resourceSlots": [{"slot": "3"}, {"slot": "1"}]},
        "CPU": {"resourceSlots": []},
    }
    assert accelerator_ids(used) == {"GPU": ["1", "3"]}
    assert compress_ints([5, 0, 1, 2, 3, 7]) == "0-3,5,7"
