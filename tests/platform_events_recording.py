"""A recorded answer of Ray 2.60's ``/api/v0/platform_events`` on a KubeRay head, made by Ray's own code.

One machine cannot produce Kubernetes events, so the answer is built the way the head builds it: each Kubernetes
event below (CoreV1Event fields, as the API server sends them for the pods of RayCluster ``raycluster-demo``) goes
through the installed Ray's ``KubernetesEventProvider._process_k8s_event`` (the head's pod-events watcher), then
the route's own steps (``PlatformEventsHead.get_platform_events``: newest first, ``message_to_dict``,
``rest_response``). ``python -m tests.platform_events_recording`` rewrites tests/recorded_routes/platform_events_kuberay.json;
tests/test_platform_events.py fails when the file is no longer what the installed Ray makes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

RECORDING = Path(__file__).parent / "recorded_routes" / "platform_events_kuberay.json"
CLUSTER, NAMESPACE = "raycluster-demo", "default"
GPU_POD = "raycluster-demo-gpu-group-worker-x7k2p"
CPU_POD = "raycluster-demo-cpu-group-worker-9qv4m"
IMAGE_POD = "raycluster-demo-cpu-group-worker-2b8fz"
HEAD_POD = "raycluster-demo-head-5tqkd"


def _event(
    n: int, pod: str, kind: str, reason: str, message: str, component: str, at: datetime, count: int = 1
) -> NS:
    return NS(
        involved_object=NS(kind="Pod", name=pod),
        metadata=NS(uid=f"6f1c2d3e-0000-4000-8000-{n:012d}", namespace=NAMESPACE),
        type=kind,
        reason=reason,
        message=message,
        series=None,
        last_timestamp=at,
        event_time=None,
        first_timestamp=at,
        source=NS(component=component),
        reporting_component="",
        count=count,
    )


def k8s_events(base: datetime) -> list[NS]:
    """The pods' events: the head came up; a GPU worker cannot be scheduled; a CPU worker was evicted; another's
    image cannot be pulled."""

    def at(minute: int) -> datetime:
        return base.replace(minute=minute)

    return [
        _event(1, HEAD_POD, "Normal", "Scheduled", f"Successfully assigned {NAMESPACE}/{HEAD_POD} to node-1",
               "default-scheduler", at(0)),
        _event(2, HEAD_POD, "Normal", "Pulled", 'Container image "rayproject/ray:2.60.0" already present on machine',
               "kubelet", at(1)),
        _event(3, GPU_POD, "Warning", "FailedScheduling",
               "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No "
               "preemption victims found for incoming pod.", "default-scheduler", at(5), count=7),
        _event(4, CPU_POD, "Normal", "Scheduled", f"Successfully assigned {NAMESPACE}/{CPU_POD} to node-2",
               "default-scheduler", at(2)),
        _event(5, CPU_POD, "Warning", "Evicted",
               "The node was low on resource: memory. Threshold quantity: 100Mi, available: 91Mi. Container "
               "ray-worker was using 3Gi, request is 1Gi, has larger consumption of memory.", "kubelet", at(6)),
        _event(6, IMAGE_POD, "Normal", "Scheduled", f"Successfully assigned {NAMESPACE}/{IMAGE_POD} to node-3",
               "default-scheduler", at(3)),
        _event(7, IMAGE_POD, "Warning", "Failed",
               'Failed to pull image "rayproject/ray:2.99.0": rpc error: code = NotFound desc = failed to pull and '
               'unpack image "docker.io/rayproject/ray:2.99.0": not found', "kubelet", at(4), count=3),
        _event(8, IMAGE_POD, "Normal", "BackOff", 'Back-off pulling image "rayproject/ray:2.99.0"', "kubelet",
               at(7), count=12),
    ]  # fmt: skip


def ray_answer(base: datetime) -> dict[str, Any]:
    """The route's answer, as Ray 2.60's head makes it from these events."""
    from ray.dashboard.modules.platform_events.providers.k8s_provider import KubernetesEventProvider
    from ray.dashboard.routes import rest_response
    from ray.dashboard.utils import HTTPStatusCode, message_to_dict

    delivered: list[Any] = []
    provider = KubernetesEventProvider(delivered.append)
    provider._cluster_name, provider._namespace = CLUSTER, NAMESPACE
    for event in k8s_events(base):
        provider._process_k8s_event(event)
    newest_first = sorted(
        delivered, key=lambda e: e.timestamp.seconds + e.timestamp.nanos / 1e9, reverse=True
    )
    payload = [message_to_dict(e, always_print_fields_with_no_presence=True) for e in newest_first]
    response = rest_response(HTTPStatusCode.OK, "Retrieved platform events", events=payload)
    return dict(json.loads(response.body))


RECORDED_AT = datetime(2026, 12, 4, 10, 0, tzinfo=UTC)

if __name__ == "__main__":
    RECORDING.write_text(json.dumps(ray_answer(RECORDED_AT), indent=1) + "\n")
    print(f"wrote {RECORDING}")
