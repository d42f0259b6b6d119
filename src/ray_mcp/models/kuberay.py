"""Output models of the Kubernetes tools (KubeRay objects, their pods and events)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ray_mcp.models.logs import Logged, LogRun


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


# The classes of what the Kubernetes layer shows wrong: each finding's verdict, and a KubeStatus's verdict when
# it has findings. The one list of them (shaping/kuberay.py makes them; diagnosis/rules/kuberay.py gives each its kind and rank).
KubeVerdict = Literal[
    "unschedulable",
    "image pull failing",
    "stuck in init",
    "cannot start",
    "OOMKilled",
    "evicted",
    "pod failed",
    "crash looping",
    "no pods",
    "status disagrees",
    "RayJob failed",
    "upgrade stuck",
    "serve app failing",
]


class KubeFinding(BaseModel):
    verdict: KubeVerdict
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


class UpgradeSide(BaseModel):
    cluster: str | None = None
    target_capacity: int | None = Field(default=None, description="Percent of its Serve replicas it may run.")
    traffic_percent: int | None = Field(default=None, description="Percent of the traffic routed to it.")
    last_traffic_migrated: str | None = None


class ServiceUpgrade(BaseModel):
    """A RayService's incremental upgrade (NewClusterWithIncrementalUpgrade) as KubeRay reports it."""

    step: str = Field(
        description="scale up the pending cluster, shift traffic, scale down the active cluster, or done."
    )
    active: UpgradeSide
    pending: UpgradeSide
    max_surge_percent: int | None = None
    step_size_percent: int | None = None
    interval_s: int | None = None


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
    upgrade: ServiceUpgrade | None = Field(
        default=None, description="A RayService's incremental upgrade: its step and traffic split."
    )


class KubeLog(Logged, LogRun):
    """A pod container's log tail: one run of lines, fitted at the edge like every log answer."""

    pod: str
    container: str | None = None
    previous: bool
    lines: list[str]
    truncated: bool
    hints: list[str] = Field(default_factory=list)


class KubeChange(BaseModel):
    """What scale_worker_group or delete_ray_job did (or would do, for a dry run)."""

    object: str
    namespace: str
    action: Literal["scale", "delete"]
    done: bool
    dry_run: bool = False
    confirm_token: str | None = None
    message: str


# -- the fleet ------------------------------------------------------------------------------------------------


class FleetGroup(BaseModel):
    """A worker group of a row's RayCluster: pods ready of those desired (its replicas)."""

    name: str
    ready: int
    desired: int | None = None


class FleetRow(BaseModel):
    """One KubeRay object of the fleet (or one cluster a History Server keeps), verdict first."""

    kind: Literal["RayCluster", "RayJob", "RayService", "RayCronJob", "record"]
    namespace: str
    name: str
    context: str | None = Field(default=None, description="The kubeconfig context it was listed in.")
    address: str | None = Field(
        default=None,
        description="The address every other tool takes for it (--address, a clusters file).",
    )
    verdict: str = Field(
        description="kuberay_status's verdict for it: healthy, or the first finding's class."
    )
    ray_verdict: str | None = Field(
        default=None,
        description="cluster_health's verdict when its dashboard answered in time, else unknown: why.",
    )
    state: str
    cluster: str | None = Field(default=None, description="The RayCluster it runs on.")
    groups: list[FleetGroup] = []
    gpus_requested: float = Field(default=0, description="GPUs its pods' containers ask for (limits).")
    gpus_used: float | None = Field(default=None, description="GPUs Ray has in use there (None: unknown).")
    age_s: float | None = None
    finding: str | None = Field(default=None, description="The first finding, in one line.")


class Fleet(BaseModel):
    """KubeRay objects across namespaces (and contexts), roll-ups first."""

    rollup: str
    unhealthy: int
    gpus_idle: float | None = Field(
        default=None, description="GPUs asked for and not in use by Ray (None: unknown)."
    )
    upgrades_stuck: int
    rows: list[FleetRow]
    total_listed: int = Field(description="Objects on this page, before the row limit.")
    next_page: str | None = Field(default=None, description="Pass as page to list the next objects.")
    scopes: list[str] = Field(default_factory=list, description="Where it listed: contexts and namespaces.")
    notes: list[str] = []
    hint: str | None = None


# -- changes as a plan ----------------------------------------------------------------------------------------


class FieldChange(BaseModel):
    path: str
    before: str | None = None
    after: str | None = None


# What the operator will do with a RayService update (shaping/kube_changes.py decides it).
OutcomeKind = Literal[
    "serve_in_place",
    "cluster_in_place",
    "new_cluster",
    "incremental_upgrade",
    "replicas_only",
    "held",
    "nothing",
]


class ServiceOutcome(BaseModel):
    kind: OutcomeKind
    text: str


class LintFinding(BaseModel):
    """A spec that will fail, or fail to do what it says: the field, why, and the fix."""

    rule: str = Field(description="The failure class.")
    severity: Literal["error", "warning"]
    field: str
    why: str
    fix: str


class LintReport(BaseModel):
    verdict: str
    findings: list[LintFinding]
    checked: list[str] = Field(description="The rules that ran.")
    unknown: list[str] = Field(default_factory=list, description="Rules that could not run, and why.")


class KubePlan(BaseModel):
    """A change to a KubeRay object: the dry run's field diff, what the operator will do, the lint, and the
    token bound to exactly this change (or what was done, once confirmed)."""

    object: str
    namespace: str
    action: Literal["create", "update", "delete"]
    done: bool
    diff: list[FieldChange] = []
    diff_total: int = 0
    diff_digest: str
    takes_over: list[str] = Field(default_factory=list, description="Fields other field managers own now.")
    outcome: list[ServiceOutcome] = []
    lint: LintReport | None = None
    confirm_token: str | None = None
    message: str
