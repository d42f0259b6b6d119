"""Output models of job_topology (placement groups, bundles, actors, Serve, nodes) and the Ray Train tools."""

from typing import Literal

from pydantic import BaseModel, Field

from ray_mcp.models.core import DeathCause, Listed, ResourceUse

GapKind = Literal[
    "unplaced_bundle",
    "empty_bundle",
    "dead_rank",
    "short_group",
    "pending_actor",
    "restarting_actor",
    "idle_gpu_node",
    "memory_pressure",
    "dead_node",
]


class Gap(BaseModel):
    """One structural problem, stated plainly, with the ids to act on."""

    kind: GapKind
    text: str
    placement_group_id: str | None = None
    bundle_index: int | None = None
    actor_id: str | None = None
    node_id: str | None = None


class TopoActor(BaseModel):
    actor_id: str
    class_name: str
    state: str = Field(description="DEPENDENCIES_UNREADY, PENDING_CREATION, ALIVE, RESTARTING or DEAD.")
    name: str | None = None
    pid: int | None = None
    restarts: int | None = None
    node_id: str | None = None
    job_id: str | None = Field(default=None, description="Set when it differs from the job asked about.")
    placement_group_id: str | None = None
    bundle_index: int | None = Field(
        default=None, description="The bundle it occupies; None if unknown (asked for any bundle, index -1)."
    )
    any_bundle: bool | None = Field(
        default=None, description="True if it asked for any bundle (index -1) and Ray put it in bundle_index."
    )
    resources: dict[str, float] = Field(default_factory=dict, description="What it asked for (Ray's names).")
    accelerator_ids: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Accelerator ids Ray assigned it, per resource ('GPU': ['0']); kept for dead actors.",
    )
    gpu_devices: list[str] = Field(
        default_factory=list, description="Physical GPUs its process uses (index and name), where reported."
    )
    spawned_by: str | None = Field(
        default=None, description="The Serve replica (app/deployment#replica) whose process created it."
    )
    death_cause: DeathCause | None = None


class TopoBundle(BaseModel):
    index: int
    resources: dict[str, float]
    node_id: str | None = Field(default=None, description="Where it landed; None while unplaced.")
    actor_ids: list[str] = Field(default_factory=list, description="Actors placed in this bundle.")


class TopoGroup(BaseModel):
    placement_group_id: str
    name: str | None = None
    state: str
    strategy: str | None = None
    bundles_total: int
    live_actors: int = Field(description="ALIVE actors placed in the group (any bundle).")
    bundles: list[TopoBundle] = Field(default_factory=list)
    any_bundle_actor_ids: list[str] = Field(
        default_factory=list, description="Actors placed in the group without a bundle index."
    )
    topology_strategy: dict[str, str] | None = None
    topology_assignments: dict[str, str] | None = None


class TopoReplica(BaseModel):
    replica_id: str | None = None
    state: str
    actor_id: str | None = None
    node_id: str | None = None
    pid: int | None = None
    spawned_actor_ids: list[str] = Field(default_factory=list)


class TopoDeployment(BaseModel):
    name: str
    status: str
    replicas: list[TopoReplica] = Field(default_factory=list)


class TopoServeApp(BaseModel):
    name: str
    status: str
    deployments: list[TopoDeployment] = Field(default_factory=list)


class TopoServe(BaseModel):
    attributed: bool = Field(description="True when the applications are linked to this job.")
    controller_job_id: str | None = None
    how: str = Field(description="How the link was made, or why there is none.")
    apps: list[TopoServeApp] = Field(default_factory=list)


class TopoGPU(BaseModel):
    index: int | None = None
    name: str | None = None
    utilization_percent: float | None = None
    memory_used: float | None = Field(default=None, description="Bytes.")
    memory_total: float | None = Field(default=None, description="Bytes.")


class TopoNode(BaseModel):
    node_id: str
    label: str = Field(description="Short name used in the text tree (n1, n2, ...).")
    ip: str
    state: Literal["ALIVE", "DEAD"]
    is_head: bool
    resources: dict[str, ResourceUse] = Field(
        default_factory=dict, description="Logical resources: used (by anyone) and total."
    )
    job_share: dict[str, float] = Field(
        default_factory=dict,
        description="What this job holds here: its placement-group bundles plus its actors outside groups.",
    )
    cpu_percent: float | None = Field(default=None, description="Host CPU use (dashboard agent).")
    memory_used_fraction: float | None = Field(
        default=None,
        description="Host memory in use (total - available) / total, as the memory monitor sees it.",
    )
    memory_pressure: bool | None = Field(
        default=None, description="At or above Ray's memory monitor threshold (see memory_threshold)."
    )
    object_store_used: float | None = Field(default=None, description="Bytes in the object store now.")
    gpus: list[TopoGPU] = Field(
        default_factory=list, description="Physical GPUs, where the node reports them."
    )
    actors: int = Field(default=0, description="ALIVE actors of this job here.")
    bundles: int = Field(default=0, description="Bundles of this job's placement groups here.")
    driver: bool = False
    death_reason: str | None = None


class JobTopology(BaseModel):
    verdict: str
    job: str
    job_id: str
    submission_id: str | None = None
    status: str
    driver_node_id: str | None = None
    driver_ip: str | None = None
    driver_pid: int | None = None
    gaps: list[Gap] = Field(default_factory=list)
    gaps_total: int = 0
    placement_groups: list[TopoGroup] = Field(default_factory=list)
    placement_groups_total: int = 0
    actors: list[TopoActor] = Field(default_factory=list)
    actors_total: int = Field(default=0, description="Actors of the job, and others in its groups (exact).")
    actors_by_state: dict[str, int] = Field(default_factory=dict)
    serve: TopoServe | None = None
    nodes: list[TopoNode] = Field(default_factory=list)
    memory_threshold: float = Field(description="The memory fraction flagged as pressure.")
    notes: list[str] = Field(default_factory=list, description="What could not be checked, caps applied.")
    hints: list[str] = Field(default_factory=list)


# -- Ray Train (list_train_runs, get_train_run) ---------------------------------------------------------------


class TrainWorker(BaseModel):
    world_rank: int
    local_rank: int | None = None
    node_rank: int | None = None
    actor_id: str | None = None
    node_id: str | None = None
    node_ip: str | None = None
    pid: int | None = None
    gpu_ids: list[int] = Field(default_factory=list)
    status: str | None = Field(default=None, description="ALIVE or DEAD (the worker's actor).")
    resources: dict[str, float] = Field(default_factory=dict)
    error: str | None = Field(default=None, description="This rank's error in the latest attempt, if any.")


class TrainRankError(BaseModel):
    ranks: list[int] = Field(description="World ranks that failed with this error (Ray groups equal errors).")
    error_type: str | None = None
    message: str = Field(description="The error snippet Ray recorded, cut to a budget.")


class TrainCheckpoint(BaseModel):
    source: str = Field(description="Where this was read: the checkpoint manager's snapshot file.")
    checkpoint_dir: str | None = Field(default=None, description="The latest checkpoint's directory.")
    metrics: dict[str, object] = Field(default_factory=dict, description="Metrics reported with it.")
    checkpoints_kept: int | None = None
    reports: int | None = Field(default=None, description="ray.train.report calls the manager counted.")


class TrainRunSummary(BaseModel):
    run_id: str
    name: str
    status: str = Field(
        description="INITIALIZING, SCHEDULING, RUNNING, RESTARTING, RESIZING, FINISHED, ERRORED, ABORTED."
    )
    status_detail: str | None = None
    job_id: str | None = None
    submission_id: str | None = None
    started: str | None = Field(default=None, description="UTC start time.")
    duration_s: float | None = None
    attempts: int = 0
    workers: int | None = Field(default=None, description="Workers of the latest attempt.")


class TrainRunList(Listed):
    items_field = "runs"
    known: bool = Field(default=True, description="False: Ray keeps no Train state (notes say why).")
    total: int
    matched: int
    shown: int
    by_status: dict[str, int] = Field(default_factory=dict)
    runs: list[TrainRunSummary] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)


class TrainRun(TrainRunSummary):
    verdict: str
    controller_actor_id: str | None = None
    attempt_status: str | None = Field(default=None, description="The latest attempt's status.")
    attempt_status_detail: str | None = None
    scaling: dict[str, object] = Field(
        default_factory=dict, description="num_workers, use_gpu, resources, strategy."
    )
    storage: str | None = Field(default=None, description="The run's storage directory (storage_path/name).")
    worker_group: list[TrainWorker] = Field(default_factory=list, description="The latest attempt, by rank.")
    errors: list[TrainRankError] = Field(default_factory=list)
    latest_checkpoint: TrainCheckpoint | None = None
    framework_versions: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)
