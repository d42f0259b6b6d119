"""What a k8s:// address names: ``k8s://[context/]namespace/name`` read and checked, and resolved to the
RayCluster serving the object and the head service its dashboard answers on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ray_mcp.errors import ClusterUnavailable, InvalidArgument
from ray_mcp.sources.kube_names import checked
from ray_mcp.sources.kubernetes import CLUSTER_LABEL, DASHBOARD_PORT_NAME, Kube


@dataclass(frozen=True)
class KubeAddress:
    """``k8s://[context/]namespace/name``: a RayCluster, RayJob or RayService."""

    context: str | None
    namespace: str | None
    name: str

    @property
    def text(self) -> str:
        return "k8s://" + "/".join(p for p in (self.context, self.namespace, self.name) if p)


def parse_kube_address(text: str, *, context: str | None = None, namespace: str | None = None) -> KubeAddress:
    """Read ``k8s://[context/]namespace/name``; a context may hold slashes (an EKS ARN), so it is the rest.
    ``k8s://name`` takes the namespace of --namespace, else of the context. The namespace and the name are
    checked as Kubernetes checks them (a RayCluster, RayJob or RayService name is an RFC 1123 subdomain)."""
    parts = text.removeprefix("k8s://").strip("/").split("/")
    if not parts or not all(parts):
        raise InvalidArgument(
            f"Cannot read {text!r} as a Kubernetes address: expected k8s://[context/]namespace/name, "
            "for example k8s://default/raycluster-kuberay."
        )
    name = checked(parts[-1], "rayobject", given=text)
    ns = parts[-2] if len(parts) >= 2 else namespace
    ctx = "/".join(parts[:-2]) if len(parts) > 2 else context
    return KubeAddress(ctx, checked(ns, "namespace", given=text) if ns is not None else None, name)


@dataclass
class RayTarget:
    """What a k8s:// address names, resolved: the object, the RayCluster serving it, and its head service."""

    kube: Kube
    kind: str  # RayCluster | RayJob | RayService
    name: str
    cluster: str  # the RayCluster (a RayJob's or a RayService's active one)
    service: str  # the head service the dashboard is reached through
    dashboard_url: str

    @property
    def namespace(self) -> str:
        return self.kube.namespace

    def proxy_transport(self) -> httpx.AsyncBaseTransport | None:
        """The transport to its dashboard through the API server's service proxy (None inside the cluster)."""
        return self.kube.proxy_transport(urlsplit(self.dashboard_url).path)


def head_service_of(raycluster: dict[str, Any]) -> str:
    """KubeRay names the head service in status.head.serviceName (KubeRay >= 1.1), else <cluster>-head-svc."""
    status = raycluster.get("status") or {}
    return str((status.get("head") or {}).get("serviceName") or f"{raycluster['metadata']['name']}-head-svc")


def cluster_of(obj: dict[str, Any]) -> str | None:
    """The RayCluster a RayCluster, RayJob or RayService runs on (None: none yet)."""
    status = obj.get("status") or {}
    if obj["kind"] == "RayCluster":
        return str(obj["metadata"]["name"])
    if obj["kind"] == "RayJob":
        return status.get("rayClusterName") or (obj.get("spec") or {}).get("clusterSelector", {}).get(
            CLUSTER_LABEL
        )
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
    return active or (status.get("pendingServiceStatus") or {}).get("rayClusterName")


async def resolve_target(kube: Kube, name: str) -> RayTarget:
    """Find the object and the head service its dashboard answers on (the port named ``dashboard``)."""
    obj = await kube.find_ray(name)
    kind = str(obj["kind"])
    cluster = cluster_of(obj)
    if cluster is None:
        raise ClusterUnavailable(
            f"{kind} {name!r} in namespace {kube.namespace!r} has no RayCluster yet (status "
            f"{_state_word(obj)}). Wait for KubeRay to create it, or describe it with kuberay_status."
        )
    if kind == "RayService":
        service = f"{name}-head-svc"  # KubeRay keeps it pointed at the active cluster across upgrades
    else:
        service = head_service_of(await kube.get_ray("rayclusters", cluster))
    ports = ((await kube.service(service)).get("spec") or {}).get("ports") or []
    port = next((int(p["port"]) for p in ports if p.get("name") == DASHBOARD_PORT_NAME), 8265)
    return RayTarget(kube, kind, name, cluster, service, kube.dashboard_url(service, port))


def _state_word(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    for key in ("state", "jobDeploymentStatus", "serviceStatus"):
        if status.get(key):
            return str(status[key])
    return "unknown"
