"""Issue 39's rules over the evidence their live scenarios recorded from the session head
(tests/test_diagnosis_follow.py with RAY_MCP_RECORD=1): each answer follows the first fact to what it points at,
names it in the verdict, and stays within the byte budget."""

from __future__ import annotations

import copy

import pytest
from tests.causal_support import replay
from tests.follow_checks import FOLLOW, owner_job

from ray_mcp.diagnosis import registry, report


@pytest.mark.parametrize("name", sorted(FOLLOW))
def test_an_answer_follows_what_the_error_names_over_its_recording(name: str) -> None:
    model, text = report.job_report("recorded", replay(name), max_bytes=6000)
    assert text.splitlines()[0] == model.verdict and len(model.verdict.encode()) <= 300, text
    assert len(text.encode()) <= 6000, len(text.encode())
    FOLLOW[name](text)


# Each scenario's rule(s): with them taken out of the registry, its check fails over the same recording.
RULE_OF = {
    "follow_unserialisable": ("handover.driver_unserialisable",),
    "follow_missing_file": ("uploads.task_missing_file",),
    "follow_read_only": ("handover.task_handover",),
    "follow_nested_refs": ("handover.task_handover",),
    "follow_wrong_address": ("connect.never_connected",),
    "follow_async_blocking": ("async_actors.blocked_loop",),
    "follow_pg_self_deadlock": ("waiting.pg_self_deadlock",),
    "follow_train_failure": ("frameworks.framework_recorded", "frameworks.framework_teardown"),
    "follow_peer_wait": ("blocking.blocked_on",),
    "follow_owner_job": ("owners.actor_owner_died",),
    "follow_store_holder": ("memory.job_store_holder",),
}


@pytest.mark.parametrize("name", sorted(RULE_OF))
def test_each_check_fails_with_its_rule_disabled(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry.discover()
    for key in RULE_OF[name]:
        monkeypatch.delitem(registry.RULES, key)
    registry._ORDERED.clear()
    try:
        _model, text = report.job_report("recorded", replay(name), max_bytes=6000)
        with pytest.raises(AssertionError):
            FOLLOW[name](text)
    finally:
        monkeypatch.undo()
        registry._ORDERED.clear()


def answer_with(name: str, change) -> str:
    ev = copy.deepcopy(replay(name))
    change(ev)
    return report.job_report("recorded", ev, max_bytes=6000)[1]


def test_a_driver_that_tried_this_clusters_own_gcs_port_on_its_node_is_not_blamed_on_the_address() -> None:
    """Ray logs a loopback GCS address as the node's IP: the same cluster's address in another form is not
    "another cluster" (its failure is another rule's)."""
    ev = replay("follow_wrong_address")
    node_ip = next(n["node_ip"] for n in ev.nodes or [] if n.get("state") == "ALIVE")
    port = str(ev.cluster_address).rsplit(":", 1)[1]

    def same(ev) -> None:
        ev.driver_lines = [line.replace("10.11.12.13:6379", f"{node_ip}:{port}") for line in ev.driver_lines]

    assert "never reached this cluster" not in answer_with("follow_wrong_address", same)


@pytest.mark.parametrize(
    ("runtime_env", "said"),
    [
        ({"working_dir": "gcs://_ray_pkg_0.zip"}, "the working_dir uploaded did not contain it"),
        ({}, "the job uploaded no working_dir"),
    ],
)
def test_a_missing_file_says_which_part_of_the_runtime_env_left_it_out(runtime_env: dict, said: str) -> None:
    def env(ev) -> None:
        ev.job["runtime_env"] = runtime_env

    text = answer_with("follow_missing_file", env)
    assert said in text.splitlines()[0] and "data/train.csv" in text.splitlines()[0], text


def test_a_missing_absolute_path_is_read_on_the_node_the_work_ran_on() -> None:
    def absolute(ev) -> None:
        for t in ev.tasks:
            if t.get("error_message"):
                t["error_message"] = t["error_message"].replace(
                    "'data/train.csv'", "'/home/me/data/train.csv'"
                )

    text = answer_with("follow_missing_file", absolute)
    assert "an absolute path is read on the node the work runs on" in text.splitlines()[0], text


def test_an_actor_died_error_naming_another_jobs_actor_follows_it_to_that_jobs_driver() -> None:
    """The other shape of the owner scenario (the calls failed once the actor died, rather than its lookup): Ray
    names the actor on the lines after the exception line; it is another job's, read by id (here: the row the
    recording read by name)."""
    ev = replay("follow_owner_job")
    cache = next(a for a in ev.related_actors if a.get("class_name") == "FeatureCache")

    def died(ev) -> None:
        ev.driver_lines = [
            "Traceback (most recent call last):",
            '  File "/tmp/x/main.py", line 9, in <module>',
            "    ray.get(cache.get.remote(step))",
            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
            "\tclass_name: FeatureCache",
            f"\tactor_id: {cache['actor_id']}",
            "\tnamespace: shared",
            "The actor is dead because its owner has died.",
        ]

    text = answer_with("follow_owner_job", died)
    owner_job(text)
