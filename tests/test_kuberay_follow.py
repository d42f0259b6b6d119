"""Issue 39, pattern 8 on the loopback Kubernetes API in front of the session's real head (the fake of
tests/kube_apiserver.py, as test_kuberay.py uses it): an init container Kubernetes could not create is named with
its message, not called crash-looping."""

from __future__ import annotations

from typing import Any

import pytest
from tests.support import mcp_client
from tests.test_kuberay import CLUSTER, kube, pod, settings_for, status_text  # noqa: F401  (kube: a fixture)

pytestmark = pytest.mark.live

MISSING_CONFIGMAP = 'configmap "train-init-script" not found'


async def test_an_init_container_never_created_is_named_with_its_message_not_crash_looping(
    kube: Any,  # noqa: F811  (the fixture imported above)
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
