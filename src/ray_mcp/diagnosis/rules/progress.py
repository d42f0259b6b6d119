"""Progress: a RUNNING job that does not move (no task activity: how long, the stacks, what its driver waits on)
and one whose tasks are finishing (healthy, whatever its driver waits on). These weigh what the other rules
found, so they run late (order >= explain.LATE)."""

from __future__ import annotations

from ray_mcp.diagnosis import hang
from ray_mcp.diagnosis.facts import CONTEXT, ROOT, STUCK, Chain, Edge, Kind, Say, said
from ray_mcp.diagnosis.graph import Graph, num
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules.symptoms import final_attempts, progress
from ray_mcp.diagnosis.rules.waiting import driver_wait

CORE_DOC = "ray-docs://reference/02-ray-core-tasks"
HEALTHY = Say("healthy", Edge.WAITS_ON, said("healthy: its tasks are finishing ({progress})"))
# Chains that say why a stalled job does not move (the stall itself says only that, and where it waits).
EXPLAINS_A_STALL = (
    Kind.CONTENTION,
    Kind.INFEASIBLE,
    Kind.DEADLOCK,
    Kind.ENTRYPOINT_RESOURCES,
    Kind.WAITING,
    Kind.SERVE_LOOP,
    Kind.DATA_STALL,
    Kind.BLOCKED_LOOP,
)


@rule(
    On.JOB,
    Kind.HANG,
    order=100,
    refs=(CORE_DOC,),
    reads=("job", "tasks", "stacks", "actors", "pgs", "nodes"),
)
def stall(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A RUNNING job that does not move: what its driver waits on (when nothing stuck is told yet), and the
    stall itself (how long nothing moved, the stacks), ranked just below a chain that says why."""
    if job_id is None:
        return []
    out: list[Chain] = []
    reading = hang.reading(g.ev)
    if status == "RUNNING" and job_id and not any(c.severity >= STUCK - 12 for c in chains):
        waiting = driver_wait(g, job_id)
        if waiting is not None and not any(c.subjects & waiting.subjects for c in chains if c.subjects):
            out.append(waiting)
    if reading is not None:
        job = g.ev.job or {}
        stalled = hang.stall_chain(
            reading, list(g.node_totals().values()), str(job.get("submission_id") or job_id)
        )
        explained = [
            c.severity for c in [*chains, *out] if c.kind in EXPLAINS_A_STALL and c.severity > CONTEXT
        ]
        if stalled is not None and not any(c.kind is Kind.DEADLOCK for c in chains):
            if explained:  # the chain that says why leads; the stall says for how long nothing moved
                stalled.severity = min(stalled.severity, max(explained) - 1)
            out.append(stalled)
    return out


@rule(On.JOB, Kind.PROGRESSING, order=110, severity=CONTEXT, reads=("job", "tasks"))
def progressing(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """Progress beats a blocked-looking driver: while the job's tasks finish, a driver waiting in ray.get (or
    work waiting for resources others use now) is how the job runs, not a fault. Say it is healthy first and
    leave those waits as context; only a stall (hang.py) makes them the verdict."""
    if status != "RUNNING" or not job_id:
        return []
    job = g.ev.job or {}
    finished = [t for t in final_attempts(g, str(job.get("job_id"))) if t.get("state") == "FINISHED"]
    newest = max((num(t.get("end_time_ms")) for t in finished), default=0.0)
    if not newest or g.ev.now_ms - newest > hang.NO_PROGRESS_S * 1000:
        return []
    for c in chains:
        if c.kind in (Kind.WAITING, Kind.CONTENTION, Kind.HANG, Kind.PENDING_DEMAND) and c.severity < ROOT:
            c.severity = min(c.severity, CONTEXT - 1)
    if any(c.severity > CONTEXT for c in chains):
        return []  # something else is wrong: it leads, progress or not
    return [
        Chain(
            CONTEXT,
            Kind.PROGRESSING,
            None,
            [HEALTHY(progress=progress(g))],
            [f"wait_for_job job={job.get('submission_id') or job.get('job_id')}"],
            subjects={"progress"},
        )
    ]
