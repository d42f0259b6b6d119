"""Issue 39, pattern 8 on the loopback Kubernetes API in front of the session's real head (the fake of
tests/kube_apiserver.py, as test_kuberay.py uses it): an init container Kubernetes could not create is named with
its message, not called crash-looping."""

from __future__ import annotations

from typing import Any

import pytest
from tests.kuberay_objects import (
    CLUSTER,
    HEAD_SVC,
    NS,
    head_pod,
    head_service,
    pod,
    raycluster,
    sample,
    settings_for,
    status_text,
    validate,
)
from tests.support import mcp_client

pytestmark = pytest.mark.live

MISSING_CONFIGMAP = 'configmap "train-init-script" not found'


async def test_an_init_container_never_created_is_named_with_its_message_not_crash_looping(
    kube: Any,
) -> None:
    state, kubeconfig = kube
    name = f"{CLUSTER}-workergroup-worker-x7"
    state.put(
        pod(
            name,
            CLUSTER,
            "worker",
            group="workergroup",
            status={
                "phase": "Pending",
                "initContainerStatuses": [
                    {
                        "name": "wait-gcs-ready",
                        "image": "rayproject/ray:2.46.0",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {"reason": "CreateContainerConfigError", "message": MISSING_CONFIGMAP}
                        },
                    }
                ],
            },
        )
    )
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, _ = await status_text(client)
    head = text[:300]
    assert head.startswith("CANNOT START:") and name in head and "train-init-script" in head, head
    assert "crash" not in head.lower().replace("not crash-looping", ""), head


DEPLOYMENT_MESSAGE = (
    "The deployment failed to start 3 times in a row. This may be due to a problem with its constructor or "
    "initial health check failing. See controller logs for details. Error:\n"
    "Traceback (most recent call last):\n"
    '  File "/home/ray/serve_app/ranker.py", line 12, in __init__\n'
    "    self.model = load(path)\n"
    "FileNotFoundError: [Errno 2] No such file or directory: '/models/ranker-v2.pt'"
)


async def test_a_serve_app_failing_on_a_rayservices_new_cluster_quotes_its_deployments_exception(
    kube: Any,
) -> None:
    state, kubeconfig = kube
    pending = "rayservice-sample-raycluster-v3"
    state.put(raycluster(pending))
    state.put(head_pod(pending))
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["status"] = {
        "serviceStatus": "Running",
        "activeServiceStatus": {
            "rayClusterName": CLUSTER,
            "applicationStatuses": {"ranker": {"status": "RUNNING"}},
        },
        "pendingServiceStatus": {
            "rayClusterName": pending,
            "applicationStatuses": {
                "ranker": {
                    "status": "DEPLOY_FAILED",
                    "message": "Deploying application ranker failed: the deployments ['Ranker'] are UNHEALTHY.",
                    "serveDeploymentStatuses": {
                        "Ranker": {"status": "UNHEALTHY", "message": DEPLOYMENT_MESSAGE},
                    },
                }
            },
        },
    }
    state.put(validate(rs))
    state.put(head_service("rayservice-sample-head-svc"))
    state.dashboards["rayservice-sample-head-svc"] = state.dashboards[HEAD_SVC]
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayservice-sample")) as client:
        text, _ = await status_text(client)
    head = text[:600]
    assert head.startswith("SERVE APP FAILING:") and "Ranker" in head and "UNHEALTHY" in head, head
    assert "FileNotFoundError" in head and "/models/ranker-v2.pt" in head, head
