"""Output models of the Kubernetes tools (KubeRay objects, their pods and events)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class PodState(BaseModel):
    name: str
    node_type: str | None = None
    group: str | None = None
    phase: str
    reason: str | None = None
    message: str | None = None
    ready: bool
    restarts: int
    waiting: str | None = None
    waiting_message: str | None = None
    in_init: str | None = None
    last_terminated: str | None = None
    unschedulable: str | None = None
    node: str | None = None
    containers: list[str] = []


class KubeEvent(BaseModel):
    object: str
    type: str
    reason: str
    message: str
    count: int
    last_seen: str | None = None


class KubeFinding(BaseModel):
    verdict: str
    text: str
    pod: str | None = None
    group: str | None = None


class WorkerGroup(BaseModel):
    name: str
    replicas: int | None = None
    min_replicas: int | None = None
    max_replicas: int | None = None
    ready: int | None = None
    suspended: bool | None = None
    autoscaled: bool


class KubeStatus(BaseModel):
    """A KubeRay object, verdict first: what is wrong, its pods and events."""

    verdict: str = Field(description="healthy, or the first finding's class (unschedulable, OOMKilled...).")
    kind: str
    name: str
    namespace: str
    summary: str
    findings: list[KubeFinding] = []
    details: list[str] = []
    groups: list[WorkerGroup] = []
    pods: list[PodState] = []
    pods_total: int = 0
    pods_shown: int = 0
    events: list[KubeEvent] = []
    events_total: int = 0
    hint: str | None = None


class KubeLog(BaseModel):
    pod: str
    container: str | None = None
    previous: bool
    lines: list[str]
    truncated: bool
    hint: str | None = None


class KubeChange(BaseModel):
    """What scale_worker_group or delete_ray_job did (or would do, for a dry run)."""

    object: str
    namespace: str
    action: Literal["scale", "delete"]
    done: bool
    dry_run: bool = False
    confirm_token: str | None = None
    message: str
