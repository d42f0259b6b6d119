"""A RayService's incremental upgrade (NewClusterWithIncrementalUpgrade, beta in KubeRay 1.7): kuberay_status
shows its step and traffic split from KubeRay's own status, through the loopback Kubernetes API server of
tests/kube_apiserver.py (no Kubernetes runs here; the RayService is checked against KubeRay's vendored CRD)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.kuberay_objects import (
    CLUSTER,
    NS,
    head_service,
    raycluster,
    sample,
    settings_for,
    status_text,
    validate,
)
from tests.support import mcp_client

PENDING = "rayservice-sample-raycluster-new"


def incremental(active: tuple[int, int], pending: tuple[int, int]) -> dict[str, Any]:
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["spec"]["upgradeStrategy"] = {
        "type": "NewClusterWithIncrementalUpgrade",
        "clusterUpgradeOptions": {
            "gatewayClassName": "istio",
            "maxSurgePercent": 20,
            "stepSizePercent": 5,
            "intervalSeconds": 10,
        },
    }
    rs["status"] = {
        "serviceStatus": "Running",
        "activeServiceStatus": {
            "rayClusterName": CLUSTER,
            "targetCapacity": active[0],
            "trafficRoutedPercent": active[1],
            "applicationStatuses": {"fruit_app": {"status": "RUNNING"}},
        },
        "pendingServiceStatus": {
            "rayClusterName": PENDING,
            "targetCapacity": pending[0],
            "trafficRoutedPercent": pending[1],
            "lastTrafficMigratedTime": "2026-12-04T14:05:00Z",
        },
    }
    return validate(rs)


@pytest.mark.parametrize(
    ("active", "pending", "step"),
    [
        ((100, 85), (20, 15), "shifting traffic: 15% of 20% routed to the pending cluster"),
        ((100, 80), (20, 20), "scaling the active cluster down from 100% (total capacity 120%)"),
        ((80, 80), (20, 20), "scaling the pending cluster up from 20% capacity"),
    ],
)
async def test_kuberay_status_shows_an_incremental_upgrades_step_and_traffic_split(
    kube: Any, active: tuple[int, int], pending: tuple[int, int], step: str
) -> None:
    state, kubeconfig = kube
    state.put(raycluster(PENDING))
    state.put(incremental(active, pending))
    state.put(head_service("rayservice-sample-head-svc"))
    state.dashboards["rayservice-sample-head-svc"] = next(iter(state.dashboards.values()))
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayservice-sample")) as client:
        text, data = await status_text(client)
    upgrade = data["upgrade"]
    assert upgrade["step"] == step, upgrade
    assert upgrade["pending"] == {
        "cluster": PENDING,
        "target_capacity": pending[0],
        "traffic_percent": pending[1],
        "last_traffic_migrated": "2026-12-04T14:05:00Z",
    }
    assert upgrade["max_surge_percent"] == 20 and upgrade["step_size_percent"] == 5
    assert (
        f"Traffic split: active {CLUSTER} {active[0]}% capacity, {active[1]}% of traffic; "
        f"pending {PENDING} {pending[0]}% capacity, {pending[1]}% of traffic" in text
    ), text


async def test_a_new_cluster_upgrade_has_no_incremental_step(kube: Any) -> None:
    state, kubeconfig = kube
    rs = incremental((100, 100), (0, 0))
    rs["spec"]["upgradeStrategy"] = {"type": "NewCluster"}
    state.put(raycluster(PENDING))
    state.put(rs)
    state.put(head_service("rayservice-sample-head-svc"))
    state.dashboards["rayservice-sample-head-svc"] = next(iter(state.dashboards.values()))
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayservice-sample")) as client:
        text, data = await status_text(client)
    assert "upgrade" not in data and "Incremental upgrade" not in text, text
