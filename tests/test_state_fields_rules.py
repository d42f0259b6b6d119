"""The newer State API fields, without a cluster: a fallback_strategy's selectors in Ray's forms, and why work
whose label selector no node meets waits (or runs where its fallback allows)."""

from __future__ import annotations

from ray_mcp import models
from ray_mcp.diagnosis.graph import Graph, GraphInputs
from ray_mcp.diagnosis.rules.placement import constrained_wait, fallback_selectors
from ray_mcp.shaping.placement_groups import placement_group_from_state, render_pg_list

NODE = {"node_id": "a" * 56, "state": "ALIVE", "labels": {"zone": "a"}, "resources_total": {"CPU": 2.0}}


def test_fallback_selectors_read_ray_s_plain_and_constraint_forms() -> None:
    assert fallback_selectors([{"label_selector": {"zone": "b"}}]) == [{"zone": "b"}]
    constraints = {
        "options": [
            {
                "label_selector": {
                    "label_constraints": [
                        {"label_key": "zone", "operator": "LABEL_OPERATOR_NOT_IN", "label_values": ["x", "y"]}
                    ]
                }
            }
        ]
    }
    assert fallback_selectors(constraints) == [{"zone": "!in(x,y)"}]
    assert fallback_selectors(None) == [] and fallback_selectors("junk") == []


def test_a_selector_no_node_meets_names_its_fallback_and_a_fallback_that_fits_is_where_it_may_run() -> None:
    g = Graph(GraphInputs(nodes=[NODE], actors=[], tasks=[]))
    row = {
        "label_selector": {"zone": "nowhere"},
        "fallback_strategy": [{"label_selector": {"zone": "elsewhere"}}],
    }
    links = constrained_wait(g, "actor Picky", row, "actor:1")
    assert links[0].say.name == "label_fallback" and links[0].say.infeasible
    assert "elsewhere" in links[0].text and "zone=a" in links[0].text
    fits = {**row, "fallback_strategy": [{"label_selector": {"zone": "a"}}], "required_resources": {"CPU": 1}}
    assert constrained_wait(g, "actor Picky", fits, "actor:1")[0].say.name == "label_fallback_used"


def test_a_label_locality_group_shows_its_topology_and_bundle_selectors() -> None:
    row = {
        "placement_group_id": "f" * 36,
        "state": "PENDING",
        "bundles": [
            {"bundle_id": {"bundle_index": 0}, "unit_resources": {"CPU": 1}, "label_selector": {"zone": "a"}}
        ],
        "topology_strategy": {"ray.io/gpu-domain": "STRICT_PACK"},
        "topology_assignments": {},
    }
    pg = placement_group_from_state(row, strategy="PACK")
    assert pg.topology_strategy == {"ray.io/gpu-domain": "STRICT_PACK"} and pg.topology_assignments is None
    assert pg.bundles[0].label_selector == {"zone": "a"}
    page = models.PlacementGroupList(total=1, matched=1, shown=1, placement_groups=[pg])
    text = render_pg_list(page)
    assert "STRICT_PACK" in text and "no label value assigned yet" in text and "zone=a" in text


def test_restarts_after_node_preemption_are_not_a_restart_loop() -> None:
    from ray_mcp.diagnosis.graph import failure_restarts

    actor = {"num_restarts": 5, "num_restarts_due_to_node_preemption": 4}
    assert failure_restarts(actor) == 1 and failure_restarts({"num_restarts": 3}) == 3
    from ray_mcp.shaping.actors import actor_from_state, render_actor

    shown = actor_from_state(
        {"actor_id": "a" * 32, "class_name": "A", "state": "ALIVE", **actor, "fallback_strategy": [{"x": 1}]},
        detail=True,
    )
    assert shown._restarts_preempted == 4 and "4 after node preemption, 1 after failures" in render_actor(
        shown
    )
