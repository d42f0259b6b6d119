"""The engine: every rule over one graph, ranked and joined into the chains an answer tells.

``explain_job`` runs the job's rules (registry ``On.JOB``, in order), joins the driver's exception to the chain
it came from (``On.DRIVER``), weighs a stall, a blocked driver and progress, and ranks; ``explain_cluster`` runs
the cluster's (``On.CLUSTER``). Both return facts; ``verdict_line`` and report.py put them in words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ray_mcp.amounts import duration
from ray_mcp.diagnosis import hang
from ray_mcp.diagnosis.facts import CONTEXT, INFO, Chain, Kind
from ray_mcp.diagnosis.graph import Graph, GraphInputs, ago, ms_clock, names, num
from ray_mcp.diagnosis.registry import On, rules
from ray_mcp.diagnosis.rules.driver import driver_chain
from ray_mcp.diagnosis.rules.progress import EXPLAINS_A_STALL
from ray_mcp.diagnosis.rules.symptoms import ALSO
from ray_mcp.limits import OTHER_JOBS_NAMED, VERDICT_BYTES
from ray_mcp.text import fit_bytes

# JOB rules of this order or above run after the driver's exception is joined to the chain it came from: they
# weigh what was found (a stall, progress, a memory kill of the driver) and refine it.
LATE = 100


@dataclass(frozen=True)
class Phrase:
    """The job's own status and how it got there: "FAILED after 20s (driver exit code 1)"."""

    status: str
    took: str = ""  # how long it ran, when it ended
    stopped_at: str = ""
    code: object = None
    running_for: str = ""

    def __str__(self) -> str:
        after = f" after {self.took}" if self.took else ""
        if self.status == "SUCCEEDED":
            return f"SUCCEEDED: the job succeeded{after}"
        if self.status == "STOPPED":
            return f"STOPPED: stopped on request at {self.stopped_at}{after}"
        if self.status == "FAILED":
            code = f" (driver exit code {self.code})" if self.code is not None else ""
            return f"FAILED{after}{code}"
        if self.status in ("RUNNING", "PENDING") and self.running_for:
            return f"{self.status} for {self.running_for}"
        return self.status

    @property
    def ended_well(self) -> bool:
        return self.status in ("SUCCEEDED", "STOPPED")


def job_status(ev: GraphInputs) -> Phrase:
    """The job's own status and how it got there."""
    job = ev.job or {}
    status = str(job.get("status") or "UNKNOWN")
    start, end = num(job.get("start_time")), num(job.get("end_time"))
    return Phrase(
        status,
        duration((end - start) / 1000) if start and end else "",
        ms_clock(end),
        job.get("driver_exit_code"),
        ago(start, ev.now_ms) if start else "",
    )


def explain_job(ev: GraphInputs) -> tuple[Phrase, list[Chain], list[str]]:
    """(status phrase, ranked chains, notes on other jobs) for one job: every job rule over one graph."""
    g = Graph(ev)
    job = ev.job or {}
    job_id = str(job.get("job_id") or "")
    status = str(job.get("status") or "")
    chains: list[Chain] = []
    for r in rules(On.JOB):
        if r.order < LATE:
            chains += r(g, job_id or None, status, chains)
    looped = set().union(
        *(c.subjects for c in chains if c.kind is Kind.SERVE_LOOP)
    )  # its replicas: not apart
    chains = [c for c in chains if c.kind is Kind.SERVE_LOOP or not (c.subjects and c.subjects <= looped)]
    drv = (
        driver_chain(g, ev.driver_lines, chains, job_id)
        if status in ("FAILED", "STOPPED", "RUNNING")
        else None
    )
    if drv is not None:
        told = drv.cause_key("nothing")
        chains = [
            c
            for c in chains
            if not (c.subjects and c.subjects <= drv.subjects) and c.cause_key("nothing") != told
        ]
        chains.append(drv)
    for r in rules(On.JOB):
        if r.order >= LATE:
            chains += r(g, job_id or None, status, chains)
    if status in ("SUCCEEDED", "STOPPED"):
        for c in chains:  # context: ranked after the status itself
            c.severity = min(c.severity, CONTEXT)
    chains.sort(key=lambda c: -c.severity)
    return job_status(ev), distinct(chains), other_jobs(g, job_id)


def distinct(chains: Sequence[Chain]) -> list[Chain]:
    """One chain per cause: the same cause reached from several symptoms is told once, where it ranks highest."""
    seen: dict[tuple[object, ...], Chain] = {}
    out = []
    for c in chains:
        key = c.cause_key() if c.links else ()
        if key and key in seen and c.severity > INFO:
            kept = seen[key]  # counted where it is told: every symptom it explains
            if c.symptom and not c.subjects <= kept.subjects:
                kept.details.append(ALSO(chain=c))
            kept.subjects |= c.subjects
            continue
        seen.setdefault(key, c)
        out.append(c)
    return out


def other_jobs(g: Graph, job_id: str) -> list[str]:
    failed = [j for jid, j in g.jobs.items() if jid != job_id and j.get("status") == "FAILED"]
    if not failed:
        return []
    return [
        f"Other jobs (not this one's problem): {len(failed)} FAILED "
        f"({names((str(j.get('job_id')) for j in failed), OTHER_JOBS_NAMED)}); cluster_health or diagnose_job for them."
    ]


def explain_cluster(ev: GraphInputs) -> list[Chain]:
    """Every cluster rule over one graph, ranked: dead nodes and what they took down, Serve, each job's chains
    named by cause, failed jobs, demands and memory."""
    g = Graph(ev)
    chains: list[Chain] = []
    for r in rules(On.CLUSTER):
        chains += r(g, chains)
    chains.sort(key=lambda c: -c.severity)
    return chains


def verdict_line(phrase: Phrase, chains: Sequence[Chain], limit: int = VERDICT_BYTES) -> str:
    """Status first, then the main chain's symptom and last link, within ``limit`` bytes."""
    status = phrase.status
    main = chains[0] if chains else None
    ended_well = status in ("SUCCEEDED", "STOPPED")
    if main is None or (ended_well and main.severity <= CONTEXT and main.kind is not Kind.RETRIED):
        line = f"{phrase}" + ("; nothing failed" if main is None and status == "SUCCEEDED" else "")
        if main is not None and main.severity > INFO:
            line += f"; context: {main.verdict}"
    elif ended_well:
        line = f"{phrase}; warning: {main.cause}"
    else:
        sep = " but not healthy" if status == "RUNNING" and main.severity > CONTEXT + 10 else ""
        line = f"{phrase}{sep}{stalled_for(main, chains)}: {main.verdict}"
    return fit_bytes(line, limit)


def stalled_for(main: Chain, chains: Sequence[Chain]) -> str:
    """ ", no task activity for 44 s": how long a stalled job did not move, when another chain says why."""
    if main.kind not in EXPLAINS_A_STALL or main.kind is Kind.DEADLOCK:
        return ""
    stall_ = next((c for c in chains if c.kind is Kind.HANG), None)
    if stall_ is None or not stall_.links:
        return ""
    return f", {hang.idle_words(stall_.links[0])}"
