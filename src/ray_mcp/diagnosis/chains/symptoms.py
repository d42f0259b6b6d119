"""A job's own symptoms as chains: its status, failed tasks grouped by cause, dead or looping actors,
pending groups and tasks, retried attempts."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp.diagnosis.chains.ended_by import actor_end, crash_reason, exc_quote, exit_words, task_end
from ray_mcp.diagnosis.chains.holds import pg_wait
from ray_mcp.diagnosis.chains.links import CONTEXT, INFO, LOOP, STUCK, WARNING, Chain, Link
from ray_mcp.diagnosis.chains.waits_on import actor_wait, task_wait
from ray_mcp.diagnosis.graph import (
    Graph,
    GraphInputs,
    Row,
    ago,
    exception_line,
    ms_clock,
    names,
    num,
    one_line,
    span,
)
from ray_mcp.limits import LOG_QUOTE_LINE_CHARS, QUOTE_CHARS, QUOTE_LINES


def job_status(ev: GraphInputs) -> str:
    """The job's own status and how it got there, in a few words."""
    job = ev.job or {}
    status = str(job.get("status") or "UNKNOWN")
    start, end = num(job.get("start_time")), num(job.get("end_time"))
    took = span((end - start) / 1000) if start and end else ""
    if status == "SUCCEEDED":
        return "SUCCEEDED: the job succeeded" + (f" after {took}" if took else "")
    if status == "STOPPED":
        return f"STOPPED: stopped on request at {ms_clock(end)}" + (f" after {took}" if took else "")
    if status == "FAILED":
        code = job.get("driver_exit_code")
        return (
            "FAILED"
            + (f" after {took}" if took else "")
            + (f" (driver exit code {code})" if code is not None else "")
        )
    if status in ("RUNNING", "PENDING"):
        return f"{status} for {ago(start, ev.now_ms)}" if start else status
    return status


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


def final_attempts(g: Graph, job_id: str | None) -> list[Row]:
    return [rows[-1] for rows in g.attempts.values() if not job_id or rows[-1].get("job_id") == job_id]


def retried_warnings(g: Graph, job_id: str | None) -> list[Chain]:
    """Tasks whose earlier attempts failed but whose last attempt finished: a warning, not a failure."""
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
        out.append(
            Chain(
                WARNING,
                "retried",
                "Warning",
                [
                    Link(
                        "ended_by",
                        f"{len(rows)} attempt(s) of {name} failed with {exc}; all retried successfully ({len(tasks)} task(s))",
                        exc_quote(str(rows[-1].get("error_message") or "")),
                    )
                ],
                job_id=job_id,
                subjects={f"task:{t}" for t in tasks},
            )
        )
    return out


def failed_task_chains(g: Graph, job_id: str | None) -> list[Chain]:
    """Each distinct cause of the job's failed tasks, with the count of tasks it took down."""
    groups: dict[str, tuple[list[Link], list[Row]]] = {}
    cancelled: list[Row] = []
    for t in final_attempts(g, job_id):
        if t.get("state") != "FAILED":
            continue
        if t.get("error_type") == "TASK_CANCELLED":
            cancelled.append(t)
            continue
        links = task_end(g, t)
        key = re.sub(r"\(([0-9a-f]{16,})\)", "", links[-1].text) + str(t.get("name"))
        key = re.sub(
            r"[0-9a-f]{8,}|\d+(\.\d+)?", "#", key
        )  # ids, pids, memory figures: the same cause elsewhere
        groups.setdefault(key, (links, []))[1].append(t)
    chains = []
    for links, rows in groups.values():
        first = rows[0]
        n = len(rows)
        name = str(first.get("name"))
        symptom = f"task {name} failed" if n == 1 else f"{n} tasks {name} failed"
        attempts = len(g.attempts.get(str(first.get("task_id")), []))
        if attempts > 1:
            symptom += f" after {attempts} attempts"
        kind = chain_kind(links)
        chains.append(
            Chain(
                CONTEXT - 10 if kind == "ended_with_job" else CONTEXT + 10,
                kind,
                symptom,
                links,
                [
                    f"list_tasks job={first.get('job_id')} state=FAILED",
                    f"tail_logs task_id={first.get('task_id')}",
                ],
                first.get("job_id"),
                {f"task:{t.get('task_id')}" for t in rows},
            )
        )
    if cancelled:
        chains.append(
            Chain(
                INFO,
                "cancelled",
                f"{len(cancelled)} task(s) cancelled with ray.cancel (not a failure)",
                [],
                job_id=job_id,
                subjects={f"task:{t.get('task_id')}" for t in cancelled},
            )
        )
    return chains


def chain_kind(links: Sequence[Link]) -> str:
    text = " ".join(link.text for link in links)
    for kind, pattern in (
        ("ended_with_job", "when its job ended"),
        ("oom", "memory monitor"),
        ("runtime_env", "could not set up its runtime_env"),
        ("node_died", r"node .* died"),
        ("owner_died", "owner"),
        ("pg_removed", "placement group .* removed"),
        ("killed", "ray.kill"),
        ("worker_crash", "worker process died"),
        ("raised", "raised"),
    ):
        if re.search(pattern, text):
            return kind
    return "failed"


BENIGN_ACTOR_END = ("ray.kill", "out of scope", "exited on purpose")


def actor_chains(g: Graph, job_id: str | None, job_status_: str) -> list[Chain]:
    chains = []
    killed = []
    for row in g.actors.values():
        if job_id and row.get("job_id") != job_id:
            continue
        restarts = int(num(row.get("num_restarts")))
        state = row.get("state")
        if state == "DEAD":
            links = actor_end(g, row)
            if any(b in links[-1].text for b in BENIGN_ACTOR_END):
                killed.append(row)
                continue
            # the whole cluster (no job_id): each actor's own job says whether it ended
            own_job = job_status_ if job_id else (g.jobs.get(str(row.get("job_id"))) or {}).get("status")
            if (
                "died because its owner died" in links[0].text
                and "driver of" in links[-1].text
                and own_job not in ("RUNNING", None)
            ):
                continue  # the job ended, and its actors with it
            chains.append(
                Chain(
                    CONTEXT + 15,
                    chain_kind(links),
                    f"{g.actor_label(row)} died",
                    links,
                    [
                        f"tail_logs actor_id={row.get('actor_id')}",
                        f"get_actor actor_id={row.get('actor_id')}",
                    ],
                    row.get("job_id"),
                    {f"actor:{row.get('actor_id')}"},
                )
            )
        elif restarts >= 2 or (state == "RESTARTING" and restarts >= 1):
            chains.append(restart_loop(g, row))
        elif state in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            links = actor_wait(g, row)
            if links:
                chains.append(
                    Chain(
                        wait_rank(links, STUCK - 5, STUCK - 10),
                        wait_kind(links),
                        f"{g.actor_label(row)} is {state}",
                        links,
                        ["cluster_status", f"get_actor actor_id={row.get('actor_id')}"],
                        row.get("job_id"),
                        {f"actor:{row.get('actor_id')}"},
                    )
                )
    if killed:
        labels = names(g.actor_label(a) for a in killed)
        chains.append(
            Chain(
                INFO,
                "killed",
                f"{len(killed)} actor(s) ended on request or out of scope (not a failure): {labels}",
                [],
                job_id=job_id,
                subjects={f"actor:{a.get('actor_id')}" for a in killed},
            )
        )
    return chains


def wait_rank(links: Sequence[Link], infeasible: int, held: int) -> int:
    """Waits forever (infeasible) > waits for held resources > waits while what it needs looks free (scheduling,
    workers starting: context, not a fault yet)."""
    text = links[-1].text if links else ""
    if "infeasible" in text:
        return infeasible
    return CONTEXT + 5 if "free now" in text else held


def wait_kind(links: Sequence[Link]) -> str:
    text = links[-1].text if links else ""
    if "infeasible" in text:
        return "infeasible"
    if links and links[-1].kind == "holds":
        return "contention"
    return "waiting"


def restart_loop(g: Graph, row: Row) -> Chain:
    label = g.actor_label(row)
    n = int(num(row.get("num_restarts")))
    dead = sorted(row.get("_dead_workers") or [], key=lambda w: num(w.get("end_time_ms")))
    times = [num(w.get("end_time_ms")) for w in dead if num(w.get("end_time_ms"))]
    interval = (
        f", about every {span((times[-1] - times[0]) / 1000 / (len(times) - 1))}" if len(times) >= 2 else ""
    )
    lines = g.ev.worker_logs.get(f"actor:{row.get('actor_id')}", [])
    reason = crash_reason(lines)
    if not reason and dead:
        reason = exit_words(dead[-1].get("exit_type"), dead[-1].get("exit_detail"))
    telling = [
        line
        for line in lines
        if line.strip() and not line.startswith((":job_id:", ":actor_name:", ":task_name:"))
    ]
    quote = " | ".join(one_line(line, LOG_QUOTE_LINE_CHARS) for line in telling[-QUOTE_LINES:]) or (
        one_line(str(dead[-1].get("exit_detail")), QUOTE_CHARS) if dead else ""
    )
    text = f"{label} restarted {n} time(s){interval}; each time its worker died" + (
        f": {reason}" if reason else " (no crash reason in its worker log)"
    )
    if "memory" in (reason or "").lower() and "kill" in (reason or "").lower():
        text = f"{label} restarted {n} time(s){interval}; the memory monitor killed its worker each time"
    state = row.get("state")
    return Chain(
        LOOP,
        "restart_loop",
        f"{label} is in a restart loop ({state})",
        [Link("ended_by", text, quote)],
        [f"tail_logs actor_id={row.get('actor_id')} stream=err", f"get_actor actor_id={row.get('actor_id')}"],
        row.get("job_id"),
        {f"actor:{row.get('actor_id')}"},
    )


def pending_chains(g: Graph, job_id: str | None) -> list[Chain]:
    chains = []
    for pg in g.pgs.values():
        if (job_id and pg.get("creator_job_id") != job_id) or pg.get("state") not in (
            "PENDING",
            "RESCHEDULING",
        ):
            continue
        links = pg_wait(g, pg)
        if links:
            chains.append(
                Chain(
                    wait_rank(links, STUCK, STUCK - 10),
                    wait_kind(links),
                    f"{g.pg_label(pg)} is {pg.get('state')}",
                    links,
                    [f"pg_status placement_group={pg.get('placement_group_id')}", "cluster_status"],
                    pg.get("creator_job_id"),
                    {f"pg:{pg.get('placement_group_id')}"},
                )
            )
    waiting: dict[str, tuple[list[Link], list[Row]]] = {}
    for t in final_attempts(g, job_id):
        if (
            t.get("state") == "PENDING_NODE_ASSIGNMENT"
            and t.get("type") == "NORMAL_TASK"
            and not t.get("placement_group_id")
        ):
            links = task_wait(g, t)
            if links:
                key = re.sub(r"\([0-9a-f]{16,}\)", "", links[-1].text)
                waiting.setdefault(key, (links, []))[1].append(t)
    for links, rows in waiting.values():
        n = len(rows)
        chains.append(
            Chain(
                wait_rank(links, STUCK - 5, STUCK - 12),
                wait_kind(links),
                f"{n} task(s) {rows[0].get('name')} wait to be scheduled",
                links,
                ["cluster_status"],
                rows[0].get("job_id"),
                {f"task:{t.get('task_id')}" for t in rows},
            )
        )
    return chains
