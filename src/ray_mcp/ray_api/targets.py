"""What a call names in the cluster: exactly one job, actor, task (+ attempt), worker pid on a node, or (for logs)
file on a node. Checked when made, before any request is sent; InvalidArgument says what to give instead."""

from __future__ import annotations

from dataclasses import dataclass, field

from ray_mcp.errors import InvalidArgument


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

    def label(self) -> str:
        if self.kind == "job":
            return f"job {self.job}"
        if self.kind == "actor_id":
            return f"actor {self.actor_id}"
        if self.kind == "task_id":
            return f"task {self.task_id}"
        return f"pid {self.pid} on node {self.node}"


@dataclass(frozen=True)
class LogTarget(Target):
    """Exactly one thing whose log to read, checked when made: a job, an actor, a task (+ attempt), a worker
    pid on a node, or a file on a node. InvalidArgument says what to give instead."""

    kind: str = field(init=False)  # job | actor_id | task_id | pid | filename
    filename: str | None = None
    stream: str = "both"

    def __post_init__(self) -> None:
        given = [
            name
            for name, value in (("job", self.job), ("actor_id", self.actor_id), ("task_id", self.task_id),
                                ("pid", self.pid), ("filename", self.filename))
            if value is not None
        ]  # fmt: skip
        usage = (
            "Give exactly one of: job (a submission id), actor_id, task_id (+ attempt), pid + node, or "
            "node + filename (e.g. raylet.out, gcs_server.out, dashboard.log)."
        )
        kind = one_target(given, self.node, "tail_logs needs one log target", usage, ("pid", "filename"))
        if self.filename is not None and ".." in self.filename.replace("\\", "/").split("/"):
            raise InvalidArgument(
                f"filename {self.filename!r} climbs out of the node's Ray log directory ('..'): give a name "
                "inside it (raylet.out, job-driver-<id>.log, old/raylet.out, ...)."
            )
        object.__setattr__(self, "kind", kind)


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
    if tool == "cpu_profile":
        usage = "Give exactly one of: actor_id, task_id, or pid + node (one process)."
        if job:
            raise InvalidArgument(
                "cpu_profile samples one process, not a whole job. Call stack_traces with job=... to see the "
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
