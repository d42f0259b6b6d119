"""What a call names in the cluster: exactly one job, actor, task (+ attempt), worker pid on a node, or (for logs)
file on a node. Checked when made, before any request is sent; InvalidArgument says what to give instead.

The logs tail_logs can read are the rows of ``LOG_TARGET_ARGS``: tail_logs' arguments, its description and
LogTarget's check all come from that table. A new log source is its row here (and its LogTarget field) and
where it resolves to in answers/logs.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import Field

from ray_mcp.errors import InvalidArgument
from ray_mcp.sources.ids import check_id, check_job_ref, check_node


@dataclass(frozen=True)
class Target:
    """The processes a call names: a job's (driver and workers), an actor's, a task's, or a pid on a node."""

    kind: str  # job | actor_id | task_id | pid (| filename: a LogTarget)
    job: str | None = None
    actor_id: str | None = None
    task_id: str | None = None
    attempt: int = 0
    pid: int | None = None
    node: str | None = None

    def __post_init__(self) -> None:
        self.check_ids()

    def check_ids(self) -> None:
        """Every id of the target, checked (and normalised) once, here, for every path behind it: the State
        API, the log API, the dashboard's profiling routes and local py-spy."""
        checks: dict[str, Callable[[str], str]] = {
            "job": check_job_ref,
            "actor_id": partial(check_id, "actor"),
            "task_id": partial(check_id, "task"),
            "node": check_node,
        }
        for name, check in checks.items():
            value = getattr(self, name)
            if value is not None:
                value = value.strip() if isinstance(value, str) else value
                if name in ("actor_id", "task_id") and isinstance(value, str):
                    value = value.lower()
                object.__setattr__(self, name, check(value))

    def label(self) -> str:
        if self.kind == "job":
            return f"job {self.job}"
        if self.kind == "actor_id":
            return f"actor {self.actor_id}"
        if self.kind == "task_id":
            return f"task {self.task_id}"
        return f"pid {self.pid} on node {self.node}"


def inside_logs_dir(filename: str) -> None:
    if ".." in filename.replace("\\", "/").split("/"):
        raise InvalidArgument(
            f"filename {filename!r} climbs out of the node's Ray log directory ('..'): give a name "
            "inside it (raylet.out, job-driver-<id>.log, old/raylet.out, ...)."
        )


# The daemons Ray 2.60 starts that write a log of their own in the session's logs dir (``monitor`` is the
# autoscaler); answers/logs.py knows each one's file.
RayComponent = Literal[
    "raylet",
    "gcs_server",
    "dashboard",
    "dashboard_agent",
    "runtime_env_agent",
    "log_monitor",
    "monitor",
    "ray_client_server",
]


@dataclass(frozen=True)
class LogTargetArg:
    """One argument of tail_logs that names the log to read (a source) or narrows it (attempt, node).

    ``name`` is the tool's argument and LogTarget's field. A source also has the words that name it in the
    tool's description (``names``) and in a refusal (``usage``), whether it needs ``node``, a ``check`` of its
    value, and a ``sample`` value that names a log of its kind (tests/test_logs.py makes a LogTarget of every
    source from it, so a new source is its row here and nothing in that test); its value is then resolved to
    files in answers/logs.py (``Logs.files_of``)."""

    name: str
    type: Any
    description: str
    default: Any = None
    ge: int | None = None
    names: str = ""
    usage: str = ""
    on_a_node: bool = False
    check: Callable[[Any], None] | None = None
    sample: Any = None

    @property
    def annotation(self) -> Any:
        return Annotated[self.type, Field(ge=self.ge, description=self.description)]


LOG_TARGET_ARGS = (
    LogTargetArg(
        "job",
        str | None,
        "A job's submission id: its driver log.",
        names="a job's driver",
        usage="job (a submission id)",
        sample="raysubmit_1",
    ),
    LogTargetArg(
        "actor_id",
        str | None,
        "An actor id: its worker's logs.",
        names="an actor",
        usage="actor_id",
        sample="a" * 32,
    ),
    LogTargetArg(
        "task_id",
        str | None,
        "A task id: its stdout/stderr.",
        names="a task",
        usage="task_id (+ attempt)",
        sample="b" * 48,
    ),
    LogTargetArg("attempt", int, "The task's attempt number.", default=0, ge=0),
    LogTargetArg(
        "pid",
        int | None,
        "A worker process id; needs node.",
        ge=1,
        names="a worker pid",
        usage="pid + node",
        on_a_node=True,
        sample=1,
    ),
    LogTargetArg(
        "component",
        RayComponent | None,
        "A Ray daemon on node: its own log (gcs_server, dashboard and monitor run on the head).",
        names="a Ray daemon's own log",
        usage="component + node (e.g. raylet, gcs_server, dashboard)",
        on_a_node=True,
        sample="raylet",
    ),
    LogTargetArg("node", str | None, "A node id or IP, with pid, component or filename."),
    LogTargetArg(
        "filename",
        str | None,
        "A file in the node's Ray log dir (raylet.out...), or a glob (*.err) to list.",
        names="a node's file",
        usage="node + filename (e.g. raylet.out, gcs_server.out, dashboard.log)",
        on_a_node=True,
        check=inside_logs_dir,
        sample="raylet.out",
    ),
)
LOG_SOURCES = [a for a in LOG_TARGET_ARGS if a.names]


def one_of(words: list[str]) -> str:
    return ", ".join(words[:-1]) + f", or {words[-1]}" if len(words) > 1 else "".join(words)


@dataclass(frozen=True)
class LogTarget(Target):
    """Exactly one log to read, checked when made: one of LOG_SOURCES, with what narrows it (the attempt of a
    task, the node of a pid or a file). InvalidArgument says what to give instead."""

    kind: str = field(init=False)  # the name of the LOG_SOURCES row given
    filename: str | None = None
    component: str | None = None
    stream: str = "both"

    def __post_init__(self) -> None:
        given = [a for a in LOG_SOURCES if getattr(self, a.name) is not None]
        usage = f"Give exactly one of: {one_of([a.usage for a in LOG_SOURCES])}."
        on_a_node = tuple(a.name for a in LOG_SOURCES if a.on_a_node)
        kind = one_target(
            [a.name for a in given], self.node, "tail_logs needs one log target", usage, on_a_node
        )
        for a in given:
            if a.check is not None:
                a.check(getattr(self, a.name))
        object.__setattr__(self, "kind", kind)
        self.check_ids()


ONE_PROCESS_TOOLS = ("cpu_profile", "memory_profile", "gpu_profile")  # they profile one process, never a job


def target_kind(
    *,
    job: str | None,
    actor_id: str | None,
    task_id: str | None,
    pid: int | None,
    node: str | None,
    tool: str,
) -> str:
    """Which processes the caller means; InvalidArgument unless exactly one target is given (pid needs node)."""
    given = [n for n, v in (("job", job), ("actor_id", actor_id), ("task_id", task_id), ("pid", pid)) if v]
    usage = "Give exactly one of: job (a submission id or job id), actor_id, task_id, or pid + node."
    if tool in ONE_PROCESS_TOOLS:
        usage = "Give exactly one of: actor_id, task_id, or pid + node (one process)."
        if job:
            raise InvalidArgument(
                f"{tool} profiles one process, not a whole job. Call stack_traces with job=... to see the "
                f"job's processes, then profile one of them by actor_id or pid + node. {usage}"
            )
    return one_target(given, node, f"{tool} needs one target", usage, ("pid",))


def one_target(given: list[str], node: str | None, needs: str, usage: str, on_a_node: tuple[str, ...]) -> str:
    """The one kind given; the kinds ``on_a_node`` need ``node``, the others refuse it."""
    if len(given) != 1:
        raise InvalidArgument(f"{needs}, got {', '.join(given) or 'none'}. {usage}")
    kind = given[0]
    if kind in on_a_node and not node:
        raise InvalidArgument(
            f"{kind} needs node (a node id or IP) too. Call cluster_status to see the nodes. {usage}"
        )
    if kind not in on_a_node and node:
        raise InvalidArgument(f"node goes with {' or '.join(on_a_node)} only, not with {kind}. {usage}")
    return kind
