"""One job explained: its chains ranked and deduplicated, the verdict line within its byte budget, other
jobs in a note."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp.diagnosis import hang
from ray_mcp.diagnosis.chains.capacity import store_chains
from ray_mcp.diagnosis.chains.data import data_chains
from ray_mcp.diagnosis.chains.ended_by import oom_quote
from ray_mcp.diagnosis.chains.links import CONTEXT, INFO, ROOT, STUCK, WARNING, Chain, Link
from ray_mcp.diagnosis.chains.raised_in import driver_chain
from ray_mcp.diagnosis.chains.serve import job_app_chains
from ray_mcp.diagnosis.chains.setup import entrypoint_chains, runtime_env_failure, status_chain
from ray_mcp.diagnosis.chains.symptoms import (
    actor_chains,
    failed_task_chains,
    final_attempts,
    job_status,
    pending_chains,
    progress,
    retried_warnings,
)
from ray_mcp.diagnosis.chains.waits_on import deadlock, driver_wait
from ray_mcp.diagnosis.graph import Graph, GraphInputs, memory_summary, names, num
from ray_mcp.limits import OTHER_JOBS_NAMED, VERDICT_BYTES
from ray_mcp.text import fit_bytes


def explain_job(ev: GraphInputs) -> tuple[str, list[Chain], list[str]]:
    """(status phrase, ranked chains, notes on other jobs) for one job: every job rule over one graph."""
    g = Graph(ev)
    job = ev.job or {}
    job_id = str(job.get("job_id") or "")
    status = str(job.get("status") or "")
    phrase = job_status(ev)
    chains: list[Chain] = [*runtime_env_failure(g), *entrypoint_chains(g)]
    if job_id:
        chains += failed_task_chains(g, job_id)
        chains += actor_chains(g, job_id, status)
        chains += job_app_chains(g, job_id)
        chains += retried_warnings(g, job_id)
        if status in ("RUNNING", "PENDING"):
            chains += pending_chains(g, job_id)
            dl = deadlock(g)
            if dl is not None:
                chains.append(dl)
    looped = set().union(*(c.subjects for c in chains if c.kind == "serve_loop"))  # its replicas: not apart
    chains = [c for c in chains if c.kind == "serve_loop" or not (c.subjects and c.subjects <= looped)]
    drv = (
        driver_chain(g, ev.driver_lines, chains, job_id)
        if status in ("FAILED", "STOPPED", "RUNNING")
        else None
    )
    chains += data_chains(g)
    if drv is not None:
        chains = [
            c for c in chains if not (c.subjects and c.subjects <= drv.subjects) and c.cause != drv.cause
        ]
        chains.append(drv)
    stall = hang.reading(ev)
    if status == "RUNNING" and job_id and not any(c.severity >= STUCK - 12 for c in chains):
        waiting = driver_wait(g, job_id)
        if waiting is not None and not any(c.subjects & waiting.subjects for c in chains if c.subjects):
            chains.append(waiting)
    if stall is not None:
        sid = str(job.get("submission_id") or job_id)
        stalled = hang.stall_chain(stall, list(g.node_totals().values()), sid)
        explained = [c.severity for c in chains if c.kind in EXPLAINS_A_STALL and c.severity > CONTEXT]
        if stalled is not None and not any(c.kind == "deadlock" for c in chains):
            if explained:  # the chain that says why leads; the stall says for how long nothing moved
                stalled.severity = min(stalled.severity, max(explained) - 1)
            chains.append(stalled)
    if status == "RUNNING" and job_id:
        chains += progressing(g, chains)
    chains += memory_kill(g, job_id, chains)
    chains += store_chains(g)
    if not any(c.severity > WARNING for c in chains):
        last = status_chain(g)
        if last is not None:
            chains.append(last)
    if status in ("SUCCEEDED", "STOPPED"):
        for c in chains:  # context: ranked after the status itself
            c.severity = min(c.severity, CONTEXT)
    chains.sort(key=lambda c: -c.severity)
    return phrase, distinct(chains), other_jobs(g, job_id)


def progressing(g: Graph, chains: Sequence[Chain]) -> list[Chain]:
    """Progress beats a blocked-looking driver: while the job's tasks finish, a driver waiting in ray.get (or
    work waiting for resources others use now) is how the job runs, not a fault. Say it is healthy first and
    leave those waits as context; only a stall (hang.py) makes them the verdict."""
    job = g.ev.job or {}
    finished = [t for t in final_attempts(g, str(job.get("job_id"))) if t.get("state") == "FINISHED"]
    newest = max((num(t.get("end_time_ms")) for t in finished), default=0.0)
    if not newest or g.ev.now_ms - newest > hang.NO_PROGRESS_S * 1000:
        return []
    for c in chains:
        if c.kind in ("waiting", "contention", "hang", "pending_demand") and c.severity < ROOT:
            c.severity = min(c.severity, CONTEXT - 1)
    if any(c.severity > CONTEXT for c in chains):
        return []  # something else is wrong: it leads, progress or not
    return [
        Chain(
            CONTEXT,
            "progressing",
            "",
            [Link("waits_on", f"healthy: its tasks are finishing ({progress(g)})")],
            [f"wait_for_job job={job.get('submission_id') or job.get('job_id')}"],
            subjects={"progress"},
        )
    ]


# Chains that say why a stalled job does not move (the stall itself says only that, and where it waits).
EXPLAINS_A_STALL = (
    "contention",
    "infeasible",
    "deadlock",
    "entrypoint_resources",
    "waiting",
    "serve_loop",
    "data_stall",
)


def memory_kill(g: Graph, job_id: str, chains: Sequence[Chain]) -> list[Chain]:
    """A job the memory monitor failed: the kill of its own tasks ranks first (it names the memory users),
    else the driver itself was the monitor's pick."""
    job = g.ev.job or {}
    message = str(job.get("message") or "")
    if job.get("status") != "FAILED" or "running low on memory" not in message:
        return []
    killed = [c for c in chains if c.kind == "oom"]
    if killed:
        killed[0].severity = ROOT + 2
        note = "the job failed: the memory monitor's sweep killed its driver's supervisor too"
        killed[0].links.insert(0, Link("ended_by", note, oom_quote(message)))
        return []
    node_id = (re.search(r"ID: ([0-9a-f]{56})", message) or [None, None])[1]
    top = top_memory_user(message)
    return [
        Chain(
            ROOT + 1,
            "oom",
            "",
            [
                Link(
                    "ended_by",
                    f"the job's driver process was killed by the memory monitor on {g.node_label(node_id)}: "
                    f"{memory_summary(message)}" + (f"; the top memory user was {top}" if top else ""),
                    oom_quote(message),
                )
            ],
            ["cluster_status (memory per node)", "list_tasks state=RUNNING (what else uses memory)"],
            job_id or None,
        )
    ]


def distinct(chains: Sequence[Chain]) -> list[Chain]:
    """One chain per last link: the same cause reached from several symptoms is told once, where it ranks
    highest."""
    seen: dict[str, Chain] = {}
    out = []
    for c in chains:
        key = re.sub(r"\([0-9a-f]{16,}\)", "", c.cause)
        if key and key in seen and c.severity > INFO:
            kept = seen[key]  # counted where it is told: every symptom it explains
            if c.symptom and not c.subjects <= kept.subjects:
                kept.details.append(f"also: {c.symptom}")
            kept.subjects |= c.subjects
            continue
        seen.setdefault(key, c)
        out.append(c)
    return out


def top_memory_user(message: str) -> str:
    """The first row of the memory monitor's "Top 10 memory users" table: "ray::f (pid 123, 2.33 GB)"."""
    m = re.search(r"Top \d+ memory users:[^\n]*\n\s*(\d+)\s+([\d.]+)\s+(\S+)", message)
    return f"{m[3]} (pid {m[1]}, {m[2]} GB)" if m else ""


def other_jobs(g: Graph, job_id: str) -> list[str]:
    failed = [j for jid, j in g.jobs.items() if jid != job_id and j.get("status") == "FAILED"]
    if not failed:
        return []
    return [
        f"Other jobs (not this one's problem): {len(failed)} FAILED ({names((str(j.get('job_id')) for j in failed), OTHER_JOBS_NAMED)}); "
        "cluster_health or diagnose_job for them."
    ]


def verdict_line(phrase: str, chains: Sequence[Chain], limit: int = VERDICT_BYTES) -> str:
    """Status first, then the main chain's symptom and last link, within ``limit`` bytes."""
    main = chains[0] if chains else None
    if main is None or (
        phrase.startswith(("SUCCEEDED", "STOPPED"))
        and main.severity <= CONTEXT
        and main.kind not in ("retried",)
    ):
        line = phrase + ("; nothing failed" if main is None and phrase.startswith("SUCCEEDED") else "")
        if main is not None and main.severity > INFO:
            line += f"; context: {main.verdict}"
    elif phrase.startswith(("SUCCEEDED", "STOPPED")):
        line = f"{phrase}; warning: {main.cause}"
    else:
        sep = " but not healthy" if phrase.startswith("RUNNING") and main.severity > CONTEXT + 10 else ""
        line = f"{phrase}{sep}{stalled_for(main, chains)}: {main.verdict}"
    return fit_bytes(line, limit)


def stalled_for(main: Chain, chains: Sequence[Chain]) -> str:
    """ ", no task activity for 44 s": how long a stalled job did not move, when another chain says why."""
    if main.kind not in EXPLAINS_A_STALL or main.kind == "deadlock":
        return ""
    stall = next((c for c in chains if c.kind == "hang"), None)
    m = re.search(r"no task activity for [^)]*", stall.verdict) if stall is not None else None
    return f", {m.group(0)}" if m else ""
