"""The records the sources return: Ray's own rows, typed, with their basic fields apart from their detail fields
the way Ray's ``ray.util.state.common`` splits them (``state_column(detail=...)``; ``base_columns()``).

A ``<Kind>Basic`` holds the columns the State API returns by default; ``<Kind>`` adds the ones it returns with
``detail=1``. They are TypedDicts: at run time a record is the dict Ray sent (shaping reads it unchanged), and
a type checker sees which fields exist. tests/test_records.py holds every field set against Ray's installed
classes, so a Ray upgrade that moves a column fails loudly.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypedDict, TypeVar

R = TypeVar("R")


class StateList(TypedDict, Generic[R]):
    """One State API list (Ray's ListApiResponse): the rows, and the counts that say how complete they are.

    ``total``: every record of the kind the source holds (for tasks, only those it read); ``num_after_truncation``:
    how many Ray read (its cap is limits.STATE_API_MAX_ROWS); ``num_filtered``: how many of those matched the
    filters; ``result``: at most ``limit`` of the matching ones. The warnings are Ray's own words."""

    total: int
    num_after_truncation: int
    num_filtered: int
    result: list[R]
    partial_failure_warning: str | None
    warnings: list[str] | None


class ActorBasic(TypedDict, total=False):
    actor_id: str
    class_name: str
    state: Literal["DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"]
    job_id: str
    name: str | None
    node_id: str | None
    pid: int | None
    ray_namespace: str | None


class Actor(ActorBasic, total=False):
    serialized_runtime_env: str | None
    required_resources: dict[str, Any] | None
    death_cause: dict[str, Any] | None
    is_detached: bool | None
    placement_group_id: str | None
    repr_name: str | None
    num_restarts: int
    num_restarts_due_to_lineage_reconstruction: int
    num_restarts_due_to_node_preemption: int
    call_site: str | None
    label_selector: dict[str, Any] | None
    fallback_strategy: dict[str, Any] | None


class NodeBasic(TypedDict, total=False):
    node_id: str
    node_ip: str
    is_head_node: bool
    state: Literal["ALIVE", "DEAD"]
    state_message: str | None
    node_name: str
    resources_total: dict[str, float]
    labels: dict[str, str]


class Node(NodeBasic, total=False):
    start_time_ms: int | None
    end_time_ms: int | None


class TaskBasic(TypedDict, total=False):
    task_id: str
    attempt_number: int
    name: str
    state: str
    job_id: str
    actor_id: str | None
    type: Literal["NORMAL_TASK", "ACTOR_CREATION_TASK", "ACTOR_TASK", "DRIVER_TASK"]
    func_or_class_name: str
    parent_task_id: str
    node_id: str | None
    worker_id: str | None
    worker_pid: int | None
    error_type: str | None


class Task(TaskBasic, total=False):
    language: str | None
    required_resources: dict[str, Any] | None
    runtime_env_info: dict[str, Any] | None
    placement_group_id: str | None
    events: list[dict[str, Any]] | None
    profiling_data: dict[str, Any] | None
    creation_time_ms: int | None
    start_time_ms: int | None
    end_time_ms: int | None
    task_log_info: dict[str, Any] | None
    error_message: str | None
    is_debugger_paused: bool | None
    call_site: str | None
    label_selector: dict[str, Any] | None
    fallback_strategy: dict[str, Any] | None


class PlacementGroupBasic(TypedDict, total=False):
    placement_group_id: str
    name: str
    creator_job_id: str
    state: Literal["PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"]


class PlacementGroup(PlacementGroupBasic, total=False):
    bundles: list[dict[str, Any]] | None
    is_detached: bool | None
    stats: dict[str, Any] | None
    topology_strategy: dict[str, Any] | None
    topology_assignments: dict[str, Any] | None


class WorkerBasic(TypedDict, total=False):
    worker_id: str
    is_alive: bool
    worker_type: Literal["WORKER", "DRIVER", "SPILL_WORKER", "RESTORE_WORKER"]
    exit_type: str | None
    node_id: str
    ip: str
    pid: int


class Worker(WorkerBasic, total=False):
    exit_detail: str | None
    worker_launch_time_ms: int | None
    worker_launched_time_ms: int | None
    start_time_ms: int | None
    end_time_ms: int | None
    debugger_port: int | None
    num_paused_threads: int | None


class ClusterEventBasic(TypedDict, total=False):
    severity: str
    time: str
    source_type: str
    message: str
    event_id: str


class ClusterEvent(ClusterEventBasic, total=False):
    custom_fields: dict[str, Any] | None


class ObjectBasic(TypedDict, total=False):
    object_id: str
    object_size: int
    task_status: str
    attempt_number: int
    reference_type: str
    call_site: str
    type: str
    pid: int
    ip: str


class Object(ObjectBasic, total=False):
    pass  # Ray's ObjectState has no detail column


class JobBasic(TypedDict, total=False):
    type: str
    job_id: str | None
    submission_id: str | None
    driver_info: dict[str, Any] | None
    status: str
    entrypoint: str
    message: str | None
    error_type: str | None


class Job(JobBasic, total=False):
    """A job as the Jobs API (``/api/jobs/``: Ray's JobDetails) and the State API (JobState) both give it."""

    start_time: int | None
    end_time: int | None
    metadata: dict[str, str] | None
    runtime_env: dict[str, Any] | None
    driver_agent_http_address: str | None
    driver_node_id: str | None
    driver_exit_code: int | None


# Each State API resource: (its basic record, its whole record, Ray's schema class in ray.util.state.common).
STATE_RECORDS: dict[str, tuple[type, type, str]] = {
    "actors": (ActorBasic, Actor, "ActorState"),
    "nodes": (NodeBasic, Node, "NodeState"),
    "tasks": (TaskBasic, Task, "TaskState"),
    "placement_groups": (PlacementGroupBasic, PlacementGroup, "PlacementGroupState"),
    "workers": (WorkerBasic, Worker, "WorkerState"),
    "cluster_events": (ClusterEventBasic, ClusterEvent, "ClusterEventState"),
    "objects": (ObjectBasic, Object, "ObjectState"),
    "jobs": (JobBasic, Job, "JobState"),
}


def basic_columns(record: type) -> frozenset[str]:
    """The basic fields of a State API resource's record (a ``<Kind>Basic``)."""
    return frozenset(record.__annotations__)


def columns(record: type) -> frozenset[str]:
    """Every field of a record (a TypedDict's annotations include its bases')."""
    return frozenset(record.__annotations__)
