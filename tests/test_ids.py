"""sources/ids.py: the one check of every id a call names, and the one way an id goes into a dashboard path."""

from __future__ import annotations

import pytest

from ray_mcp.answers.targets import LogTarget, Target
from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.audit import whole_arguments
from ray_mcp.limits import AUDIT_ARGUMENT_CHARS
from ray_mcp.sources.ids import check_id, check_job_ref, check_node, job_path, node_path

NOT_JOB_REFS = [
    ".",
    "..",
    "./x",
    "../api",
    "a/b",
    "%2e%2e",
    "x%2f",
    "a?b",
    "a#b",
    "a b",
    "a\nb",
    "",
    "\\x",
    "-x",
]


@pytest.mark.parametrize("bad", NOT_JOB_REFS)
def test_a_job_ref_that_could_address_another_route_is_refused(bad: str) -> None:
    with pytest.raises(InvalidArgument, match="is not a valid job id"):
        check_job_ref(bad)
    with pytest.raises(InvalidArgument):
        job_path(bad)
    with pytest.raises(InvalidArgument):
        Target(kind="job", job=bad)


@pytest.mark.parametrize("good", ["raysubmit_AbC123xyz0987654", "02000000", "my-job.v2:retry_3", "_x"])
def test_submission_ids_and_job_ids_pass_and_go_into_the_path_as_they_are(good: str) -> None:
    assert check_job_ref(good) == good
    assert job_path(good, "stop") == f"/api/jobs/{good}/stop"


def test_nodes_are_an_id_or_an_ip_address_and_ids_are_their_kinds_exact_shape() -> None:
    assert check_node("AB" * 28) == "ab" * 28 and check_node(" 10.0.0.7 ") == "10.0.0.7"
    assert check_node("::1") == "::1"
    for bad in ("..", "../nodes", "10.0.0.1/x", "ab" * 27, "%2e", "localhost"):
        with pytest.raises(InvalidArgument, match="is not a node"):
            check_node(bad)
    with pytest.raises(InvalidArgument):
        node_path("..")
    for kind, bad in (("actor", ".." + "0" * 30), ("task", "0" * 47 + "/"), ("actor", "0" * 31 + "\n")):
        with pytest.raises(InvalidArgument, match=f"is not an? {kind} id"):
            check_id(kind, bad)


def test_a_target_checks_and_normalises_its_ids_once_when_made() -> None:
    target = Target(kind="actor_id", actor_id=" " + "AB" * 16 + " ")
    assert target.actor_id == "ab" * 16
    with pytest.raises(InvalidArgument, match="is not a task id"):
        Target(kind="task_id", task_id="..")
    with pytest.raises(InvalidArgument, match="is not a node"):
        LogTarget(node="../..", filename="raylet.out")
    with pytest.raises(InvalidArgument, match="needs one log target"):  # the shape first, then the ids
        LogTarget(job="..", actor_id="..")


def test_an_audit_record_keeps_arguments_whole_and_marks_what_a_bound_cuts() -> None:
    small = {"entrypoint": "python x.py " + "a" * 5_000, "runtime_env": {"pip": ["x"] * 3}}
    kept, cut = whole_arguments(small)
    assert kept == small and cut == []
    huge = {"config": {"applications": [{"name": "n" * (AUDIT_ARGUMENT_CHARS + 7)}]}}
    kept, cut = whole_arguments(huge)
    assert cut == ["arguments.config.applications[0].name"]
    assert kept["config"]["applications"][0]["name"].endswith("… [cut: 7 more characters]")
