"""The evidence graph of a diagnosis: Ray's records as entities joined by causal edges (pure, no I/O).

Entities are jobs, drivers, tasks, actors, objects, placement groups and bundles, nodes, Serve replicas,
workers and resources. Edges say why one entity is in its state:

- ``waits_on``: a driver or task blocked on an object or a child task, a task or actor waiting for resources,
  a placement group waiting for bundles, a queued actor call waiting for the call that occupies its actor;
- ``holds``: an actor, task or bundle that holds a resource on a node (and the job it belongs to);
- ``owns`` / ``created_by``: the owner of an object or actor, the job that created an entity;
- ``ended_by``: a user's stop or kill, a cancel, a node's death, the memory monitor, a placement group's
  removal, a worker's exit, the end of the owning job;
- ``raised_in``: where an exception first happened (a task on a node, an actor method, the driver).

Every input is the raw JSON Ray's State API, job API and event API return, so a recorded ``GraphInputs`` replays
exactly (tests/recorded). ``chains/`` follows the edges into chains and verdicts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ray_mcp.amounts import duration, resource_amount, resource_items
from ray_mcp.limits import (
    JOB_LABEL_ENTRYPOINT_CHARS,
    NAMES_SHOWN,
    NODE_LABEL_ID_CHARS,
)
from ray_mcp.text import one_line, quoted, short_id

Row = dict[str, Any]

# Ray's driver worker ids are the job id followed by f's (JobID + WorkerID::FromDriver).
DRIVER_WORKER = re.compile(r"^(?P<job>[0-9a-f]{8})f{48}$")
# ray.exceptions.ActorAlreadyExistsError: "The name replay_buffer (namespace=None) is already taken."
NAME_TAKEN = re.compile(r"The name (?P<name>\S+) \(namespace=(?P<namespace>[^)]*)\) is already taken")
OWNER_REF = re.compile(
    r"[Oo]wner worker ID: (?P<worker>[0-9a-f]{56})(?:, owner node ID: (?P<node>[0-9a-f]{56}))?"
    r"(?:, owner address: (?P<addr>[\d.]+):\d+)?"
)


@dataclass
class GraphInputs:
    """What the gathering read from Ray, as Ray returned it. ``None`` means the source could not be read."""

    now_ms: float = 0.0
    job: Row | None = None  # JobDetails of the diagnosed job (diagnose_job only)
    driver_lines: list[str] | None = None
    actors: list[Row] | None = None  # the job's actors (all states); the whole cluster's for cluster_health
    tasks: list[Row] | None = None  # the job's task attempts (State API rows, one per attempt)
    nodes: list[Row] | None = None
    jobs: list[Row] | None = None  # every job (State API), to name the jobs of holders and owners
    pgs: list[Row] | None = None
    events: list[Row] | None = None  # cluster events, newest last as Ray returns them
    workers: list[Row] | None = None  # dead workers: exit type and detail
    alive_actors: list[Row] | None = None  # every ALIVE actor: who holds resources (contention)
    running_tasks: list[Row] | None = None  # every RUNNING task: who holds resources
    related_actors: list[Row] = field(default_factory=list)  # looked up by name or pid (other jobs)
    worker_logs: dict[str, list[str]] = field(default_factory=dict)  # "<node_id>:<pid>" -> stderr tail
    serve: Row | None = None  # /api/serve/applications/ as Ray returns it
    # the autoscaling decisions the Serve controller logged (Ray 2.60 leaves autoscaling_detail null), newest
    # first: {app, deployment, at, prev_replicas, new_replicas, reason, source}
    serve_decisions: list[Row] | None = None
    status: Row | None = None  # cluster_status (models.ClusterStatus as JSON): memory use, pending demands
    supervisor: Row | None = None  # the job's supervisor actor: what the entrypoint asks for
    cluster_address: str | None = None  # this cluster's GCS address, read when the driver could not connect
    stacks: Row | None = None  # a stalled job's stacks (models.StackTraces as JSON)
    datasets: list[Row] | None = None  # a RUNNING job's Ray Data datasets (/api/data/datasets/{job_id})
    platform_events: list[Row] | None = None  # the head's Kubernetes pod events (/api/v0/platform_events)
    # k8s:// only: KubeRay's findings on the cluster's pods and custom resource (models.KubeFinding as JSON) and,
    # when a pod cannot be scheduled, Ray's pending demands (models.Demand as JSON) the pod would have served
    kuberay: list[Row] | None = None
    kuberay_waiting: list[Row] = field(default_factory=list)
    store: Row | None = (
        None  # the object store's holders (models.ObjectStoreSummary) when it is near full or spills
    )
    # what the cluster's Prometheus says of the last minutes (diagnosis/history.py): the window, the memory
    # monitor's threshold and each question's panels as JSON; or "missing" (no history) / "unknown" (why not read)
    trends: Row | None = None
    unreadable: list[str] = field(default_factory=list)  # "the job's tasks: timed out"
    capped: list[str] = field(default_factory=list)  # "The failed tasks: 1,000 of 11,208 read; ..."
    unchecked: list[str] = field(default_factory=list)  # checks that could not run ("the driver log")
    notes: list[str] = field(default_factory=list)  # why each of them could not
    info: list[str] = field(default_factory=list)  # optional sources not there (platform events): said last

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> GraphInputs:
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Entity:
    key: str  # "<kind>:<id>"
    kind: str
    id: str
    label: str  # how an agent reads it: "actor TrainWorker 'w0' (47b4…)"
    state: str = ""
    job_id: str | None = None
    node_id: str | None = None
    row: Row = field(default_factory=dict)


@dataclass
class Edge:
    src: str
    kind: str  # waits_on | holds | owns | created_by | ended_by | raised_in
    dst: str
    text: str  # the link in words: "holds 1 GPU"
    amount: float = 0.0  # for a holds edge: how much it holds (bytes for memory)


# Ray Data's own actors: their calls (stats updates every few seconds, resource reservations) keep finishing
# while a pipeline stands still, so they are neither the job's progress nor its work.
RAY_DATA_BOOKKEEPING = ("_StatsActor.", "_AutoscalingCoordinatorActor.")


def bookkeeping(row: Row) -> bool:
    return str(row.get("name") or "").startswith(RAY_DATA_BOOKKEEPING)


def num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def failure_restarts(row: Row) -> int:
    """An actor's restarts that followed a failure: Ray 2.60 counts those caused by node preemption apart
    (num_restarts_due_to_node_preemption), and a preempted node is not the actor's fault."""
    return max(
        0, int(num(row.get("num_restarts"))) - int(num(row.get("num_restarts_due_to_node_preemption")))
    )


def amount(name: str, value: Any) -> str:
    """A resource amount from a record (a number, or text Ray wrote as one): amounts.resource_amount."""
    return resource_amount(name, num(value))


def amounts(shape: Mapping[str, Any]) -> str:
    """ "CPU: 1, memory: 4 GiB": a resource shape from a record (the rules put the braces around it), written
    as amounts.resource_shape writes it, so pg_status and the diagnosis say one group's demand alike."""
    return resource_items({k: num(v) for k, v in shape.items()})


def ms_clock(ms: float | None) -> str:
    """A time of day in UTC from Ray's epoch milliseconds."""
    import datetime

    if not ms:
        return "?"
    return datetime.datetime.fromtimestamp(num(ms) / 1000, datetime.UTC).strftime("%H:%M:%S")


def ago(ms: float | None, now_ms: float) -> str:
    if not ms or not now_ms:
        return "?"
    return duration((now_ms - num(ms)) / 1000)


class Graph:
    """Entities by key and edges by source, built once per diagnosis from a GraphInputs."""

    def __init__(self, ev: GraphInputs) -> None:
        self.ev = ev
        self.entities: dict[str, Entity] = {}
        self.edges: dict[str, list[Edge]] = {}
        self.jobs: dict[str, Row] = {str(j.get("job_id")): j for j in ev.jobs or [] if j.get("job_id")}
        if ev.job and ev.job.get("job_id"):
            self.jobs.setdefault(str(ev.job["job_id"]), ev.job)
        self.nodes: dict[str, Row] = {str(n.get("node_id")): n for n in ev.nodes or []}
        self.actors: dict[str, Row] = {}
        for row in [*(ev.alive_actors or []), *ev.related_actors, *(ev.actors or [])]:
            self.actors[str(row.get("actor_id"))] = row
        self.attempts: dict[str, list[Row]] = {}
        for t in ev.tasks or []:
            if not bookkeeping(t):
                self.attempts.setdefault(str(t.get("task_id")), []).append(t)
        for rows in self.attempts.values():
            rows.sort(key=lambda t: int(num(t.get("attempt_number"))))
        self.running = {str(t.get("task_id")): t for t in ev.running_tasks or []}
        self.pgs: dict[str, Row] = {str(p.get("placement_group_id")): p for p in ev.pgs or []}
        self.workers: dict[str, Row] = {str(w.get("worker_id")): w for w in ev.workers or []}
        self.worker_by_pid: dict[int, Row] = {
            int(num(w.get("pid"))): w for w in ev.workers or [] if w.get("pid")
        }
        self._add_all()

    # -- entities ------------------------------------------------------------------------------------------

    def job_label(self, job_id: str | None) -> str:
        if not job_id:
            return "an unknown job"
        row = self.jobs.get(job_id) or {}
        entry = one_line(str(row.get("entrypoint") or ""), JOB_LABEL_ENTRYPOINT_CHARS)
        sid = row.get("submission_id")
        what = f"({quoted(entry)})" if entry else ""
        return " ".join(x for x in (f"job {job_id}", what, f"[{sid}]" if sid and entry == "" else "") if x)

    def node_label(self, node_id: str | None) -> str:
        if not node_id:
            return "an unknown node"
        row = self.nodes.get(node_id) or {}
        ip = row.get("node_ip")
        head = ", head" if row.get("is_head_node") else ""
        return f"node {short_id(node_id, NODE_LABEL_ID_CHARS)}" + (f" ({ip}{head})" if ip else "")

    def actor_label(self, row: Mapping[str, Any]) -> str:
        name = row.get("name")
        return (
            f"actor {quoted(row.get('class_name') or '?')}"
            + (f" {quoted(name)}" if name else "")
            + f" ({row.get('actor_id')})"
        )

    def task_label(self, row: Mapping[str, Any]) -> str:
        return (
            f"task {quoted(row.get('name') or row.get('func_or_class_name') or '?')} ({row.get('task_id')})"
        )

    def pg_label(self, row: Mapping[str, Any]) -> str:
        name = row.get("name")
        return (
            "placement group" + (f" {quoted(name)}" if name else "") + f" ({row.get('placement_group_id')})"
        )

    def add(self, kind: str, id_: str, label: str, row: Mapping[str, Any] | None = None, **kw: Any) -> str:
        key = f"{kind}:{id_}"
        if key not in self.entities:
            self.entities[key] = Entity(key, kind, id_, label, row=dict(row or {}), **kw)
        return key

    def link(self, src: str, kind: str, dst: str, text: str, amount: float = 0.0) -> None:
        edge = Edge(src, kind, dst, text, amount)
        if not any(e.kind == kind and e.dst == dst for e in self.edges.get(src, [])):
            self.edges.setdefault(src, []).append(edge)

    def _add_all(self) -> None:
        for job_id in self.jobs:
            self.add("job", job_id, self.job_label(job_id), self.jobs[job_id], job_id=job_id)
        for node_id, row in self.nodes.items():
            self.add("node", node_id, self.node_label(node_id), row, state=str(row.get("state") or ""))
        for actor_id, row in self.actors.items():
            key = self.add(
                "actor",
                actor_id,
                self.actor_label(row),
                row,
                state=str(row.get("state") or ""),
                job_id=row.get("job_id"),
                node_id=row.get("node_id"),
            )
            self._created_by(key, row)
        for task_id, rows in self.attempts.items():
            last = rows[-1]
            key = self.add(
                "task",
                task_id,
                self.task_label(last),
                last,
                state=str(last.get("state") or ""),
                job_id=last.get("job_id"),
                node_id=last.get("node_id"),
            )
            self._created_by(key, last)
        for pg_id, row in self.pgs.items():
            key = self.add(
                "pg",
                pg_id,
                self.pg_label(row),
                row,
                state=str(row.get("state") or ""),
                job_id=row.get("creator_job_id"),
            )
            if row.get("creator_job_id"):
                self.link(key, "created_by", f"job:{row['creator_job_id']}", "was created by")
        self._holders()

    def _created_by(self, key: str, row: Mapping[str, Any]) -> None:
        job_id = row.get("job_id")
        if job_id:
            detached = " (detached: it outlives the job)" if row.get("is_detached") else ""
            self.link(
                key, "created_by", f"job:{job_id}", f"was created by {self.job_label(job_id)}{detached}"
            )

    # -- holds ---------------------------------------------------------------------------------------------

    def _holders(self) -> None:
        """Which ALIVE actors, RUNNING tasks and CREATED placement group bundles hold which resources where."""
        for row in self.ev.alive_actors or []:
            if row.get("state") != "ALIVE" or row.get("placement_group_id"):
                continue  # an actor in a group uses its bundle's reservation: the group is the holder
            for name, held in (row.get("required_resources") or {}).items():
                if num(held) > 0 and row.get("node_id"):
                    self.link(
                        f"actor:{row['actor_id']}",
                        "holds",
                        f"resource:{name}@{row['node_id']}",
                        f"holds {amount(name, held)} {name}",
                        num(held),
                    )
        for task_id, row in self.running.items():
            if row.get("type") != "NORMAL_TASK" or row.get("placement_group_id"):
                continue
            key = self.add(
                "task",
                task_id,
                self.task_label(row),
                row,
                state="RUNNING",
                job_id=row.get("job_id"),
                node_id=row.get("node_id"),
            )
            for name, held in (row.get("required_resources") or {}).items():
                if num(held) > 0 and row.get("node_id"):
                    self.link(
                        key,
                        "holds",
                        f"resource:{name}@{row['node_id']}",
                        f"holds {amount(name, held)} {name}",
                        num(held),
                    )
        for pg_id, row in self.pgs.items():
            if row.get("state") != "CREATED":
                continue
            for bundle in row.get("bundles") or []:
                node = bundle.get("node_id")
                for name, held in (bundle.get("unit_resources") or {}).items():
                    if num(held) > 0 and node:
                        self.link(
                            f"pg:{pg_id}",
                            "holds",
                            f"resource:{name}@{node}",
                            f"reserves {amount(name, held)} {name} (bundle {bundle_index(bundle)})",
                            num(held),
                        )

    def holders_of(self, resource: str) -> list[tuple[Entity, float, str]]:
        """(holder, amount, node id) for every holder of ``resource`` on any node, biggest first."""
        out = []
        for src, edges in self.edges.items():
            for e in edges:
                if e.kind == "holds" and e.dst.startswith(f"resource:{resource}@"):
                    ent = self.entities.get(src)
                    if ent is not None:
                        out.append((ent, e.amount, e.dst.split("@", 1)[1]))
        return sorted(out, key=lambda h: -h[1])

    def node_totals(self) -> dict[str, dict[str, float]]:
        return {
            nid: {k: num(v) for k, v in (row.get("resources_total") or {}).items()}
            for nid, row in self.nodes.items()
            if row.get("state") == "ALIVE"
        }

    def held_on(self, node_id: str) -> dict[str, float]:
        held: dict[str, float] = {}
        for (_ent, amount, node), name in (
            (h, r) for r in self._resource_names() for h in self.holders_of(r)
        ):
            if node == node_id:
                held[name] = held.get(name, 0.0) + amount
        return held

    def _resource_names(self) -> set[str]:
        return {
            e.dst.split(":", 1)[1].split("@", 1)[0]
            for es in self.edges.values()
            for e in es
            if e.kind == "holds"
        }

    # -- lookups used by the reasoning -----------------------------------------------------------------------

    def actor_by_pid(self, pid: int, node_id: str | None = None) -> Row | None:
        for row in self.actors.values():
            cause = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
            pids = {int(num(row.get("pid"))), int(num(cause.get("pid")))}
            if pid in pids and (not node_id or row.get("node_id") in (node_id, None)):
                return row
        return None

    def task_by_worker(self, worker_id: str) -> Row | None:
        for rows in self.attempts.values():
            for t in rows:
                if t.get("worker_id") == worker_id:
                    return t
        for t in self.running.values():
            if t.get("worker_id") == worker_id:
                return t
        return None

    def worker_log(self, node_id: str | None, pid: Any) -> list[str]:
        return self.ev.worker_logs.get(f"{node_id}:{int(num(pid))}", [])


def bundle_index(bundle: Mapping[str, Any]) -> Any:
    """A bundle's index: under bundle_id in the State API's detail rows."""
    return (bundle.get("bundle_id") or {}).get("bundle_index", bundle.get("bundle_index", "?"))


def names(items: Iterable[str], limit: int = NAMES_SHOWN) -> str:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    more = f" and {len(seen) - limit} more" if len(seen) > limit else ""
    return ", ".join(seen[:limit]) + more


def count_by(items: Sequence[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item] = counts.get(item, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])
