"""The driver's exception and where it came from: the remote work that first raised it, a runtime_env or a
Serve app that failed, the owner of an object it lost, a named actor it looked up, an actor it names, the work
it timed out or gave up waiting on, the work its own frames name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ray_mcp.diagnosis import tracebacks
from ray_mcp.diagnosis.facts import ROOT, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import NAME_TAKEN, Graph, num
from ray_mcp.diagnosis.recognise import (
    ACTOR_ERROR,
    LOOKUP_FAILED,
    RAY_SYSTEM_ERROR,
    RUNTIME_ENV_ERROR,
    TIMED_OUT,
    actor_ids,
    first_raise,
    parse_owner,
)
from ray_mcp.diagnosis.registry import On, ended, rule, rules
from ray_mcp.diagnosis.rules.owners import owner_chain
from ray_mcp.diagnosis.rules.placement import pg_wait, resource_wait
from ray_mcp.diagnosis.rules.waiting import driver_wait
from ray_mcp.limits import (
    DRIVER_QUOTE_LINES,
    INNER_MESSAGE_CHARS,
    LOG_QUOTE_LINE_CHARS,
    MESSAGE_HEAD_CHARS,
    OWNER_SEARCH_LINES,
    RUNTIME_ENV_SEARCH_LINES,
    TIMED_OUT_WORK_NAMED,
)
from ray_mcp.text import one_line

JOBS_DOC = "ray-docs://reference/12-job-submission"
ACTORS_DOC = "ray-docs://reference/03-ray-core-actors"
CORE_DOC = "ray-docs://reference/02-ray-core-tasks"

DRIVER_RAISED = Say(
    "driver_raised",
    Edge.RAISED_IN,
    lambda f: (
        f"the driver raised {f['outer']}"
        + (f" ({f['inner']}: {f['inner_message']})" if f["inner"] != f["outer"] else f": {f['message']}")
        + f" at {f['where']}"
    ),
)
COUNTED = Say("counted", Edge.ENDED_BY, lambda f: f"[counted] {f['chain'].symptom}, all with this cause")
GAVE_UP = Say(
    "gave_up",
    Edge.WAITS_ON,
    lambda f: (
        f"{f['raised'].text}; it stopped waiting on {', '.join(f['work'])}"
        + (f" and {f['more']} more" if f["more"] else "")
        + ", still running when the job ended"
    ),
)
NEVER_STARTED = Say("never_started", Edge.WAITS_ON, said("{subject} never started (it was never placed)"))
NEVER_CREATED = Say("never_created", Edge.WAITS_ON, said("{subject} was never created ({state})"))
NAME_TAKEN_BY = Say(
    "name_taken_by",
    Edge.CREATED_BY,
    said(
        "the name '{name}' is already taken (ActorAlreadyExistsError): held by {detached}{holder} of {job}; kill it "
        "(kill_actor) or use another name"
    ),
)
NAME_TAKEN_FREE = Say(
    "name_taken_free",
    Edge.CREATED_BY,
    said("the name '{name}' was taken when the job asked for it (no actor holds it now)"),
)
OTHER_NAMESPACE = Say(
    "other_namespace",
    Edge.CREATED_BY,
    said(
        "an actor named '{name}' exists, but in namespace '{namespace}' (created by {job}); look it up with "
        "namespace='{namespace}'"
    ),
)
NAMED_DEAD = Say("named_dead", Edge.CREATED_BY, said("the actor named '{name}' (created by {job}) is DEAD"))
NO_SUCH_NAME = Say(
    "no_such_name",
    Edge.CREATED_BY,
    said("no actor named '{name}' exists in any namespace (never created, or not yet)"),
)


@dataclass
class Raised:
    """The driver's last exception, and what the rules of this module ask of it."""

    g: Graph
    job_id: str
    chains: Sequence[Chain]
    link: Link  # "the driver raised …"
    traceback: str  # Ray's words: the traceback and the remote lines after it
    lines: Sequence[str]  # the driver's log tail
    tb: tracebacks.Traceback
    inner_type: str
    outer_type: str

    def chain(
        self,
        kind: Kind,
        links: Sequence[Link],
        next_steps: Sequence[str] = (),
        subjects: set[str] | None = None,
    ) -> Chain:
        return Chain(ROOT, kind, None, [self.link, *links], list(next_steps), self.job_id, subjects or set())


def merge(raised: Link, chain: Chain) -> Chain:
    """The driver's exception joined to the chain it came from; that chain's symptom stays counted ("4 tasks
    decode failed": the driver re-raised one of them, the same cause ended them all)."""
    counted = [COUNTED(chain=chain)] if chain.what is not None and chain.what.get("counted") else []
    return Chain(
        ROOT,
        chain.kind,
        None,
        [raised, *chain.links],
        chain.next_steps,
        chain.job_id,
        chain.subjects,
        details=[*counted, *chain.details],
    )


def driver_chain(g: Graph, lines: Sequence[str] | None, chains: Sequence[Chain], job_id: str) -> Chain | None:
    """Where the driver's exception was raised, joined to the chain of the remote work that raised it: the
    first rule of On.DRIVER with an answer, else the exception alone."""
    if not lines:
        return None
    tb = tracebacks.last_traceback(lines)
    if tb is None or not tb.exceptions:
        return None
    inner_type, inner_msg = tb.innermost or ("", "")
    outer_type = tb.outermost[0] if tb.outermost else inner_type
    excerpt = " | ".join(
        tracebacks.cut_text(line, LOG_QUOTE_LINE_CHARS)
        for line in tracebacks.user_lines(tb.lines)[-DRIVER_QUOTE_LINES:]
    )
    link = DRIVER_RAISED(
        "",
        excerpt,
        outer=tracebacks.short_type(outer_type),
        inner=tracebacks.short_type(inner_type),
        inner_message=one_line(inner_msg, INNER_MESSAGE_CHARS),
        message=one_line(inner_msg, MESSAGE_HEAD_CHARS),
        where=tb.user_frame.short() if tb.user_frame else "?",
    )
    raised = Raised(
        g, job_id, chains, link, "\n".join(tb.lines + tb.remote), lines, tb, inner_type, outer_type
    )
    for r in rules(On.DRIVER):  # the last of them (exception) always answers
        found = r(raised)
        if found is not None:
            return found
    return None


def _chain_of(d: Raised, name: str) -> Chain | None:
    for c in d.chains:
        if any(d.g.entities.get(s) and d.g.entities[s].row.get("name") == name for s in c.subjects):
            return c
    return None


@rule(On.DRIVER, Kind.RAISED, order=10, reads=("driver_lines", "tasks"))
def remote_raise(d: Raised) -> Chain | None:
    """Where it was first raised: the innermost "ray::f() (pid=…)" of a task or actor method, joined to that
    work's chain; Ray's own error (an actor or owner that died) inside it came from a call it made."""
    remote = first_raise(d.traceback)
    c = _chain_of(d, remote["name"]) if remote else None
    if c is None:
        return None
    deeper = called_chain(d.g, c, d.chains) if RAY_SYSTEM_ERROR.search(d.inner_type) else None
    return merge(d.link, deeper or c)


@rule(On.DRIVER, Kind.RUNTIME_ENV, order=20, reads=("driver_lines",))
def runtime_env(d: Raised) -> Chain | None:
    """A runtime_env that could not be set up for a task or actor of the job: that failure, in the installer's
    words."""
    if not any(RUNTIME_ENV_ERROR in line for line in [*d.tb.lines, *d.lines[-RUNTIME_ENV_SEARCH_LINES:]]):
        return None
    env = next((c for c in d.chains if c.kind is Kind.RUNTIME_ENV), None)
    return merge(d.link, env) if env is not None else None


@rule(On.DRIVER, Kind.SERVE, order=30, next_steps=("serve_status",), reads=("driver_lines", "serve"))
def serve(d: Raised) -> Chain | None:
    """A Serve application the driver could not deploy (or call): why, in its deployment's words (a replica's
    constructor)."""
    from ray_mcp.diagnosis.rules.serve import serve_failure

    links = serve_failure(d.g, d.traceback)
    return d.chain(Kind.SERVE, links, ["serve_status"]) if links else None


@rule(On.DRIVER, Kind.OWNER_DIED, order=40, reads=("driver_lines", "workers", "actors", "tasks"))
def owner(d: Raised) -> Chain | None:
    """An object whose owner died: the owner and why it ended (the owner's id is on the lines after the
    exception line when the message spans several)."""
    owned = (
        d.traceback
        if parse_owner(d.traceback)
        else "\n".join(d.lines[-OWNER_SEARCH_LINES:])
        if "OwnerDiedError" in d.traceback
        else ""
    )
    return d.chain(Kind.OWNER_DIED, owner_chain(d.g, owned)) if parse_owner(owned) else None


@rule(On.DRIVER, Kind.NAMED_ACTOR, order=50, refs=(ACTORS_DOC,), reads=("driver_lines", "related_actors"))
def named(d: Raised) -> Chain | None:
    """A named actor that is not where it was looked up (another namespace, DEAD, never created), or a name
    already taken (who holds it, often a detached actor an earlier job left)."""
    m = LOOKUP_FAILED.search(d.traceback)
    if m:
        return d.chain(Kind.NAMED_ACTOR, named_actor(d.g, m["name"]))
    m = NAME_TAKEN.search(d.traceback)
    return d.chain(Kind.NAMED_ACTOR, name_holder(d.g, m["name"], m["namespace"])) if m else None


@rule(On.DRIVER, Kind.RAISED, order=60, reads=("driver_lines", "actors"))
def dead_actor(d: Raised) -> Chain | None:
    """An ActorDiedError (and kin) that names its actor: that actor's chain, or how it ended."""
    if not ACTOR_ERROR.search(d.traceback):
        return None
    # Ray prints the actor's class, id and death cause on the lines after the exception line.
    for aid in actor_ids("\n".join([d.traceback, *d.lines[-OWNER_SEARCH_LINES:]])):
        explained = next((c for c in d.chains if f"actor:{aid}" in c.subjects), None)
        if explained is not None:
            return merge(d.link, explained)
        if aid in d.g.actors:
            return d.chain(
                Kind.RAISED, ended(On.ACTOR_END, d.g, d.g.actors[aid], 0), subjects={f"actor:{aid}"}
            )
    return None


@rule(On.DRIVER, Kind.WAITING, order=70, reads=("driver_lines", "tasks", "actors", "pgs", "nodes"))
def timed_out(d: Raised) -> Chain | None:
    """A GetTimeoutError: what the driver waited on (open work, and why it waits), or work that was never
    placed."""
    from ray_mcp.diagnosis.rules.symptoms import wait_kind

    if "GetTimeoutError" not in d.traceback:
        return None
    waiting = driver_wait(d.g, d.job_id)
    if waiting is not None:
        return d.chain(waiting.kind, waiting.links, waiting.next_steps, waiting.subjects)
    unplaced = never_placed(d.g, d.job_id)
    return d.chain(wait_kind(unplaced), unplaced, ["cluster_status"]) if unplaced else None


@rule(
    On.DRIVER,
    Kind.TIMEOUT,
    order=80,
    refs=(),
    next_steps=("list_tasks job={job_id}", "cpu_profile or stack_traces of the slow task"),
    reads=("driver_lines", "tasks"),
)
def gave_up(d: Raised) -> Chain | None:
    """The driver raised a timeout of its own: the work it stopped waiting for, still running when the job
    ended."""
    late = [c for c in d.chains if c.kind is Kind.ENDED_WITH_JOB]
    if not TIMED_OUT.search(d.traceback) or not late:
        return None
    rows = [d.g.entities[k].row for c in late for k in sorted(c.subjects) if k in d.g.entities]
    work = [d.g.task_label(r) for r in rows[:TIMED_OUT_WORK_NAMED]]
    quote = "; ".join(c.links[-1].quote for c in late[:TIMED_OUT_WORK_NAMED])
    steps = [s.format(job_id=d.job_id) for s in gave_up.next_steps]
    subjects = set().union(*(c.subjects for c in late))
    return d.chain(
        Kind.TIMEOUT,
        [GAVE_UP("", quote, raised=d.link, work=work, more=len(rows) - len(work))],
        steps,
        subjects,
    )


@rule(On.DRIVER, Kind.RAISED, order=90, reads=("driver_lines",))
def called_by_name(d: Raised) -> Chain | None:
    """The chain of work the driver's traceback names (a ray.kill of an actor it called is the cause when the
    driver failed on it); a call made inside a task the traceback names explains that task's failure, so the
    callee comes first."""
    named_ = [
        c for c in d.chains if c.kind not in (Kind.RETRIED, Kind.CANCELLED, Kind.ENDED_WITH_JOB) and c.links
    ]
    matched: list[tuple[Chain, dict]] = []
    for c in named_:
        for key in sorted(c.subjects):
            ent = d.g.entities.get(key)
            called = ent and (ent.row.get("name") or ent.row.get("class_name") or "").split(".")[-1]
            if ent and called and re.search(rf"\b{re.escape(called)}\b", d.traceback):
                matched.append((c, ent.row))
    if not matched:
        return None
    callers = {str(row.get("task_id")) for _, row in matched if row.get("task_id")}
    callee = next((c for c, row in matched if str(row.get("parent_task_id") or "") in callers), None)
    return merge(d.link, callee or matched[0][0])


@rule(On.DRIVER, Kind.RAISED, order=95, reads=("driver_lines",))
def ray_wrapper(d: Raised) -> Chain | None:
    """A Ray error the driver re-raised (RayTaskError and kin): the first failure of the job's work."""
    failed = [
        c for c in d.chains if c.kind not in (Kind.RETRIED, Kind.CANCELLED, Kind.KILLED, Kind.ENDED_WITH_JOB)
    ]
    wrapper = (
        tracebacks.is_ray_wrapper(d.outer_type)
        or "RayTaskError" in d.outer_type
        or d.outer_type.startswith("ray.exceptions.")
    )
    return merge(d.link, failed[0]) if wrapper and failed else None


@rule(
    On.DRIVER,
    Kind.DRIVER_EXCEPTION,
    order=99,
    refs=(JOBS_DOC, "prompt:diagnose-failed-job"),
    next_steps=("tail_logs job={job_id} grep='Traceback|Error' context=20",),
    reads=("driver_lines",),
)
def exception(d: Raised) -> Chain | None:
    """The driver's own exception, with its message and the user's frame, when nothing remote is behind it."""
    return d.chain(Kind.DRIVER_EXCEPTION, [], [s.format(job_id=d.job_id) for s in exception.next_steps])


def never_placed(g: Graph, job_id: str) -> list[Link]:
    """The job's actors that died without ever starting, and why they could not be placed; else its groups that
    were never created, and why."""
    for row in g.actors.values():
        ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
        if row.get("job_id") != job_id or not ctx.get("never_started"):
            continue
        need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
        links = resource_wait(g, g.actor_label(row), need, f"actor:{row.get('actor_id')}")
        if links:
            return [NEVER_STARTED(g.actor_label(row)), *links]
    for pg in g.pgs.values():
        stats = pg.get("stats") or {}
        never = str(stats.get("end_to_end_creation_latency_us") or "0") == "0"
        if pg.get("creator_job_id") != job_id or pg.get("state") == "CREATED" or not never:
            continue
        links = pg_wait(g, pg)
        if links:
            state = stats.get("scheduling_state") or pg.get("state")
            return [NEVER_CREATED(g.pg_label(pg), state=state), *links]
    return []


def called_chain(g: Graph, caller: Chain, chains: Sequence[Chain]) -> Chain | None:
    """The chain of a failed call made from inside ``caller``'s task (a task whose parent is that task)."""
    ids = {str(g.entities[s].row.get("task_id")) for s in caller.subjects if s in g.entities}
    ids.discard("None")
    for c in chains:
        if c is caller:
            continue
        for s in c.subjects:
            ent = g.entities.get(s)
            if ent is not None and str(ent.row.get("parent_task_id") or "") in ids:
                return c
    return None


def name_holder(g: Graph, name: str, namespace: str) -> list[Link]:
    """Who holds the actor name the job tried to take: an actor still alive under it (often a detached one
    left by an earlier job), with that job and how it ended.

    Ray names an actor by its name and namespace, so only an actor in the namespace the error names holds it.
    Ray says ``namespace=None`` when the call named none: then it is the job's own, known from the job's
    actors (when they all share one); a namesake elsewhere holds nothing here."""
    if namespace in ("None", ""):
        own = {str(a["ray_namespace"]) for a in g.ev.actors or [] if a.get("ray_namespace")}
        namespace = own.pop() if len(own) == 1 else ""
    holders = [
        a
        for a in g.ev.related_actors
        if a.get("name") == name
        and a.get("state") != "DEAD"
        and (not namespace or a.get("ray_namespace") == namespace)
    ]
    if not holders:
        return [NAME_TAKEN_FREE(name=name)]
    a = holders[0]
    job_id = str(a.get("job_id") or "")
    ended_ = (g.jobs.get(job_id) or {}).get("status")
    job = g.job_label(job_id) + (
        f", which ended ({ended_})" if ended_ in ("SUCCEEDED", "FAILED", "STOPPED") else ""
    )
    quote = (
        f"{g.actor_label(a)} state={a.get('state')} namespace={a.get('ray_namespace')} "
        f"detached={bool(a.get('is_detached'))}"
    )
    detached = "detached " if a.get("is_detached") else ""
    return [NAME_TAKEN_BY("", quote, name=name, detached=detached, holder=g.actor_label(a), job=job)]


def named_actor(g: Graph, name: str) -> list[Link]:
    """Where the actor the driver looked up by name is: in another namespace, DEAD (and why), or nowhere."""
    found = [a for a in g.ev.related_actors if a.get("name") == name]
    alive = [a for a in found if a.get("state") != "DEAD"]
    if alive:
        a = alive[0]
        quote = f"{g.actor_label(a)} state={a.get('state')} namespace={a.get('ray_namespace')}"
        return [
            OTHER_NAMESPACE(
                "", quote, name=name, namespace=a.get("ray_namespace"), job=g.job_label(a.get("job_id"))
            )
        ]
    if found:
        a = found[0]
        return [NAMED_DEAD(name=name, job=g.job_label(a.get("job_id"))), *ended(On.ACTOR_END, g, a, 0)]
    return [NO_SUCH_NAME(name=name)]
