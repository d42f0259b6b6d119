"""kuberay_lint's rules (shaping/kube_lint.py): one broken spec per failure class, each a KubeRay sample changed the
way users break it and still valid against the vendored CRD schema (the API server would take it; it fails
later). Each finding names the field, says why, and gives the fix; the sample as KubeRay ships it has none."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from tests.test_kuberay import sample, validate

from ray_mcp.shaping.kube_lint import LintContext, egress_closed, lint, quantity


def cluster() -> dict[str, Any]:
    return sample("ray-cluster.sample.yaml", "RayCluster")


def head(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["headGroupSpec"]


def worker(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["workerGroupSpecs"][0]


def gpus_without_limits(obj: dict[str, Any]) -> None:
    worker(obj)["rayStartParams"]["num-gpus"] = "1"


def cpus_over_limit(obj: dict[str, Any]) -> None:
    worker(obj)["rayStartParams"]["num-cpus"] = "8"


def store_over_shm(obj: dict[str, Any]) -> None:
    head(obj)["rayStartParams"]["object-store-memory"] = str(8 * 2**30)  # the head has 5Gi


def ft_without_redis(obj: dict[str, Any]) -> None:
    obj["spec"]["gcsFaultToleranceOptions"] = {"externalStorageNamespace": "x"}


def labels_with_v1(obj: dict[str, Any]) -> None:
    obj["spec"]["enableInTreeAutoscaling"] = True
    worker(obj)["labels"] = {"accelerator": "a100"}


def image_differs(obj: dict[str, Any]) -> None:
    head(obj)["template"]["spec"]["containers"][0]["image"] = "rayproject/ray:2.46.0"


def name_too_long(obj: dict[str, Any]) -> None:
    obj["metadata"]["name"] = "a-ray-cluster-whose-name-is-far-too-long-for-kuberay-x"


CLUSTER_CASES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    (
        "resources",
        gpus_without_limits,
        "spec.workerGroupSpecs[groupName=workergroup].rayStartParams.num-gpus",
    ),
    ("resources", cpus_over_limit, "spec.workerGroupSpecs[groupName=workergroup].rayStartParams.num-cpus"),
    ("object_store_shm", store_over_shm, "spec.headGroupSpec.rayStartParams.object-store-memory"),
    ("gcs_fault_tolerance", ft_without_redis, "spec.gcsFaultToleranceOptions.redisAddress"),
    ("autoscaler_v1_labels", labels_with_v1, "spec.workerGroupSpecs[groupName=workergroup].labels"),
    ("ray_version", image_differs, "spec.headGroupSpec.template.spec.containers[0].image"),
    ("head_service_names", name_too_long, "metadata.name"),
]


def test_the_sample_as_kuberay_ships_it_has_no_finding() -> None:
    report = lint(validate(cluster()), LintContext(neighbours=[], policies=[]))
    assert report.findings == [], report.findings
    assert report.unknown == [] and "No problem found" in report.verdict


@pytest.mark.parametrize(
    ("rule", "breaks", "field"), CLUSTER_CASES, ids=[c[1].__name__ for c in CLUSTER_CASES]
)
def test_each_broken_cluster_spec_names_the_field_why_and_the_fix(
    rule: str, breaks: Callable[[dict[str, Any]], None], field: str
) -> None:
    obj = cluster()
    breaks(obj)
    validate(obj)  # the API server would accept it: it fails later, in KubeRay or in Ray
    report = lint(obj, LintContext(neighbours=[], policies=[]))
    found = [f for f in report.findings if f.rule == rule]
    assert found and found[0].field == field, report.findings
    assert found[0].why and found[0].fix and report.verdict.startswith(("1 error", "0 error"))


def test_a_submitter_with_too_few_retries_is_found() -> None:
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["spec"]["submitterConfig"] = {"backoffLimit": 0}
    report = lint(validate(rj), LintContext(neighbours=[], policies=[]))
    (finding,) = [f for f in report.findings if f.rule == "submitter_backoff"]
    assert finding.field == "spec.submitterConfig.backoffLimit" and "BackoffLimitExceeded" in finding.why


def test_a_head_service_that_collides_with_a_rayservices_is_found() -> None:
    rs = sample("ray-service.sample.yaml", "RayService")
    rc = cluster()
    rc["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": f"{rs['metadata']['name']}-head-svc"}}
    report = lint(validate(rc), LintContext(neighbours=[rs], policies=[]))
    (finding,) = [f for f in report.findings if f.rule == "head_service_names"]
    assert "rayservice-sample-head-svc" in finding.why and "RayService" in finding.why


def test_a_rayservice_without_gcs_fault_tolerance_is_warned() -> None:
    report = lint(
        validate(sample("ray-service.sample.yaml", "RayService")), LintContext(neighbours=[], policies=[])
    )
    (finding,) = [f for f in report.findings if f.rule == "gcs_fault_tolerance"]
    assert finding.severity == "warning" and finding.field == "spec.rayClusterConfig.gcsFaultToleranceOptions"


DENY_EGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "ray-no-egress"},
    "spec": {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}],
    },
}


def test_pip_on_a_namespace_without_egress_is_found_and_unknown_without_its_policies() -> None:
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["spec"]["runtimeEnvYAML"] = "pip:\n  - requests==2.26.0\n"
    validate(rj)
    closed = lint(rj, LintContext(neighbours=[], policies=[DENY_EGRESS]))
    (finding,) = [f for f in closed.findings if f.rule == "pip_without_egress"]
    assert finding.field == "spec.runtimeEnvYAML.pip" and "ray-no-egress" in finding.why
    opened = copy.deepcopy(DENY_EGRESS)
    opened["spec"]["egress"].append({"ports": [{"port": 443}]})
    assert egress_closed([opened]) is None
    assert not [
        f for f in lint(rj, LintContext(policies=[opened])).findings if f.rule == "pip_without_egress"
    ]
    unread = lint(rj, LintContext(neighbours=[], policies=None))
    assert any(u.startswith("pip_without_egress") for u in unread.unknown)
    assert "pip_without_egress" not in unread.checked  # never counted as passed


def test_a_working_dir_over_rays_upload_limit_is_found() -> None:
    limit = 512 * 2**20
    over = lint(
        {"kind": "runtime_env", "metadata": {}}, LintContext(working_dir_bytes=limit + 1, upload_limit=limit)
    )
    near = lint(
        {"kind": "runtime_env", "metadata": {}},
        LintContext(working_dir_bytes=limit // 2 + 1, upload_limit=limit),
    )
    assert [f.severity for f in over.findings] == ["error"] and [f.severity for f in near.findings] == [
        "warning"
    ]
    assert over.findings[0].field == "runtime_env.working_dir"


@pytest.mark.parametrize(
    ("text", "value"), [("5Gi", 5 * 2**30), ("500m", 0.5), ("2", 2), ("1.5G", 1.5e9), ("x", None)]
)
def test_quantities_are_read_as_kubernetes_writes_them(text: str, value: float | None) -> None:
    assert quantity(text) == value
