"""deploy/kubernetes/: ray-mcp beside a KubeRay RayCluster. Every manifest is validated offline against the
Kubernetes schemas (kubernetes-validate, strict) and the RayClusters against KubeRay's CRD schema (vendored),
and the pieces agree with each other and with ray-mcp's own flags."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.npm_tools import REPO

DEPLOY = REPO / "deploy" / "kubernetes"
KUBERAY = REPO / "tests" / "schemas" / "kuberay"
KUBERNETES_VERSION = "1.33.0"  # a version kubernetes-validate ships schemas for (offline)


def manifests() -> list[dict[str, Any]]:
    resources = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(resources) == sorted(
        p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    return [doc for name in resources for doc in yaml.safe_load_all((DEPLOY / name).read_text()) if doc]


def by_kind(kind: str, name: str | None = None) -> dict[str, Any]:
    (doc,) = [d for d in manifests() if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return doc


@pytest.mark.parametrize(
    "name", sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")
)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(name: str) -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    for doc in yaml.safe_load_all((DEPLOY / name).read_text()):
        if doc["apiVersion"].startswith("ray.io/"):
            with pytest.raises(SchemaNotFoundError):  # a CRD: checked against KubeRay's schema below
                kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
            continue
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_kubernetes_validation_catches_a_broken_deployment() -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import ValidationError

    broken = by_kind("Deployment")
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "eighty"
    with pytest.raises(ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    typo = by_kind("Deployment")
    typo["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(ValidationError):  # strict: unknown fields are errors
        kubernetes_validate.validate(typo, KUBERNETES_VERSION, strict=True)


def raycluster_validator() -> Any:
    import jsonschema

    schema = json.loads((KUBERAY / "rayclusters.v1.schema.json").read_text())["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize(
    "path", [DEPLOY / "raycluster.yaml", KUBERAY / "ray-cluster.sample.yaml"], ids=lambda p: p.name
)
def test_the_rayclusters_are_valid_against_kuberays_crd_schema(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    errors = sorted(raycluster_validator().iter_errors(doc), key=str)
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5]]
    broken = yaml.safe_load(path.read_text())
    broken["spec"]["workerGroupSpecs"][0]["replicas"] = "one"
    assert list(raycluster_validator().iter_errors(broken))


def test_the_deployment_points_at_the_head_service_of_the_raycluster_read_only_with_tokens_as_files() -> None:
    from ray_mcp.cli import check_bind, parse_settings

    cluster = by_kind("RayCluster")["metadata"]["name"]
    pod = by_kind("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--address") + 1] == f"http://{cluster}-head-svc:8265"
    assert "--read-only" in args
    env = {e["name"]: e for e in container["env"]}
    # Tokens as files, never as environment variables (every process ray-mcp starts would inherit those)
    assert not [
        e for e in container["env"] if "valueFrom" in e or ("TOKEN" in e["name"] and "PATH" not in e["name"])
    ]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    mcp_file = args[args.index("--auth-token-file") + 1]
    ray_file = env["RAY_AUTH_TOKEN_PATH"]["value"]
    for path, secret, key in (
        (mcp_file, "ray-mcp-token", "token"),
        (ray_file, "ray-cluster-token", "auth_token"),
    ):
        (volume,) = [n for n, s in secrets.items() if s["secretName"] == secret]
        assert path == f"{mounts[volume]}/{key}" and secrets[volume]["items"] == [{"key": key, "path": key}]
    assert secrets["ray-token"]["secretName"] == by_kind("RayCluster")["spec"]["authOptions"]["secretName"]
    assert secrets["ray-token"]["optional"] is True  # a cluster without token auth
    assert env["RAY_MCP_EMBEDDED"]["value"] == "never"
    # ray-mcp accepts exactly this configuration (flags and env), and binds 0.0.0.0 only because of the token.
    plain = {k: e["value"] for k, e in env.items() if "value" in e}
    import os
    import tempfile
    from unittest import mock

    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text("from-the-secret\n")
        given = [token.as_posix() if a == mcp_file else a for a in args]
        with mock.patch.dict(os.environ, plain, clear=False):
            settings = parse_settings(given)
            check_bind(settings)
        assert settings.resolved_auth_token() == "from-the-secret"
    assert settings.read_only and settings.transport == "streamable-http" and settings.port == 8270
    assert settings.embedded == "never"


def test_the_pod_runs_as_non_root_with_probes_resources_and_no_api_token() -> None:
    pod = by_kind("Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    assert by_kind("ServiceAccount")["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "mcp"}, probe
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"mcp": 8270}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}, kind
    assert any(
        m["mountPath"] == "/tmp" for m in container["volumeMounts"]
    )  # writable scratch on a read-only root
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"useradd .*--uid 1000", dockerfile) and "USER raymcp" in dockerfile


def test_the_service_and_network_policy_select_the_pod_and_allow_only_the_ray_head() -> None:
    labels = by_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    service = by_kind("Service")["spec"]
    assert service["selector"].items() <= labels.items() and service["ports"][0]["targetPort"] == "mcp"
    policy = by_kind("NetworkPolicy", "ray-mcp")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 8270}]
    cluster = by_kind("RayCluster")["metadata"]["name"]
    head = policy["egress"][0]
    assert head["to"][0]["podSelector"]["matchLabels"] == {
        "ray.io/cluster": cluster,
        "ray.io/node-type": "head",
    }
    assert {p["port"] for p in head["ports"]} == {8265, 6379}
    assert {p["port"] for p in policy["egress"][1]["ports"]} == {53}  # DNS only, besides the head


def test_the_kubernetes_doc_gives_a_port_forward_quick_start_that_matches_the_manifests() -> None:
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    for needed in (
        "kubectl apply -k deploy/kubernetes",
        "kubectl create secret generic ray-mcp-token",
        "kubectl create secret generic ray-cluster-token",
        "kubectl port-forward svc/ray-mcp 8270:8270",
        "http://127.0.0.1:8270/mcp",
        "raycluster-mcp-head-svc",
        "ray-mcp doctor",
    ):
        assert needed in doc, needed
    assert "docs/kubernetes.md" in (REPO / "README.md").read_text()


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}  # the policies here use labels only
    return selector.get("matchLabels", {}).items() <= labels.items()


def admitted(policy: dict[str, Any], labels: dict[str, str], port: int, *, same_namespace: bool) -> bool:
    """Does a NetworkPolicy let a pod with ``labels`` (in the policy's namespace, or another) connect to ``port``
    of the pods it selects? Kubernetes' rules: any ingress rule whose ``from`` peer and ``ports`` both match."""
    for rule in policy["ingress"]:
        ports = rule.get("ports")
        if ports is not None and not any(
            p["port"] == port and p.get("protocol", "TCP") == "TCP" for p in ports
        ):
            continue
        for peer in rule.get("from", [{}]):
            in_namespace = ("namespaceSelector" in peer and selects(peer["namespaceSelector"], {})) or (
                "namespaceSelector" not in peer and same_namespace
            )
            if in_namespace and selects(peer.get("podSelector", {}), labels):
                return True
    return False


def test_the_ray_heads_ports_admit_only_its_own_pods_and_ray_mcp() -> None:
    """Without this policy every pod of the Kubernetes cluster reaches the head's dashboard, GCS and Ray Client
    ports, and with them runs any code on the cluster."""
    cluster = by_kind("RayCluster")["metadata"]["name"]
    head_container = by_kind("RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    head_ports = {p["name"]: p["containerPort"] for p in head_container["ports"]}
    assert set(head_ports) == {"gcs-server", "dashboard", "client"}
    head_labels = {"ray.io/cluster": cluster, "ray.io/node-type": "head", "ray.io/group": "headgroup"}
    policies = [
        p
        for p in manifests()
        if p["kind"] == "NetworkPolicy" and selects(p["spec"]["podSelector"], head_labels)
    ]
    assert len(policies) == 1, "exactly one NetworkPolicy fences the Ray head"
    (policy,) = [p["spec"] for p in policies]
    assert policy["policyTypes"] == ["Ingress"]
    worker = {"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "workergroup"}
    ray_mcp = by_kind("Deployment")["spec"]["template"]["metadata"]["labels"]
    ray_mcp_ports = {8265, 6379}  # what ray-mcp talks to (its own NetworkPolicy's egress)
    assert {
        p["port"] for p in by_kind("NetworkPolicy", "ray-mcp")["spec"]["egress"][0]["ports"]
    } == ray_mcp_ports
    for port in head_ports.values():
        assert admitted(policy, worker, port, same_namespace=True), port
        assert admitted(policy, ray_mcp, port, same_namespace=True) == (port in ray_mcp_ports), port
        for stranger in (
            {},
            {"app": "web"},
            {"ray.io/cluster": "another-cluster"},
            {"app.kubernetes.io/name": "x"},
        ):
            assert not admitted(policy, stranger, port, same_namespace=True), (stranger, port)
            assert not admitted(policy, stranger, port, same_namespace=False), (stranger, port)
        assert not admitted(policy, ray_mcp, port, same_namespace=False), port  # a ray-mcp elsewhere: no
        assert not admitted(policy, worker, port, same_namespace=False), port
    # an arbitrary worker port (Ray picks them at run time) is open to the cluster's pods only
    assert admitted(policy, worker, 10_002, same_namespace=True)
    assert not admitted(policy, {"app": "web"}, 10_002, same_namespace=True)


def test_the_kubernetes_doc_says_what_the_head_policy_protects() -> None:
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    assert "networkpolicy-ray-head.yaml" in doc and "10001" in doc
