"""The diagnosis's one vocabulary: what a finding is (``Kind``), how one entity is linked to another
(``Edge``), the one severity scale, and the facts the rules return.

A ``Link`` is one fact: a statement (``Say``), its subject (an entity as an agent reads it), the resources and
values it is about, and Ray's own words (``quote``). A ``Chain`` is a symptom and the links that explain it.
Rules decide on facts only (a statement, a kind, a value); English is made when a fact is rendered (``text``,
``cause``, ``verdict``), at the edge, and no code reads it back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from ray_mcp.limits import QUOTE_CHARS
from ray_mcp.text import one_line

# Severity, the one scale of every rule: higher ranks first. ROOT: the cause of a failure; STUCK: work that
# cannot go on; LOOP: a crash loop; PROBLEM and above: cluster_health counts it as a problem; CONTEXT: ranked
# after the status of a job that ended well; WARNING: retried and recovered; INFO: not a fault.
ROOT = 100
STUCK = 90
LOOP = 85
CONTEXT = 50
PROBLEM = 40
WARNING = 30
INFO = 10


class Kind(StrEnum):
    """What a finding is: the ``kind`` an agent reads, and what the engine ranks, joins and refers by."""

    # why work waits
    INFEASIBLE = "infeasible"  # nothing the cluster has can ever place it
    CONTENTION = "contention"  # it fits, but others hold what it needs now
    WAITING = "waiting"  # on other work, its arguments, a worker, scheduling
    DEADLOCK = "deadlock"  # calls that wait for each other in a cycle
    HANG = "hang"  # a RUNNING job whose tasks show no activity
    PROGRESSING = "progressing"  # healthy: its tasks are finishing
    PENDING_DEMAND = "pending_demand"  # the autoscaler's demands that wait for resources in use
    ENTRYPOINT_RESOURCES = "entrypoint_resources"  # the driver itself cannot be scheduled
    PENDING = "pending"  # the job's driver has not started yet
    TIMEOUT = "timeout"  # the driver stopped waiting on work still running
    DATA_STALL = "data_stall"  # a Ray Data pipeline that does not move
    DATA = "data"  # a Ray Data pipeline's bottleneck, while it moves
    # why work ended (in this order a chain of several takes its kind: see KIND_ORDER)
    ENDED_WITH_JOB = "ended_with_job"  # still running when its job ended
    OOM = "oom"  # the memory monitor killed it
    RUNTIME_ENV = "runtime_env"  # its runtime_env could not be set up
    NODE_DIED = "node_died"  # its node died (or is gone)
    OWNER_DIED = "owner_died"  # the owner of what it needed died
    PG_REMOVED = "pg_removed"  # its placement group was removed
    KILLED = "killed"  # ray.kill, out of scope, exit_actor: ended on purpose
    WORKER_CRASH = "worker_crash"  # its worker process died
    HANDOVER = "handover"  # how Ray hands data over: serialisation, zero-copy read-only, refs in containers
    MISSING_FILE = "missing_file"  # a file the runtime_env left out of what it uploaded
    OPEN_FILES = "open_files"  # its process hit its file descriptor limit (EMFILE, ulimit -n)
    RAISED = "raised"  # an exception was raised in it
    FAILED = "failed"  # failed, for a reason none of the above names
    CANCELLED = "cancelled"  # ray.cancel
    RETRIED = "retried"  # failed attempts, retried successfully
    RESTART_LOOP = "restart_loop"  # an actor restarted again and again
    NAMED_ACTOR = "named_actor"  # a name looked up where it is not, or already taken
    DRIVER_EXCEPTION = "driver_exception"  # the driver's own exception, nothing remote behind it
    DRIVER_EXIT = "driver_exit"  # the driver exited without a traceback
    ENTRYPOINT = "entrypoint"  # the entrypoint command could not start
    STOPPED = "stopped"  # stopped on request
    NODE_DRAINING = "node_draining"  # a node being drained with work on it
    # the cluster's own state
    SERVE = "serve"  # a Serve application or deployment that is not healthy
    SERVE_LOOP = "serve_loop"  # Serve replicas replaced in a loop
    SERVE_SCALING = (
        "serve_scaling"  # a deployment's autoscaler: its latest decision, or replicas it cannot get
    )
    MEMORY = "memory"  # a node's memory or object store under pressure
    NOT_CONNECTED = "not_connected"  # the driver never reached this cluster (another address)
    BLOCKED_LOOP = (
        "blocked_loop"  # an async actor's event loop blocked (Ray's own warning), its calls starved
    )
    OBJECT_STORE = "object_store"  # the object store near full or spilling, and who holds it
    FAILED_JOBS = "failed_jobs"  # jobs that failed recently
    AUTOSCALER_FAILED = "autoscaler_failed"  # the autoscaler could not launch nodes
    # change over time (read from a Prometheus: diagnosis/history.py, rules/trends.py)
    MEMORY_LEAK = "memory_leak"  # a worker's or node's memory growing steadily, toward the memory monitor
    STORE_FILLING = "store_filling"  # the object store filling, or spilling more and more
    SERVE_REGRESSION = "serve_regression"  # a Serve deployment's latency or error rate rose
    IDLE_RESOURCES = "idle_resources"  # resources a RUNNING job holds, idle for most of the window
    THROUGHPUT_DROP = "throughput_drop"  # tasks finished per minute collapsed
    # the cluster's pods, as the head's platform events tell them (Kubernetes events, no kubeconfig needed)
    POD_UNSCHEDULABLE = "pod_unschedulable"  # Kubernetes cannot place a pod (FailedScheduling)
    IMAGE_PULL = "image_pull"  # a pod's image cannot be pulled
    POD_EVICTED = "pod_evicted"  # the kubelet evicted a pod (node pressure)
    POD_OOM_KILLED = "pod_oom_killed"  # a pod's container was killed for memory (OOMKilled)
    POD_CRASH_LOOP = "pod_crash_loop"  # a pod's container restarts again and again (BackOff)
    # the cluster's pods and custom resource as the Kubernetes API tells them (k8s:// only: read by
    # diagnosis/kubernetes.py, made by rules/kuberay.py; the pod kinds above are shared with the events' rule)
    POD_STUCK_INIT = "pod_stuck_init"  # a pod's init containers never finish
    POD_CANNOT_START = "pod_cannot_start"  # Kubernetes never created a pod's container (config, command)
    POD_FAILED = "pod_failed"  # a pod ended Failed for another reason
    NO_PODS = "no_pods"  # a RayCluster with no pods at all
    CRD_DISAGREES = "crd_disagrees"  # the RayJob's or RayCluster's status and Ray's own disagree
    RAYJOB_FAILED = "rayjob_failed"  # KubeRay marked the RayJob failed (its deadline, its submitter, …)
    UPGRADE_STUCK = "upgrade_stuck"  # a RayService's upgrade that does not finish
    RAYSERVICE_APP_FAILING = "rayservice_app_failing"  # a RayService reports a Serve app not running


# A chain that ends in several kinds of facts takes the first of these (what ended it most directly); a chain
# with none of them is FAILED.
KIND_ORDER = (
    Kind.ENDED_WITH_JOB,
    Kind.OOM,
    Kind.RUNTIME_ENV,
    Kind.NODE_DIED,
    Kind.OWNER_DIED,
    Kind.PG_REMOVED,
    Kind.KILLED,
    Kind.OPEN_FILES,
    Kind.WORKER_CRASH,
    Kind.HANDOVER,
    Kind.MISSING_FILE,
    Kind.RAISED,
)


class Edge(StrEnum):
    """How a link joins one entity to the next (graph.py's edges)."""

    WAITS_ON = "waits_on"
    HOLDS = "holds"
    OWNS = "owns"
    CREATED_BY = "created_by"
    ENDED_BY = "ended_by"
    RAISED_IN = "raised_in"


Words = Callable[["Link"], str]


@dataclass(frozen=True, eq=False)
class Say:
    """One statement the engine can make: its edge, its words (which only rendering calls) and what the engine
    needs to know of it. Compared by identity: rules test ``link.say is X``. ``subject`` is the entity its
    words open with (so a verdict need not name it twice); an entity named later goes in its values."""

    name: str
    edge: Edge
    words: Words
    free: bool = False  # a wait for what looks free now (scheduling, a worker starting): context, not a fault
    infeasible: bool = False  # a wait nothing the cluster has can ever end
    leads: bool = False  # a symptom told even before a one-link chain ("The driver is blocked")
    with_node: bool = False  # "… died with its node": told together with the node's death after it
    node_death: bool = False  # a node's death, with when

    def __call__(
        self, subject: str = "", quote: str = "", resources: Mapping[str, float] | None = None, **values: Any
    ) -> Link:
        return Link(self, subject, quote, dict(resources or {}), values)

    def __repr__(self) -> str:
        return f"Say({self.name})"


@dataclass
class Link:
    """One fact of a chain: ``say`` about ``subject`` (an entity's label), the ``resources`` and ``values`` it
    states, and ``quote``, Ray's own words for it."""

    say: Say
    subject: str = ""
    quote: str = ""
    resources: dict[str, float] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    rule: Any = None  # the registry's Rule that found it (set by the rule when it returns it)

    @property
    def kind(self) -> Edge:
        return self.say.edge

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def possessive(self) -> str:
        return "its" if self.subject == "it" else f"{self.subject}'s"

    @property
    def text(self) -> str:
        """The fact in words (rendering: for the answer only)."""
        return self.say.words(self)

    def about_it(self) -> str:
        """The fact in words with "it" for its subject (after a link that named it)."""
        return replace(self, subject="it").text

    def key(self, masked: str = "ids") -> tuple[Any, ...]:
        """What makes two facts the same fact: the statement, its subject and its values; ``masked`` leaves out
        "ids" (the same cause of other work), "numbers" too (pids, counts, figures) or "nothing"."""
        values = tuple(sorted((k, _value_key(v, masked)) for k, v in self.values.items()))
        resources = mask(repr(sorted(self.resources.items())), masked)
        return self.say.name, mask(self.subject, masked), values, resources


def _value_key(value: Any, masked: str) -> Any:
    if isinstance(value, Link):
        return value.key(masked)
    if isinstance(value, list | tuple):
        return tuple(_value_key(v, masked) for v in value)
    return mask(repr(value), masked)


_MASKS = {"ids": re.compile(r"[0-9a-f]{16,}"), "numbers": re.compile(r"[0-9a-f]{8,}|\d+(\.\d+)?")}


def mask(text: str, masked: str = "ids") -> str:
    """``text`` with its ids (and numbers) as "#": what differs between the same fact about other work."""
    pattern = _MASKS.get(masked)
    return pattern.sub("#", text) if pattern is not None else text


@dataclass
class Chain:
    """A symptom (``what``, or none when its first link is the symptom) and the links that explain it."""

    severity: int
    kind: Kind
    what: Link | None
    links: list[Link]
    next_steps: list[str] = field(default_factory=list)
    job_id: str | None = None
    subjects: set[str] = field(default_factory=set)  # entity keys this chain explains
    details: list[Link] = field(default_factory=list)  # evidence beyond the links (settings, counts, stacks)

    @property
    def symptom(self) -> str:
        if self.what is None:
            return ""
        job = self.what.get("in_job")
        return f"{self.what.text} [{job}]" if job else self.what.text

    def cause_links(self) -> list[Link]:
        """The links the cause is told from: the last, after an ownership link both (the owner, and why it
        ended), after "died with its node" both (what the node took down, and the node's death)."""
        if not self.links:
            return []
        last = self.links[-1]
        before = self.links[-2] if len(self.links) >= 2 else None
        if before is not None and (
            before.kind is Edge.OWNS or (before.say.with_node and last.say.node_death)
        ):
            return [before, last]
        return [last]

    def cause_key(self, masked: str = "ids") -> tuple[Any, ...]:
        """What makes two chains' causes the same cause (facts.Link.key of the links the cause is told from)."""
        return tuple(link.key(masked) for link in self.cause_links())

    def alike_key(self) -> tuple[Any, ...]:
        """What makes two chains the same failure of other work (ids and numbers apart): their kind, symptom
        and cause; report.py merges their findings into one that counts them."""
        what = self.what.key("numbers") if self.what is not None else ()
        return (
            self.kind,
            what,
            self.cause_key("numbers"),
            tuple(link.key("numbers") for link in self.links[:-1]),
        )

    @property
    def cause(self) -> str:
        """The last link in words; after an ownership link, both (the owner, and why it ended)."""
        if not self.links:
            return ""
        links = self.cause_links()
        if len(links) == 1:
            return links[0].text
        first, last = links
        if first.kind is Edge.OWNS:  # "the owner was X …; it was killed …"
            same = bool(last.subject) and first.get("owner") == last.subject
            return f"{first.text}; {last.about_it() if same else last.text}"
        return f"{first.text}: {last.text}"

    @property
    def verdict(self) -> str:
        """The symptom and the last link; a one-link chain is its own symptom."""
        what = self.what
        if len(self.links) == 1 and what is not None and not what.say.leads:
            return self.cause
        first = self.cause_links()[0] if self.links else None
        if (
            what is not None
            and first is not None
            and first.kind is not Edge.OWNS
            and _opening(what) == _opening(first)
        ):
            return self.cause  # the cause already names the symptom's subject
        symptom, cause = self.symptom, self.cause
        return f"{symptom}: {cause}" if cause and symptom else symptom or cause

    def evidence(self) -> list[str]:
        out = []
        for link in self.links:
            if len(self.links) > 1:
                out.append(f"[{link.kind}] {link.text}")
            if link.quote:
                out.append(
                    f'{"  " if len(self.links) > 1 else "[" + link.kind + "] "}"{one_line(link.quote, QUOTE_CHARS)}"'
                )
        return [*out, *(d.text for d in self.details)]


def _opening(link: Link) -> str:
    """The entity a statement opens with, by kind and name ("actor \"Learner\""): ids apart, one thing."""
    return " ".join(link.subject.split()[:2]) if link.subject else ""


def chain_kind(links: Sequence[Link]) -> Kind:
    """The kind a chain of end facts takes: the first of KIND_ORDER among its links' rules, else FAILED."""
    kinds = {link.rule.kind for link in links if link.rule is not None}
    return next((k for k in KIND_ORDER if k in kinds), Kind.FAILED)


def said(text: str) -> Words:
    """Words that are a format string over the fact: ``{subject}``, ``{possessive}`` and its values."""

    def words(link: Link) -> str:
        return text.format(subject=link.subject, possessive=link.possessive, **link.values)

    return words
