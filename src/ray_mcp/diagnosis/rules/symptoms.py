"""Symptoms every job shows, each followed to its cause through the end and wait rules: its failed tasks
(grouped by cause), its dead, looping or pending actors, its pending groups and tasks, its retried attempts; and
for the cluster, the same over every job, one finding per cause."""

from __future__ import annotations

from collections.abc import Sequence

from ray_mcp.diagnosis.facts import (
    CONTEXT,
    INFO,
    STUCK,
    WARNING,
    Chain,
    Edge,
    Kind,
    Link,
    Say,
    chain_kind,
    mask,
    said,
)
from ray_mcp.diagnosis.graph import Graph, Row, ago, failure_restarts, names, num
from ray_mcp.diagnosis.recognise import exc_quote, exception_line
from ray_mcp.diagnosis.registry import On, ended, rule
from ray_mcp.diagnosis.rules.lifecycle import BENIGN, CANCELLED_TASKS, ENDED_ON_REQUEST
from ray_mcp.diagnosis.rules.memory import MEMORY_PROFILE_STEP
from ray_mcp.diagnosis.rules.owners import OWNER_DIED, OWNER_DRIVER_ENDED
from ray_mcp.diagnosis.rules.placement import pg_wait
from ray_mcp.diagnosis.rules.waiting import actor_wait, task_wait
from ray_mcp.diagnosis.rules.workers import restart_loop

TASKS_FAILED = Say(
    "tasks_failed",
    Edge.ENDED_BY,
    lambda f: (
        (f"task {f['name']} failed" if f["count"] == 1 else f"{f['count']} tasks {f['name']} failed")
        + (f" after {f['attempts']} attempts" if f["attempts"] > 1 else "")
    ),
)
ACTOR_DIED = Say("actor_died", Edge.ENDED_BY, said("{subject} died"))
ACTOR_IS = Say("actor_is", Edge.WAITS_ON, said("{subject} is {state}"))
GROUP_IS = Say("group_is", Edge.WAITS_ON, said("{subject} is {state}"))
TASKS_WAIT = Say("tasks_wait", Edge.WAITS_ON, said("{count} task(s) {name} wait to be scheduled"))
RETRIED = Say(
    "retried",
    Edge.ENDED_BY,
    said("{attempts} attempt(s) of {name} failed with {error}; all retried successfully ({tasks} task(s))"),
)
WARNING_SAY = Say("warning", Edge.ENDED_BY, said("Warning"))
ALSO = Say("also", Edge.ENDED_BY, lambda f: f"also: {f['chain'].symptom}")
HELD_UP = Say("held_up", Edge.ENDED_BY, lambda f: f"also held up by it: {f['chain'].symptom}")


def final_attempts(g: Graph, job_id: str | None) -> list[Row]:
    return [rows[-1] for rows in g.attempts.values() if not job_id or rows[-1].get("job_id") == job_id]


def cause_steps(links: Sequence[Link], row: Row) -> list[str]:
    """The next steps the rules that found a chain's links declare, the deepest cause's first, each formatted
    with the row of the task or actor it explains ("tail_logs actor_id={actor_id}")."""
    steps: list[str] = []
    for link in reversed(links):
        for step in link.rule.next_steps if link.rule is not None else ():
            said = step.format_map(_Fields(row))
            if said not in steps:
                steps.append(said)
    return steps


class _Fields(dict[str, object]):
    """A row's fields for a next step's placeholders; a field it lacks stays a placeholder."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def wait_rank(links: Sequence[Link], infeasible: int, held: int) -> int:
    """Waits forever (infeasible) > waits for held resources > waits while what it needs looks free (scheduling,
    workers starting: context, not a fault yet)."""
    last = links[-1].say if links else None
    if last is not None and last.infeasible:
        return infeasible
    return CONTEXT + 5 if last is not None and last.free else held


def wait_kind(links: Sequence[Link]) -> Kind:
    if links and links[-1].say.infeasible:
        return Kind.INFEASIBLE
    if links and links[-1].kind is Edge.HOLDS:
        return Kind.CONTENTION
    return Kind.WAITING


@rule(On.JOB, Kind.FAILED, order=30, reads=("tasks",))
def failed_tasks(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Each distinct cause of the job's failed tasks, with the count of tasks it took down (ray.cancel counted
    apart, not a failure)."""
    return failed_task_chains(g, job_id) if job_id else []


def failed_task_chains(g: Graph, job_id: str | None) -> list[Chain]:
    groups: dict[tuple[object, ...], tuple[list[Link], list[Row]]] = {}
    cancelled: list[Row] = []
    for t in final_attempts(g, job_id):
        if t.get("state") != "FAILED":
            continue
        if t.get("error_type") == "TASK_CANCELLED":
            cancelled.append(t)
            continue
        links = ended(On.TASK_END, g, t, 0)
        # ids, pids, figures apart: the same cause in other tasks of the same name (shard_1, shard_2)
        key = (links[-1].key("numbers"), mask(str(t.get("name")), "numbers"))
        groups.setdefault(key, (links, []))[1].append(t)
    out = []
    for links, rows in groups.values():
        first = rows[0]
        kind = chain_kind(links)
        what = TASKS_FAILED(
            count=len(rows),
            name=str(first.get("name")),
            attempts=len(g.attempts.get(str(first.get("task_id")), [])),
            counted=len(rows) > 1,
        )
        out.append(
            Chain(
                CONTEXT - 10 if kind is Kind.ENDED_WITH_JOB else CONTEXT + 10,
                kind,
                what,
                links,
                [
                    *cause_steps(links, first),
                    f"list_tasks job={first.get('job_id')} state=FAILED",
                    f"tail_logs task_id={first.get('task_id')}",
                    *([MEMORY_PROFILE_STEP] if kind is Kind.OOM else []),
                ],
                first.get("job_id"),
                {f"task:{t.get('task_id')}" for t in rows},
            )
        )
    if cancelled:
        out.append(
            Chain(
                INFO,
                Kind.CANCELLED,
                CANCELLED_TASKS(count=len(cancelled)),
                [],
                job_id=job_id,
                subjects={f"task:{t.get('task_id')}" for t in cancelled},
            )
        )
    return out


@rule(On.JOB, Kind.FAILED, order=40, reads=("actors", "workers", "worker_logs"))
def actors(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The job's dead actors (why each died), actors in a restart loop, actors that wait to be created (and on
    what); those ended on request or out of scope counted apart, not a failure."""
    return actor_chains(g, job_id, status) if job_id else []


def actor_chains(g: Graph, job_id: str | None, job_status_: str) -> list[Chain]:
    out = []
    killed = []
    for row in g.actors.values():
        if job_id and row.get("job_id") != job_id:
            continue
        restarts = failure_restarts(row)
        state = row.get("state")
        if state == "DEAD":
            links = ended(On.ACTOR_END, g, row, 0)
            if links[-1].say in BENIGN:
                killed.append(row)
                continue
            # the whole cluster (no job_id): each actor's own job says whether it ended
            own_job = job_status_ if job_id else (g.jobs.get(str(row.get("job_id"))) or {}).get("status")
            if (
                links[0].say is OWNER_DIED
                and links[-1].say is OWNER_DRIVER_ENDED
                and own_job not in ("RUNNING", None)
            ):
                continue  # the job ended, and its actors with it
            aid = row.get("actor_id")
            out.append(
                Chain(
                    CONTEXT + 15,
                    chain_kind(links),
                    ACTOR_DIED(g.actor_label(row)),
                    links,
                    [
                        *cause_steps(links, row),
                        f"tail_logs actor_id={aid}",
                        f"get_actor actor_id={aid}",
                        *([MEMORY_PROFILE_STEP] if chain_kind(links) is Kind.OOM else []),
                    ],
                    row.get("job_id"),
                    {f"actor:{aid}"},
                )
            )
        elif restarts >= 2 or (state == "RESTARTING" and restarts >= 1):
            out.append(restart_loop(g, row))
        elif state in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            links = actor_wait(g, row)
            if links:
                out.append(
                    Chain(
                        wait_rank(links, STUCK - 5, STUCK - 10),
                        wait_kind(links),
                        ACTOR_IS(g.actor_label(row), state=state),
                        links,
                        ["cluster_status", f"get_actor actor_id={row.get('actor_id')}"],
                        row.get("job_id"),
                        {f"actor:{row.get('actor_id')}"},
                    )
                )
    if killed:
        labels = names(g.actor_label(a) for a in killed)
        out.append(
            Chain(
                INFO,
                Kind.KILLED,
                ENDED_ON_REQUEST(count=len(killed), labels=labels),
                [],
                job_id=job_id,
                subjects={f"actor:{a.get('actor_id')}" for a in killed},
            )
        )
    return out


@rule(On.JOB, Kind.RETRIED, order=60, severity=WARNING, reads=("tasks",))
def retried(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Tasks whose earlier attempts failed but whose last attempt finished: a warning, not a failure."""
    return retried_warnings(g, job_id) if job_id else []


def retried_warnings(g: Graph, job_id: str | None) -> list[Chain]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for rows in g.attempts.values():
        if rows[-1].get("state") != "FINISHED" or (job_id and rows[-1].get("job_id") != job_id):
            continue
        for t in rows[:-1]:
            if t.get("state") == "FAILED":
                exc = exception_line(t.get("error_message")).split(":")[0] or str(t.get("error_type"))
                groups.setdefault((str(t.get("name")), exc), []).append(t)
    out = []
    for (name, exc), rows in groups.items():
        tasks = {str(t.get("task_id")) for t in rows}
        link = RETRIED(
            "",
            exc_quote(str(rows[-1].get("error_message") or "")),
            attempts=len(rows),
            name=name,
            error=exc,
            tasks=len(tasks),
        )
        out.append(
            Chain(
                WARNING,
                Kind.RETRIED,
                WARNING_SAY(),
                [link],
                job_id=job_id,
                subjects={f"task:{t}" for t in tasks},
            )
        )
    return out


@rule(On.JOB, Kind.WAITING, order=70, reads=("pgs", "tasks", "nodes", "alive_actors", "running_tasks"))
def pending(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A RUNNING or PENDING job's placement groups that wait, and its tasks that wait to be scheduled (grouped by
    why): infeasible, held by whom, or free now."""
    return pending_chains(g, job_id) if job_id and status in ("RUNNING", "PENDING") else []


def pending_chains(g: Graph, job_id: str | None) -> list[Chain]:
    out = []
    for pg in g.pgs.values():
        if (job_id and pg.get("creator_job_id") != job_id) or pg.get("state") not in (
            "PENDING",
            "RESCHEDULING",
        ):
            continue
        links = pg_wait(g, pg)
        if links:
            out.append(
                Chain(
                    wait_rank(links, STUCK, STUCK - 10),
                    wait_kind(links),
                    GROUP_IS(g.pg_label(pg), state=pg.get("state")),
                    links,
                    [f"pg_status placement_group={pg.get('placement_group_id')}", "cluster_status"],
                    pg.get("creator_job_id"),
                    {f"pg:{pg.get('placement_group_id')}"},
                )
            )
    waiting: dict[tuple[object, ...], tuple[list[Link], list[Row]]] = {}
    for t in final_attempts(g, job_id):
        if (
            t.get("state") == "PENDING_NODE_ASSIGNMENT"
            and t.get("type") == "NORMAL_TASK"
            and not t.get("placement_group_id")
        ):
            links = task_wait(g, t)
            if links:
                waiting.setdefault(links[-1].key(), (links, []))[1].append(t)
    for links, rows in waiting.values():
        out.append(
            Chain(
                wait_rank(links, STUCK - 5, STUCK - 12),
                wait_kind(links),
                TASKS_WAIT(count=len(rows), name=rows[0].get("name"), counted=True),
                links,
                ["cluster_status"],
                rows[0].get("job_id"),
                {f"task:{t.get('task_id')}" for t in rows},
            )
        )
    return out


# Kinds of chains the cluster tells as context at most: a job's own failure, told in full by diagnose_job.
JOB_FAILURES = (
    Kind.FAILED,
    Kind.RAISED,
    Kind.OWNER_DIED,
    Kind.WORKER_CRASH,
    Kind.OOM,
    Kind.NODE_DIED,
    Kind.PG_REMOVED,
)


@rule(On.CLUSTER, Kind.WAITING, order=50, reads=("pgs", "tasks", "actors"))
def workloads(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Every job's pending groups and tasks, failed tasks and dead, looping or pending actors, named with their
    job, one finding per cause (what else it holds up counted under it); work already told (a dead node's, a
    Serve app's) and what is not a failure left out."""
    from ray_mcp.limits import ALIKE_SHOWN

    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    by_cause: dict[tuple[object, ...], Chain] = {}
    out: list[Chain] = []
    # Pending groups first: an actor or task that waits in a group ends at the group's own chain.
    for c in [*pending_chains(g, None), *failed_task_chains(g, None), *actor_chains(g, None, "RUNNING")]:
        if (c.subjects and c.subjects <= covered) or c.kind in (
            Kind.CANCELLED,
            Kind.KILLED,
            Kind.ENDED_WITH_JOB,
        ):
            continue
        if c.job_id and c.what is not None:
            c.what.values["in_job"] = g.job_label(c.job_id)
        if c.kind in JOB_FAILURES:
            c.severity = min(c.severity, CONTEXT + 10)
        same = by_cause.get(c.cause_key("nothing"))
        if same is not None:  # one cause, one finding: what else it holds up
            same.subjects |= c.subjects
            same.severity = max(same.severity, c.severity)
            if len(same.details) < ALIKE_SHOWN:
                same.details.append(HELD_UP(chain=c))
            continue
        by_cause[c.cause_key("nothing")] = c
        out.append(c)
    return out


def progress(g: Graph) -> str:
    """For a RUNNING job: does it progress? (tasks finished recently, tasks open)."""
    finals = [rows[-1] for rows in g.attempts.values()]
    done = [t for t in finals if t.get("state") == "FINISHED" and t.get("type") != "ACTOR_CREATION_TASK"]
    open_ = [
        t for t in finals if t.get("state") not in ("FINISHED", "FAILED") and t.get("type") != "DRIVER_TASK"
    ]
    newest = max((num(t.get("end_time_ms")) for t in done), default=0.0)
    parts = [f"{len(done)} task(s) finished"]
    if newest:
        parts.append(f"the last {ago(newest, g.ev.now_ms)} ago")
    parts.append(f"{len(open_)} open")
    return ", ".join(parts)
