"""The output models of the core areas: cluster_status and nodes, jobs, logs, actors, placement groups, tasks, Serve,
and the parts the other areas share (Listed, ListPage, DeathCause, ResourceUse).
"""

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from ray_mcp.limits import RESPONSE_BUDGET_BYTES, STATE_API_MAX_ROWS
from ray_mcp.models.data import JobDatasets

# A job in one of these statuses will not change again.
TERMINAL_JOB_STATUSES: frozenset[str] = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})


class ResourceUse(BaseModel):
    used: float = Field(description="Amount in use (bytes for memory and object_store_memory).")
    total: float = Field(description="Amount the node or cluster has.")


class GPUUse(BaseModel):
    index: int | None = None
    name: str | None = None
    utilization_percent: float | None = None
    memory_used: float | None = Field(default=None, description="Bytes.")
    memory_total: float | None = Field(default=None, description="Bytes.")


class HostUsage(BaseModel):
    """What a node's host really uses, from the dashboard agent (/nodes?view=summary), beside Ray's logical use."""

    cpu_percent: float | None = Field(default=None, description="Host CPU use, percent of all cores.")
    memory_used: float | None = Field(default=None, description="Bytes in use (total - available).")
    memory_total: float | None = Field(default=None, description="Bytes.")
    memory_fraction: float | None = Field(default=None, description="memory_used / memory_total.")
    memory_pressure: bool | None = Field(
        default=None,
        description="memory_fraction at or above Ray's memory monitor threshold (memory_usage_threshold, "
        "default 0.95), where Ray starts killing workers.",
    )
    object_store_used: float | None = Field(default=None, description="Bytes in the object store.")
    object_store_total: float | None = Field(default=None, description="Bytes.")
    gpus: list[GPUUse] = Field(
        default_factory=list, description="Physical GPUs, where the node reports them."
    )


class NodeStatus(BaseModel):
    node_id: str
    ip: str
    state: Literal["ALIVE", "DEAD"]
    is_head: bool
    resources: dict[str, ResourceUse] = Field(
        default_factory=dict, description="Per resource, used and total."
    )
    death_reason: str | None = Field(default=None, description="Why a DEAD node died, as Ray recorded it.")
    usage: HostUsage | None = Field(default=None, description="Host CPU, memory, object store and GPU use.")


class Demand(BaseModel):
    kind: Literal["task_or_actor", "placement_group", "request_resources"]
    bundles: list[dict[str, float]] = Field(description="The resource shape(s) asked for.")
    strategy: str | None = Field(default=None, description="Placement strategy, for placement groups.")
    count: int = Field(description="How many such requests wait.")
    infeasible: bool = Field(description="True if no node of the cluster (or node type) could ever hold it.")


class AutoscalerStatus(BaseModel):
    kind: Literal["legacy", "v2"]
    active_nodes: int
    pending_nodes: list[str] = Field(default_factory=list)
    pending_launches: dict[str, int] = Field(default_factory=dict)
    failed_nodes: list[str] = Field(default_factory=list)
    error: str | None = None
    decisions: list[str] = Field(
        default_factory=list,
        description="Its recent events, newest first: nodes it launched, removed or failed to launch, and why.",
    )


class ClusterStatus(BaseModel):
    dashboard_url: str
    source: str = Field(
        description="embedded (started by ray-mcp), local (found on this machine) or external."
    )
    ray_version: str
    session_name: str | None = None
    nodes_alive: int
    nodes_dead: int
    resources: dict[str, ResourceUse] = Field(description="Cluster-wide use over alive nodes.")
    nodes: list[NodeStatus]
    nodes_shown: int
    pending_demands: list[Demand] = Field(default_factory=list)
    pending_placement_groups: int = 0
    autoscaler: AutoscalerStatus | None = None
    memory_pressure_nodes: int = Field(
        default=0, description="Alive nodes at or above Ray's memory monitor threshold (0.95)."
    )
    notes: list[str] = Field(default_factory=list, description="What could not be read.")
    hints: list[str] = Field(default_factory=list)


# -- jobs (submit_job, get_job, list_jobs, wait_for_job, stop_job, delete_job) -----------------------------

JobStatusName = Literal["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]


class RuntimeEnvSpec(BaseModel):
    """The runtime_env of a job: what Ray's ``RuntimeEnv`` accepts, checked before anything is submitted."""

    model_config = ConfigDict(extra="forbid")

    working_dir: str | None = Field(
        default=None,
        description="A local dir under an upload root (uploaded) or a URI (s3://, gs://, https://…zip).",
    )
    py_modules: list[str] | None = Field(default=None, description="Local dirs or .whl (uploaded) or URIs.")
    excludes: list[str] | None = Field(default=None, description="gitignore patterns left out of uploads.")
    pip: list[str] | dict[str, Any] | str | None = Field(
        default=None, description='["pkg==1.0"], a requirements.txt path or {"packages": [...]}.'
    )
    uv: list[str] | dict[str, Any] | str | None = Field(default=None, description="As pip.")
    conda: dict[str, Any] | str | None = Field(default=None, description="Env name or environment.yml dict.")
    env_vars: dict[str, str] | None = None
    config: dict[str, Any] | None = Field(
        default=None, description='{"setup_timeout_seconds": int, "eager_install": bool}.'
    )
    image_uri: str | None = None
    py_executable: str | None = None
    worker_process_setup_hook: str | None = Field(
        default=None, description="module.function, run at worker start."
    )
    java_jars: list[str] | None = None


class JobInfo(BaseModel):
    submission_id: str | None = Field(default=None, description="The id given at submission (raysubmit_…).")
    job_id: str | None = Field(default=None, description="Ray's job id (hex), once the driver connected.")
    type: str = Field(description="SUBMISSION (through the Jobs API) or DRIVER (a script that ran ray.init).")
    status: str = Field(description="PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED.")
    entrypoint: str
    message: str | None = None
    error_type: str | None = Field(
        default=None,
        description="Why it failed: e.g. JOB_ENTRYPOINT_COMMAND_ERROR, RUNTIME_ENV_SETUP_FAILURE.",
    )
    driver_exit_code: int | None = None
    start_time: str | None = Field(default=None, description="UTC, ISO 8601.")
    end_time: str | None = Field(default=None, description="UTC, ISO 8601.")
    duration_s: float | None = Field(default=None, description="End (or now, if still running) minus start.")
    metadata: dict[str, str] | None = None
    runtime_env: dict[str, Any] | None = None
    driver_node_id: str | None = None
    data: JobDatasets | None = Field(default=None, description="Its Ray Data datasets (datasets=true).")


class JobSubmitted(BaseModel):
    submission_id: str
    status: str = Field(description="The status right after submission (usually PENDING).")
    entrypoint: str
    uploaded: list[str] = Field(
        default_factory=list, description="Local paths zipped and uploaded to the cluster."
    )
    hints: list[str] = Field(default_factory=list)


class JobSummary(BaseModel):
    submission_id: str | None = None
    job_id: str | None = None
    type: str
    status: str
    entrypoint: str
    start_time: str | None = None
    duration_s: float | None = None
    error_type: str | None = None


class EdgeBudget(BaseModel):
    """An answer the edge fits (shaping.common.tool_result) to a budget for the whole of it as sent:
    RESPONSE_BUDGET_BYTES, unless the caller asked for a bigger answer (``within``). Not sent, not in the schema."""

    _edge_budget_bytes: int = PrivateAttr(default=RESPONSE_BUDGET_BYTES)

    @property
    def sent_budget(self) -> int:
        return self._edge_budget_bytes

    def within(self, budget: int) -> Self:
        """This answer, to be sent within ``budget`` bytes: a caller who asked for more (tail_logs' or
        stack_traces' max_bytes) gets an answer that can hold it."""
        answer = self.model_copy()
        answer._edge_budget_bytes = budget
        return answer


class Listed(EdgeBudget):
    """A page of items that the edge fits (shaping.common.tool_result): when the whole answer as sent would pass
    its budget (EdgeBudget), the last items of ``items_field`` are left out and one note in ``notes_field`` says
    how many. A subclass names its list here, so that no tool carries fitting code of its own. An answer whose
    items are not one flat list (series in panels, stack groups and the processes that could not be read) says
    how it counts them and which go first (``item_count``, ``first``, ``left_out``): the edge decides how many.
    """

    items_field: ClassVar[str] = ""  # the field that holds the items ("" on a base that has none yet)
    items_noun: ClassVar[str] = (
        ""  # what they are, in the note ("placement groups"); the field's name if unset
    )
    notes_field: ClassVar[str] = "notes"  # where the note goes ("hints" for a page with no notes)
    next_step: ClassVar[str] = "narrow with filters or a lower limit"  # what the note advises

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # a misspelt declaration fails at import, not at the first answer too long to send
        super().__pydantic_init_subclass__(**kwargs)
        for name in (cls.items_field, cls.notes_field) if cls.items_field else ():
            if name not in cls.model_fields:
                raise TypeError(f"{cls.__name__} declares {name!r}, which is not one of its fields")

    def item_count(self) -> int:
        """The items the edge may leave out, the first of them the most important."""
        return len(getattr(self, self.items_field))

    def first(self, k: int) -> Self:
        """This page with only its first ``k`` items (and its count of what is shown saying so)."""
        items = getattr(self, self.items_field)
        return self.model_copy(update={self.items_field: items[:k], "shown": k})

    def left_out(self, cut: Self) -> str:
        """What ``cut`` (one of this page's ``first``) leaves out, in words: '3 more of these 40 actors'."""
        n = self.item_count()
        return f"{n - cut.item_count()} more of these {n} {self.items_noun or self.items_field.replace('_', ' ')}"


class JobList(Listed):
    items_field = "jobs"
    notes_field = "hints"

    jobs: list[JobSummary]
    total: int = Field(description="Jobs in the cluster.")
    matching: int = Field(description="Jobs that pass the filters.")
    shown: int
    hints: list[str] = Field(default_factory=list)


class JobWait(BaseModel):
    job: JobInfo
    finished: bool = Field(description="True if the job reached a terminal state.")
    timed_out: bool
    waited_s: float
    last_log_line: str | None = None
    hints: list[str] = Field(default_factory=list)


class JobChange(BaseModel):
    """What stop_job or delete_job did (or would do, for a dry run)."""

    job: str = Field(description="The id acted on.")
    action: Literal["stop", "delete"]
    done: bool = Field(description="True if the call changed the cluster.")
    status: str | None = Field(default=None, description="The job's status after the call.")
    dry_run: bool = False
    confirm_token: str | None = None
    message: str


# -- cluster state: actors, placement groups, nodes, tasks, serve ----------------------------------------------


class DeathCause(BaseModel):
    """Why an actor is DEAD, flattened from Ray's ``death_cause`` structure."""

    reason: str = Field(
        description="CREATION_TASK_ERROR, WORKER_DIED, RUNTIME_ENV_FAILED, OOM, NODE_DIED, ..."
    )
    error_type: str | None = Field(
        default=None, description="The exception class, when an exception killed it."
    )
    message: str | None = Field(
        default=None, description="Ray's message, or the exception's one-line summary."
    )
    exception: str | None = Field(default=None, description="The end of the exception text (traceback).")


class Actor(BaseModel):
    actor_id: str
    class_name: str
    state: str = Field(description="DEPENDENCIES_UNREADY, PENDING_CREATION, ALIVE, RESTARTING or DEAD.")
    name: str | None = None
    pid: int | None = None
    node_id: str | None = None
    restarts: int | None = None
    death_cause: DeathCause | None = None
    # detail=true only
    job_id: str | None = None
    namespace: str | None = None
    is_detached: bool | None = None
    placement_group_id: str | None = None
    repr_name: str | None = None
    required_resources: dict[str, float] | None = None
    runtime_env: str | None = None
    call_site: str | None = None
    label_selector: dict[str, str] | None = None
    fallback_strategy: Any = None  # Ray's options where label_selector matches no node
    # of restarts, those caused by node preemption: in the text only (tools/list's budget: see test_tool_listing)
    _restarts_preempted: int | None = PrivateAttr(default=None)


class ListPage(Listed):
    """The common head of every bounded list: exact totals, what is shown, and what to do next. Each subclass
    names its items' field (``items_field``, see Listed)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        if not cls.items_field:  # else its answers would go out unfitted, silently
            raise TypeError(f"{cls.__name__} is a list page: name its items' field (items_field)")
        super().__pydantic_init_subclass__(**kwargs)

    total: int = Field(description="How many exist in the cluster (before filters).")
    matched: int = Field(description="How many match the filters (exact).")
    shown: int = Field(description="How many are in this answer.")
    notes: list[str] = Field(default_factory=list, description="Clamped arguments, truncation, Ray warnings.")
    hints: list[str] = Field(default_factory=list, description="How to narrow the list or what to call next.")


class ActorList(ListPage):
    items_field = "actors"
    by_state: dict[str, int] = Field(default_factory=dict, description="Matching actors per state (exact).")
    actors: list[Actor] = Field(default_factory=list)


class Bundle(BaseModel):
    index: int
    resources: dict[str, float]
    label_selector: dict[str, str] | None = Field(
        default=None, description="The node labels it must land on."
    )
    node_id: str | None = Field(default=None, description="Where the bundle landed (None while pending).")


class PlacementGroup(BaseModel):
    placement_group_id: str
    name: str | None = None
    state: str = Field(description="PENDING, PREPARED, CREATED, REMOVED or RESCHEDULING.")
    strategy: str | None = Field(default=None, description="PACK, SPREAD, STRICT_PACK or STRICT_SPREAD.")
    creator_job_id: str | None = None
    is_detached: bool | None = None
    scheduling_state: str | None = Field(default=None, description="Ray's stats.scheduling_state.")
    bundles: list[Bundle] = Field(default_factory=list)
    why_pending: str | None = Field(
        default=None, description="For a PENDING group: the constraint that fails."
    )
    infeasible: bool | None = Field(
        default=None, description="For a PENDING group: True if it can never fit."
    )
    topology_strategy: dict[str, str] | None = Field(
        default=None,
        description="Label locality: each topology label key and its strategy (e.g. STRICT_PACK).",
    )
    topology_assignments: dict[str, str] | None = Field(
        default=None, description="The label value the scheduler chose per topology key (none yet: empty)."
    )


class PlacementGroupList(ListPage):
    items_field = "placement_groups"
    items_noun = "placement groups"
    by_state: dict[str, int] = Field(default_factory=dict)
    placement_groups: list[PlacementGroup] = Field(default_factory=list)


class Node(BaseModel):
    node_id: str
    ip: str
    state: Literal["ALIVE", "DEAD"]
    is_head: bool
    name: str | None = None
    resources_total: dict[str, float] = Field(default_factory=dict)
    resources_available: dict[str, float] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    death_reason: str | None = None
    usage: HostUsage | None = Field(default=None, description="Host CPU, memory, object store and GPU use.")


class NodeList(ListPage):
    items_field = "nodes"
    alive: int
    dead: int
    nodes: list[Node] = Field(default_factory=list)


class Task(BaseModel):
    task_id: str
    name: str
    state: str
    attempt: int | None = None
    type: str | None = None
    job_id: str | None = None
    actor_id: str | None = None
    node_id: str | None = None
    worker_pid: int | None = None
    error_type: str | None = None
    error_message: str | None = None


class TaskList(ListPage):
    items_field = "tasks"
    tasks: list[Task] = Field(default_factory=list)


class TaskGroup(BaseModel):
    name: str = Field(description="Function or actor method name.")
    type: str | None = None
    state_counts: dict[str, int]


class ErrorGroup(BaseModel):
    error_type: str
    count: int
    sample_task_id: str | None = None
    sample_name: str | None = None
    sample_message: str | None = None


class TaskSummary(BaseModel):
    total: int = Field(
        description=f"Tasks counted that match the filters (Ray reads at most {STATE_API_MAX_ROWS:,} tasks)."
    )
    in_cluster: int | None = Field(None, description="Tasks the cluster holds, when Ray read fewer.")
    left_out: int | None = Field(
        None, description=f"Tasks Ray did not read (its {STATE_API_MAX_ROWS:,} cap): not counted."
    )
    capped: bool = Field(False, description="Ray read as many tasks as it can: the counts are lower bounds.")
    by_state: dict[str, int]
    groups: list[TaskGroup]
    groups_total: int
    failed_by_error: list[ErrorGroup] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)


class ServeReplica(BaseModel):
    replica_id: str | None = None
    state: str
    actor_name: str | None = None
    actor_id: str | None = None
    pid: int | None = None
    node_id: str | None = None
    node_ip: str | None = None


class ServeScalingDecision(BaseModel):
    """One decision of a deployment's autoscaler: from how many replicas to how many, when and why."""

    at: str = Field(description="When: UTC from autoscaling_detail, or the controller log's own time stamp.")
    prev_replicas: int
    new_replicas: int
    reason: str = Field(description="Ray's reason, or the load the controller logged with the decision.")
    policy: str | None = None
    source: str = Field(description="autoscaling_detail, or the Serve controller's log.")


class ServeAutoscaling(BaseModel):
    """What the deployment's autoscaler reports: its direction, recent decisions, the health of its metrics."""

    status: str | None = Field(default=None, description="UPSCALING, DOWNSCALING or STABLE.")
    decisions: list[ServeScalingDecision] = Field(default_factory=list, description="Newest first.")
    decisions_total: int = 0
    ongoing_requests: float | None = Field(
        default=None, description="Requests ongoing across the replicas at the last decision (Ray's count)."
    )
    metrics_health: str | None = Field(default=None, description="healthy, delayed or unavailable.")
    metrics: dict[str, object] | None = None
    errors: list[str] = Field(default_factory=list)
    unknown: str | None = Field(default=None, description="Why the decisions are unknown, when they are.")


class ServeController(BaseModel):
    """The Serve controller: where it runs and how its control loop keeps up (Ray's health metrics)."""

    node_id: str | None = None
    state: str | None = Field(default=None, description="ok, or lagging: its event loop wakes late.")
    loops_per_second: float | None = None
    loop_mean_s: float | None = None
    loop_max_s: float | None = None
    event_loop_delay_s: float | None = None
    last_loop_age_s: float | None = Field(default=None, description="Seconds since its last control loop.")
    asyncio_tasks: int | None = None


class ServeDeployment(BaseModel):
    name: str
    status: str
    status_trigger: str | None = None
    message: str | None = None
    target_replicas: int | None = None
    running_replicas: int
    autoscaling_config: dict[str, object] | None = None
    limits: dict[str, float] | None = (
        None  # max_ongoing_requests, max_queued_requests: what rejects or queues calls
    )
    scaling: str | None = Field(
        default=None,
        description="Why fewer (or more) replicas run than the target: resources a replica waits for, replicas "
        "starting, max_replicas or min_replicas reached, downscale_delay_s; null when running == target.",
    )
    required_resources: dict[str, float] | None = Field(default=None, description="What each replica needs.")
    replicas: list[ServeReplica] = Field(default_factory=list)
    replicas_total: int = 0
    error: str | None = Field(
        default=None, description="For an unhealthy deployment: the error Ray recorded."
    )
    log_tail: list[str] | None = Field(default=None, description="Last lines of a failing replica's log.")
    log_source: str | None = None
    autoscaling: ServeAutoscaling | None = None


class ServeApp(BaseModel):
    name: str
    status: str
    message: str | None = None
    route_prefix: str | None = None
    last_deployed: str | None = Field(default=None, description="UTC time of the last deploy.")
    import_path: str | None = None
    deployments: list[ServeDeployment] = Field(default_factory=list)


class ServeStatus(BaseModel):
    running: bool = Field(description="False when Serve is not started on this cluster.")
    controller: ServeController | None = None
    proxies: dict[str, str] = Field(default_factory=dict, description="Proxy status per node id.")
    http: str | None = Field(default=None, description="host:port the Serve proxies listen on.")
    apps_total: int = 0
    apps: list[ServeApp] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)


class ServeChange(BaseModel):
    action: str
    applications: list[str] = Field(description="The application names in the config that was applied.")
    status: ServeStatus


class ActorKill(BaseModel):
    actor_id: str
    done: bool
    no_restart: bool
    state_before: str
    state_after: str | None = None
    message: str
