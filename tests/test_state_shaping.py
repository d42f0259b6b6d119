"""Pure shaping of cluster state (no Ray): budgets, exact totals, death causes, pending explanations, Serve."""

from __future__ import annotations

import json

import pytest
from tests.support import text_of, whole_bytes

from ray_mcp.diagnosis.rules.placement import explain_pending_group
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import MAX_LIMIT
from ray_mcp.models import ActorList
from ray_mcp.shaping.actors import (
    actor_from_state,
    build_actor_list,
    death_cause,
    render_actor_list,
)
from ray_mcp.shaping.common import clamp_limit, source_cap_note, tool_result
from ray_mcp.shaping.placement_groups import (
    build_pg_list,
    pg_state_counts,
    placement_group_from_state,
    render_pg_list,
)
from ray_mcp.shaping.serve import (
    build_serve_status,
    config_without_app,
    declared_serve_apps,
    failing_deployments,
    merge_serve_config,
    render_serve_status,
)
from ray_mcp.shaping.tasks import build_task_summary, render_task_summary
from ray_mcp.sources.state import actor_summary_from_rows

NODE = "d1fd044d6469fa3e736d6cfa3315b40a90631341bb0ab0e97b9bc1aa"
TRACEBACK = (
    'Traceback (most recent call last):\n\n  File "/app/model.py", line 9, in __init__\n'
    '    raise ValueError("boom")\n    ^^^^^^^^^^^^\n\nValueError: boom\n\n\n'
    "During handling of the above exception, another exception occurred:\n\n"
    "ray.exceptions.ActorDiedError: The actor died because of an error raised in its creation task\n"
)


def actor_row(i: int, state: str = "DEAD", cls: str = "Worker") -> dict:
    row = {
        "actor_id": f"{i:032x}",
        "class_name": cls,
        "state": state,
        "job_id": "01000000",
        "name": "",
        "node_id": NODE,
        "pid": 1000 + i,
        "ray_namespace": "ns",
        "num_restarts": "2",
        "serialized_runtime_env": "{}",
        "required_resources": {"CPU": 1.0},
        "is_detached": False,
        "placement_group_id": None,
        "repr_name": "",
        "death_cause": None,
    }
    if state == "DEAD":
        row["death_cause"] = {"creation_task_failure_context": {"formatted_exception_string": TRACEBACK}}
    return row


def test_death_cause_keeps_the_users_exception_and_drops_ray_wrappers_and_carets() -> None:
    cause = death_cause(actor_row(1)["death_cause"], exception_chars=2000)
    assert cause is not None and cause.reason == "CREATION_TASK_ERROR"
    assert (cause.error_type, cause.message) == ("ValueError", "boom")
    assert cause.exception and 'File "/app/model.py"' in cause.exception and "^^^" not in cause.exception
    assert "ActorDiedError" not in cause.exception
    died = death_cause(
        {"actor_died_error_context": {"reason": "WORKER_DIED", "error_message": "worker process has died"}},
        exception_chars=300,
    )
    assert died is not None and died.reason == "WORKER_DIED" and died.message == "worker process has died"


def test_actor_rows_become_numbers_and_basic_fields_unless_detail() -> None:
    basic = actor_from_state(actor_row(1, "ALIVE"), detail=False)
    assert basic.restarts == 2 and basic.pid == 1001 and basic.job_id is None and basic.name is None
    full = actor_from_state(actor_row(1, "ALIVE"), detail=True)
    assert full.job_id == "01000000" and full.required_resources == {"CPU": 1.0} and full.runtime_env is None


def test_actor_list_of_5000_stays_under_8_kb_with_exact_totals_and_a_narrowing_hint() -> None:
    rows = [actor_row(i, "DEAD" if i % 5 else "ALIVE", cls=f"C{i % 3}") for i in range(50)]
    summary = {
        "summary": {
            "C0": {"state_counts": {"DEAD": 3000, "ALIVE": 400}},
            "C1": {"state_counts": {"DEAD": 1600}},
        }
    }
    notes: list[str] = []
    page = build_actor_list(
        total=5000, matched=5000, rows=rows, summary=summary, limit=50, detail=False, notes=notes
    )
    assert page.total == page.matched == 5000 and page.by_state == {"ALIVE": 400, "DEAD": 4600}
    assert page.shown == 50 and not page.notes  # the area keeps its limit; the edge fits the answer
    assert page.hints[0].startswith("4,950 more actors") and "C0 DEAD" in page.hints[0]
    structured = tool_result(page, render_actor_list)
    assert whole_bytes(structured) <= 8192  # text and structured content together
    fitted = ActorList.model_validate(structured.structured_content)
    assert 0 < fitted.shown < 50 and fitted.hints == page.hints  # the byte budget cut the page, and says so
    assert fitted.notes == [
        f"{50 - fitted.shown} more of these 50 actors left out to keep the whole answer under 8 KB as sent; narrow with filters or a lower limit."
    ]
    assert all(a.actor_id in text_of(structured) for a in fitted.actors)  # ids whole
    assert "null" not in json.dumps(structured.structured_content)


def test_clamp_limit_notes_zero_and_huge_values() -> None:
    assert clamp_limit(50) == (50, None)
    assert clamp_limit(0)[0] == 0 and "counts only" in (clamp_limit(0)[1] or "")
    limit, note = clamp_limit(10**9)
    assert limit == MAX_LIMIT and note and "1,000,000,000" in note


def alive(node: str, total: dict) -> dict:
    """A State API node row."""
    return {"node_id": node, "state": "ALIVE", "resources_total": total}


def pending(bundles: list[dict], strategy: str, state: str | None = None) -> dict:
    """A State API placement group row, with its strategy (the GCS's) as pg_status joins it."""
    return {
        "placement_group_id": "ab" * 18,
        "name": "gang",
        "state": "PENDING",
        "strategy": strategy,
        "stats": {"scheduling_state": state} if state else {},
        "bundles": [{"bundle_id": {"bundle_index": i}, "unit_resources": b} for i, b in enumerate(bundles)],
    }


def why(
    bundles: list[dict], strategy: str, nodes: list[dict], state: str | None = None, **kw
) -> tuple[str, bool]:
    fact = explain_pending_group(nodes, pending(bundles, strategy, state), **kw)
    assert fact is not None
    return fact.text, fact.say.infeasible


def test_why_a_pending_group_waits_names_the_constraint_that_fails() -> None:
    one = [alive("a", {"CPU": 2.0, "memory": 4 * 2**30})]
    text, infeasible = why([{"CPU": 64}], "PACK", one, "INFEASIBLE")
    assert (
        infeasible
        and "needs {CPU: 64}, which no alive node can ever fit (infeasible: the largest has CPU 2)" in text
    )
    text, infeasible = why([{"GPU": 1}], "PACK", one)
    assert infeasible and "the largest has GPU 0" in text
    text, infeasible = why([{"CPU": 0.1}] * 3, "STRICT_SPREAD", one, "INFEASIBLE")
    assert infeasible and "STRICT_SPREAD over 3 bundles but only 1 node(s) are alive" in text
    two = [alive("a", {"CPU": 2.0}), alive("b", {"CPU": 2.0})]
    text, infeasible = why([{"CPU": 1.5}] * 2, "STRICT_PACK", two)
    assert (
        infeasible and "(STRICT_PACK, 2 bundle(s)) needs {CPU: 3}" in text and "the largest has CPU 2" in text
    )
    text, infeasible = why([{"CPU": 1}], "PACK", one, "WAITING", free={"a": {"CPU": 0.5}})
    assert not infeasible and "it fits, but CPU is in use now (the most free on a node: CPU 0.5)" in text
    assert why([{"CPU": 1}], "PACK", [])[1] is True


def test_a_spread_group_is_checked_bundle_by_bundle_not_as_one_request() -> None:
    two = [alive("a", {"CPU": 2.0}), alive("b", {"CPU": 2.0})]
    text, infeasible = why([{"CPU": 2}] * 2, "SPREAD", two)
    assert not infeasible and "bundle 0" in text and "looks free now" in text, text
    text, infeasible = why(
        [{"CPU": 2}] * 2, "STRICT_SPREAD", two, free={"a": {"CPU": 2.0}, "b": {"CPU": 1.0}}
    )
    assert not infeasible and "only 1 node(s) have that free now" in text, text


def test_a_group_ray_calls_infeasible_though_it_fits_points_at_its_label_selectors() -> None:
    text, infeasible = why([{"CPU": 1}], "PACK", [alive("a", {"CPU": 2.0})], "INFEASIBLE")
    assert infeasible and "Ray marks it INFEASIBLE" in text and "label selectors" in text, text


def test_pg_list_of_300_groups_stays_under_8_kb() -> None:
    nodes = [alive(NODE, {"CPU": 2.0})]
    rows = [
        {
            "placement_group_id": f"{i:036x}",
            "name": f"group-{i}",
            "creator_job_id": "01000000",
            "state": "PENDING",
            "is_detached": False,
            "stats": {"scheduling_state": "INFEASIBLE"},
            "bundles": [{"bundle_id": {"bundle_index": "0"}, "unit_resources": {"CPU": 64.0}, "node_id": ""}],
        }
        for i in range(300)
    ]
    groups = [
        placement_group_from_state(r, strategy="PACK", why=why([{"CPU": 64.0}], "PACK", nodes, "INFEASIBLE"))
        for r in rows[:50]
    ]
    page = build_pg_list(total=300, matched=300, groups=groups, by_state={"PENDING": 300}, limit=50, notes=[])
    result = tool_result(page, render_pg_list)
    assert page.matched == 300 and 0 < page.shown <= 50 and page.hints
    assert whole_bytes(result) <= 8192


def test_task_summary_groups_failures_by_error_type_with_a_sample() -> None:
    summary = {
        "num_filtered": 5006,
        "result": {
            "node_id_to_summary": {
                "cluster": {
                    "summary": {
                        "tiny": {"type": "NORMAL_TASK", "state_counts": {"FINISHED": 5000}},
                        "flaky": {"type": "NORMAL_TASK", "state_counts": {"FAILED": 6}},
                    }
                }
            }
        },
    }
    sample = {
        "task_id": "t" * 48,
        "name": "flaky",
        "error_message": "User exception:\n  File x\nKeyError: 'shard 1'",
    }
    s = build_task_summary(
        summary=summary,
        failed_counts={"TASK_EXECUTION_EXCEPTION": 6},
        samples={"TASK_EXECUTION_EXCEPTION": sample},
        notes=[],
    )
    assert s.total == 5006 and s.by_state == {"FAILED": 6, "FINISHED": 5000} and s.groups[0].name == "flaky"
    assert s.failed_by_error[0].count == 6 and (s.failed_by_error[0].sample_message or "").startswith(
        "KeyError"
    )
    assert "KeyError: 'shard 1'" in render_task_summary(s)


SERVE = {
    "controller_info": {"node_id": NODE},
    "http_options": {"host": "127.0.0.1", "port": 8123},
    "proxies": {NODE: {"status": "HEALTHY"}},
    "applications": {
        "ok": {
            "status": "RUNNING",
            "route_prefix": "/ok",
            "last_deployed_time_s": 1.7e9,
            "source": "declarative",
            "deployed_app_config": {"name": "ok", "import_path": "m:ok", "route_prefix": "/ok"},
            "deployments": {
                "Ok": {
                    "name": "Ok",
                    "status": "HEALTHY",
                    "status_trigger": "CONFIG_UPDATE_COMPLETED",
                    "target_num_replicas": 1,
                    "deployment_config": {"num_replicas": 1},
                    "replicas": [
                        {
                            "replica_id": "r1",
                            "state": "RUNNING",
                            "pid": "42",
                            "actor_name": "SERVE_REPLICA::ok#Ok#r1",
                            "node_id": NODE,
                        }
                    ],
                }
            },
        },
        "bad": {
            "status": "DEPLOY_FAILED",
            "route_prefix": "/bad",
            "source": "imperative",
            "deployments": {
                "Bad": {
                    "name": "Bad",
                    "status": "DEPLOY_FAILED",
                    "message": "RuntimeError: no weights",
                    "replicas": [],
                }
            },
        },
    },
}


def test_serve_status_shapes_apps_and_says_when_serve_is_off() -> None:
    off = build_serve_status({"controller_info": {}, "applications": {}, "proxies": {}}, app=None)
    assert not off.running and "not running" in render_serve_status(off)
    status = build_serve_status(SERVE, app=None)
    apps = {a.name: a for a in status.apps}
    assert apps["ok"].deployments[0].running_replicas == 1 and apps["ok"].deployments[0].replicas[0].pid == 42
    assert apps["bad"].deployments[0].error == "RuntimeError: no weights"
    assert status.http == "127.0.0.1:8123" and apps["ok"].last_deployed == "2023-11-14 22:13:20 UTC"
    assert [(a.name, d.name) for a, d in failing_deployments(status)] == [("bad", "Bad")]


def test_serve_config_merge_keeps_other_apps_and_refuses_to_drop_python_deployed_ones() -> None:
    with pytest.raises(InvalidArgument, match="deployed from Python"):
        declared_serve_apps(SERVE)
    current = declared_serve_apps(SERVE, dropping=["bad"])
    merged = merge_serve_config(
        current, {"applications": [{"name": "new", "import_path": "m:new"}]}, replace=False
    )
    assert [a["name"] for a in merged["applications"]] == ["ok", "new"]
    replaced = merge_serve_config(
        current, {"applications": [{"name": "ok", "import_path": "m:v2"}]}, replace=False
    )
    assert replaced["applications"] == [{"name": "ok", "import_path": "m:v2"}]
    assert config_without_app(current, "ok") == {"applications": []}


# -- counts computed locally, which spare dashboard requests (bench/, issue 8) --------------------------------


def test_actor_summary_from_rows_counts_each_class_per_state_like_rays_summary() -> None:
    rows = [
        actor_row(1, "ALIVE"),
        actor_row(2, "DEAD"),
        actor_row(3, "ALIVE"),
        actor_row(4, "ALIVE", cls="PS"),
    ]
    summary = actor_summary_from_rows(rows)
    assert summary == {
        "summary": {"Worker": {"state_counts": {"ALIVE": 2, "DEAD": 1}}, "PS": {"state_counts": {"ALIVE": 1}}}
    }
    page = build_actor_list(total=4, matched=4, rows=rows, summary=summary, limit=50, detail=False, notes=[])
    assert page.by_state == {"ALIVE": 3, "DEAD": 1}


def test_pg_state_counts_applies_the_filters_to_the_gcs_table() -> None:
    table = [
        {"placement_group_id": "aa" * 18, "name": "train", "state": "CREATED", "creator_job_id": "01000000"},
        {"placement_group_id": "bb" * 18, "name": "", "state": "PENDING", "creator_job_id": "01000000"},
        {"placement_group_id": "cc" * 18, "name": "", "state": "CREATED", "creator_job_id": "02000000"},
    ]
    assert pg_state_counts(table, []) == {"CREATED": 2, "PENDING": 1}
    assert pg_state_counts(table, [("creator_job_id", "=", "01000000")]) == {
        "CREATED": 1,
        "PENDING": 1,
    }
    assert pg_state_counts(table, [("name", "=", "train")]) == {"CREATED": 1}
    assert pg_state_counts(table, [("placement_group_id", "=", "dd" * 18)]) == {}


def test_a_summary_past_the_state_api_cap_says_how_many_tasks_were_not_read() -> None:
    # What Ray 2.60's /api/v0/tasks/summarize answers at 11,150 tasks: it reads 10,000 and counts those.
    summary = {
        "total": 11150,
        "num_after_truncation": 10000,
        "num_filtered": 10000,
        "result": {
            "node_id_to_summary": {
                "cluster": {
                    "summary": {
                        "noop": {"type": "NORMAL_TASK", "state_counts": {"FINISHED": 10000}},
                    }
                }
            }
        },
    }
    s = build_task_summary(summary=summary, failed_counts={}, samples={}, notes=[])
    assert (s.total, s.in_cluster, s.left_out) == (10000, 11150, 1150)
    first_line = render_task_summary(s).splitlines()[0]
    assert first_line.startswith("Tasks: 10,000 counted of 11,150 (1,150 not read)")
    assert any("1,150 were left out" in n for n in s.notes)


def test_a_summary_under_the_cap_has_no_cap_note() -> None:
    summary = {"total": 12, "num_after_truncation": 12, "num_filtered": 5, "result": {}}
    s = build_task_summary(summary=summary, failed_counts={}, samples={}, notes=[])
    assert s.in_cluster is None and s.left_out is None and s.notes == []
    assert source_cap_note("actors", {"total": "3", "num_after_truncation": "3"}) is None
    assert "7 were left out" in (
        source_cap_note("actors", {"total": "10007", "num_after_truncation": 10000}) or ""
    )


def test_a_task_summary_at_the_cap_says_there_may_be_more_unless_the_gcs_count_is_known() -> None:
    # Ray 2.60 counts only the tasks it read: at the cap, total == num_after_truncation == 10,000.
    summary = {
        "total": 10000,
        "num_after_truncation": 10000,
        "num_filtered": 10000,
        "result": {
            "node_id_to_summary": {
                "cluster": {
                    "summary": {
                        "noop": {"type": "NORMAL_TASK", "state_counts": {"FINISHED": 10000}},
                    }
                }
            }
        },
    }
    unknown = build_task_summary(summary=summary, failed_counts={}, samples={}, notes=[])
    assert unknown.capped and unknown.left_out is None
    assert "there may be more" in render_task_summary(unknown).splitlines()[0]
    exact = build_task_summary(summary=summary, failed_counts={}, samples={}, notes=[], in_cluster=11150)
    assert (exact.in_cluster, exact.left_out) == (11150, 1150)
    assert render_task_summary(exact).startswith("Tasks: 10,000 counted of 11,150 (1,150 not read)")


def test_a_pg_list_filtered_by_state_says_no_none_beside_the_group_it_lists() -> None:
    row = {
        "placement_group_id": "ab" * 18,
        "creator_job_id": "01000000",
        "state": "PENDING",
        "is_detached": False,
        "stats": {"scheduling_state": "INFEASIBLE"},
        "bundles": [{"bundle_id": {"bundle_index": "0"}, "unit_resources": {"CPU": 64.0}, "node_id": ""}],
    }
    group = placement_group_from_state(
        row, strategy="PACK", why=why([{"CPU": 64.0}], "PACK", [alive(NODE, {"CPU": 2.0})], "INFEASIBLE")
    )
    page = build_pg_list(total=1, matched=1, groups=[group], by_state={}, limit=50, notes=[])
    first = render_pg_list(page).splitlines()[0]
    assert first == "Placement groups: 1 match of 1; showing 1.", first
