"""KubeRay objects for the tests on the loopback Kubernetes API (tests/kube_apiserver.py): KubeRay's own samples
with statuses, each validated against the vendored KubeRay CRD schemas (pods against the Kubernetes schemas),
and the cluster those tests share (``kube_cluster``, conftest's ``kube`` fixture)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from mcp import Client
from tests.kube_apiserver import KubeState, serve, write_kubeconfig
from tests.support import call_ok, text_of

from ray_mcp.settings import Settings

KUBERAY = Path(__file__).parent / "schemas" / "kuberay"
KUBERNETES_VERSION = "1.33.0"
NS = "default"
CLUSTER = "raycluster-kuberay"  # ray-cluster.sample.yaml's
HEAD_SVC = f"{CLUSTER}-head-svc"
GPU_MESSAGE = (
    "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are available."
)


def validate(obj: dict[str, Any]) -> dict[str, Any]:
    """A KubeRay object against its vendored CRD schema, a core object against Kubernetes' own."""
    if obj["apiVersion"] == "ray.io/v1":
        import jsonschema

        plural = {
            "RayCluster": "rayclusters",
            "RayJob": "rayjobs",
            "RayService": "rayservices",
            "RayCronJob": "raycronjobs",
        }[obj["kind"]]
        schema = json.loads((KUBERAY / f"{plural}.v1.schema.json").read_text())["openAPIV3Schema"]
        errors = list(jsonschema.Draft7Validator(schema).iter_errors(obj))
        assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:3]]
    else:
        import kubernetes_validate

        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    return obj


def sample(name: str, kind: str) -> dict[str, Any]:
    docs = yaml.safe_load_all((KUBERAY / name).read_text())
    return copy.deepcopy(next(d for d in docs if d and d["kind"] == kind))


def raycluster(name: str = CLUSTER, *, state: str = "ready", autoscaling: bool = False) -> dict[str, Any]:
    rc = sample("ray-cluster.sample.yaml", "RayCluster")
    rc["metadata"]["name"] = name
    rc["spec"]["enableInTreeAutoscaling"] = autoscaling
    rc["status"] = {
        "state": state,
        "desiredWorkerReplicas": 1,
        "readyWorkerReplicas": 1 if state == "ready" else 0,
        "availableWorkerReplicas": 1,
        "minWorkerReplicas": 1,
        "maxWorkerReplicas": 5,
        "head": {"serviceName": f"{name}-head-svc", "podName": f"{name}-head-abcde"},
        "conditions": [
            {
                "type": "HeadPodReady",
                "status": "True",
                "reason": "HeadPodRunningAndReady",
                "message": "",
                "lastTransitionTime": "2026-12-01T10:01:00Z",
            }
        ],
    }
    return validate(rc)


def pod(
    name: str, cluster: str, node_type: str, *, group: str = "headgroup", status: dict[str, Any]
) -> dict[str, Any]:
    containers = [
        {"name": "ray-head" if node_type == "head" else "ray-worker", "image": "rayproject/ray:2.46.0"}
    ]
    if node_type == "head":
        containers.append({"name": "autoscaler", "image": "rayproject/ray:2.46.0"})
    spec: dict[str, Any] = {"containers": containers}
    if node_type == "worker":
        spec["initContainers"] = [{"name": "wait-gcs-ready", "image": "rayproject/ray:2.46.0"}]
    labels = {"ray.io/cluster": cluster, "ray.io/node-type": node_type, "ray.io/group": group}
    owner = {  # KubeRay sets itself as the pod's controller (ctrl.SetControllerReference)
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "name": cluster,
        "uid": f"uid-rayclusters-{cluster}",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return validate(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": labels, "ownerReferences": [owner]},
            "spec": spec,
            "status": status,
        }
    )


def running(*names: str, restarts: int = 0, last: dict[str, Any] | None = None) -> dict[str, Any]:
    statuses = []
    for n in names:
        s: dict[str, Any] = {
            "name": n,
            "image": "rayproject/ray:2.46.0",
            "imageID": "",
            "ready": True,
            "restartCount": restarts,
            "state": {"running": {"startedAt": "2026-12-01T10:02:00Z"}},
        }
        if last:
            s["lastState"] = {"terminated": last}
        statuses.append(s)
    return {"phase": "Running", "containerStatuses": statuses}


def head_pod(cluster: str = CLUSTER, **kw: Any) -> dict[str, Any]:
    return pod(f"{cluster}-head-abcde", cluster, "head", status=running("ray-head", "autoscaler", **kw))


def event(
    obj_kind: str,
    obj_name: str,
    reason: str,
    message: str,
    *,
    warning: bool = True,
    count: int = 1,
    n: int = 0,
) -> dict[str, Any]:
    return validate(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{obj_name}.{reason.lower()}{n}", "namespace": NS},
            "involvedObject": {"kind": obj_kind, "name": obj_name, "namespace": NS},
            "reason": reason,
            "message": message,
            "type": "Warning" if warning else "Normal",
            "count": count,
            "lastTimestamp": f"2026-12-01T10:0{n}:00Z",
        }
    )


def head_service(name: str = HEAD_SVC, cluster: str = CLUSTER) -> dict[str, Any]:
    ports = [
        {"name": "gcs-server", "port": 6379},
        {"name": "dashboard", "port": 8265},
        {"name": "client", "port": 10001},
    ]
    return validate(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"selector": {"ray.io/cluster": cluster, "ray.io/node-type": "head"}, "ports": ports},
        }
    )


def granted() -> set[tuple[str, str]]:
    """(verb, resource) the Roles of deploy/kubernetes/kuberay/role.yaml grant."""
    docs = yaml.safe_load_all(
        (Path(__file__).parents[1] / "deploy" / "kubernetes" / "kuberay" / "role.yaml").read_text()
    )
    return {
        (verb, f"{res}.{rule['apiGroups'][0]}" if rule["apiGroups"][0] else res)
        for doc in docs
        if doc["kind"] in ("Role", "ClusterRole")
        for rule in doc["rules"]
        for res in rule["resources"]
        for verb in rule["verbs"]
    }


def settings_for(kubeconfig: Path, address: str = f"k8s://{NS}/{CLUSTER}", **kw: Any) -> Settings:
    return Settings(address=address, kubeconfig=kubeconfig, embedded="never", **kw)


async def status_text(client: Client, **args: Any) -> tuple[str, dict[str, Any]]:
    result = await call_ok(client, "kuberay_status", args)
    assert result.structured_content is not None
    return text_of(result), result.structured_content


@contextmanager
def kube_cluster(dashboard_url: str, tmp_path: Path) -> Iterator[tuple[KubeState, Path]]:
    """The sample RayCluster with its head pod and head service, whose service proxy leads to ``dashboard_url``;
    yields the API server's state and a kubeconfig for it. Afterwards, every (verb, resource) used must be one
    deploy/kubernetes/kuberay/role.yaml grants."""
    state = KubeState()
    state.put(raycluster())
    state.put(head_service())
    state.put(head_pod())
    state.dashboards[HEAD_SVC] = dashboard_url
    with serve(state) as url:
        yield state, write_kubeconfig(tmp_path / "kubeconfig", url)
    assert state.used <= granted(), f"deploy/kubernetes/kuberay/role.yaml lacks {state.used - granted()}"
