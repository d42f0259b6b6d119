"""The answer's shape: the verdict line first (status, symptom, last link; at most 300 bytes), then each chain
with its links quoted, the cluster events that explain it, other jobs in one line, and what could not be read.
Under the byte budget by construction (pure)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Literal, TypeVar

from ray_mcp import models
from ray_mcp.diagnosis import registry, trends
from ray_mcp.diagnosis.events import event_lines
from ray_mcp.diagnosis.evidence import CHECKS
from ray_mcp.diagnosis.explain import explain_cluster, explain_job, verdict_line
from ray_mcp.diagnosis.facts import CONTEXT, PROBLEM, Chain, Kind
from ray_mcp.diagnosis.graph import Graph, GraphInputs
from ray_mcp.diagnosis.render import fit_lines, merge_alike, render_shown
from ray_mcp.diagnosis.rules.driver import DRIVER_RAISED
from ray_mcp.diagnosis.rules.symptoms import progress
from ray_mcp.limits import (
    CHAIN_EVIDENCE_ITEMS,
    DIAGNOSIS_BYTES,
    DIAGNOSIS_WHOLE_SHARE,
    EXPLAINING_EVENTS,
    FINDING_TITLE_CHARS,
    HEALTH_EVENTS,
    HEALTH_UNCHECKED_CHARS,
    JOB_LINE_ENTRYPOINT_CHARS,
    MIN_QUOTE_CHARS,
    NEXT_STEPS,
    NOTES_SHOWN,
    UNCHECKED_CHARS,
    UNREADABLE_NOTED,
    VERDICT_BYTES,
)
from ray_mcp.shaping.common import json_bytes, sent_bytes
from ray_mcp.shaping.jobs import job_info
from ray_mcp.text import fit_bytes, one_line, truncate_text


def code_span(command: str | None) -> str:
    """A command between backticks: on one line, cut, with no backtick of its own to end the span early."""
    return one_line(command, JOB_LINE_ENTRYPOINT_CHARS).replace("`", "'")


def to_finding(c: Chain) -> models.Finding:
    """A chain in words: its kind, its verdict (the driver's exception and the cause it came from), its links
    and quotes as evidence, next steps and the references its rules declare."""
    kind = Kind.DRIVER_EXCEPTION if c.kind is Kind.RAISED and len(c.links) == 1 else c.kind
    driver = c.what is None and len(c.links) > 1 and c.links[0].say is DRIVER_RAISED
    title = f"{c.links[0].text}; {c.cause}" if driver else c.verdict
    finding = models.Finding(
        severity=c.severity,
        kind=str(kind),
        title=one_line(title, FINDING_TITLE_CHARS),
        evidence=c.evidence()[:CHAIN_EVIDENCE_ITEMS],
        next_steps=c.next_steps[:NEXT_STEPS],
        refs=registry.refs(kind)[:NEXT_STEPS],
    )
    finding._alike = repr(c.alike_key())
    return finding


def job_report(job: str, ev: GraphInputs, *, max_bytes: int) -> tuple[models.JobDiagnosis, str]:
    """diagnose_job's answer: the verdict line, the job line, the chains ranked, events, other jobs, notes."""
    info = job_info(ev.job or {}, ev.now_ms / 1000 or time.time())
    phrase, chains, others = explain_job(ev)
    unchecked = [
        *ev.unchecked,
        *(u.split(":")[0] for u in ev.unreadable if u.split(":")[0] not in ev.unchecked),
    ]
    findings = [*map(to_finding, chains)]
    verdict = verdict_line(phrase, chains)
    if unchecked:
        suffix = f" (could not check {one_line(', '.join(unchecked), UNCHECKED_CHARS)})"
        verdict = fit_bytes(verdict, VERDICT_BYTES - len(suffix.encode())) + suffix
    readable = ev.tasks is not None and ev.actors is not None
    ended_well = phrase.ended_well
    if (not readable or unchecked) and not ended_well and not any(c.severity > CONTEXT for c in chains):
        verdict = fit_bytes(
            f"{phrase}; Unknown: no cause found in what could be read; could not check "
            f"{', '.join(unchecked) or 'the job tasks and actors'}",
            VERDICT_BYTES,
        )
    job_line = (
        f"Job {info.submission_id or job} ({info.job_id or 'no job id yet'}) `{code_span(info.entrypoint)}`: {phrase}"
        + (f", error_type {info.error_type}" if info.error_type else "")
    )
    if info.status == "RUNNING" and ev.tasks is not None:
        job_line += f"; progress: {progress(Graph(ev))}"
    events = explaining_events(ev, findings)
    unread = [
        f"Could not read {u} (what it would show is UNKNOWN, not healthy)."
        for u in ev.unreadable[:UNREADABLE_NOTED]
    ]
    said = [*ev.notes, *unread, *trends.missing_note(ev), *ev.info][:NOTES_SHOWN]
    header = [verdict, job_line, ""]
    merged = merge_alike(findings)  # the verdict above read the unmerged ranking

    def build(budget: int) -> tuple[models.JobDiagnosis, str]:
        footer, shown_events, shown_notes = fit_footer(events, said, budget, others=others)
        text, shown = render_shown(header, merged, budget - len("\n".join(footer).encode()) - 1)
        model = models.JobDiagnosis(
            job=job,
            submission_id=info.submission_id,
            job_id=info.job_id,
            status=info.status,
            error_type=info.error_type,
            driver_exit_code=info.driver_exit_code,
            verdict=verdict,
            findings=shown,
            notes=shown_notes,
            events=shown_events,
            other_jobs=[o for o in others if o in footer],
            unchecked=unchecked,
        )
        return model, "\n".join([text, *footer]) if footer else text

    return within_whole(build, max_bytes)


def fit_footer(
    events: list[str], notes: list[str], budget: int, *, others: Sequence[str] = ()
) -> tuple[list[str], list[str], list[str]]:
    """The lines after the findings (events, other jobs, notes) within a third of the budget, so that they
    never crowd out the findings, and the events and notes they show (for the structured answer)."""
    # The notes say what could not be read or checked (why an answer is UNKNOWN): they get the footer's
    # bytes first, and the events and other jobs what is left; shown in reading order all the same.
    said = fit_lines([f"Note: {n}" for n in notes], budget // 3)
    left = budget // 3 - (len("\n".join(said).encode()) + 1 if said else 0)
    before = [
        *(["Events (newest first):", *(f"  {e}" for e in events)] if events else []),
        *others,
    ]
    before = fit_lines(before, left)
    if before == ["Events (newest first):"]:
        before = []
    footer = [*before, *said]
    kept = set(footer)
    return footer, [e for e in events if f"  {e}" in kept], [n for n in notes if f"Note: {n}" in kept]


Report = TypeVar("Report", models.JobDiagnosis, models.ClusterHealth)


def within_whole(build: Callable[[int], tuple[Report, str]], max_bytes: int) -> tuple[Report, str]:
    """The answer whose text is within ``max_bytes`` and whose text and structured content together are
    within ``DIAGNOSIS_WHOLE_SHARE`` of it (8,000 bytes at the default 6,000), as sent (see _whole_bytes).

    The text is what most clients show the model, so it keeps its budget: the structured content, which
    repeats the findings the text shows, gives up the ends of its longest quotes first, then whole quotes from
    the lowest-ranked finding up, then their next steps and references; only when that is not enough does the text give up the rest, down to
    the smallest budget a tool accepts.
    """
    whole = int(max_bytes * DIAGNOSIS_WHOLE_SHARE)
    budget = max_bytes
    while True:
        model, text = build(budget)
        over = _whole_bytes(model, text) - whole
        if over > 0:
            model = model.model_copy(update={"findings": _without_quotes(model.findings, over)})
            over = _whole_bytes(model, text) - whole
        if over <= 0 or budget <= DIAGNOSIS_BYTES.low:
            return model, text
        budget = max(DIAGNOSIS_BYTES.low, budget - over)


def _without_quotes(shown: Sequence[models.Finding], over: int) -> list[models.Finding]:
    """The findings with shorter quotes, every quote cut at the same length (the longest that saves ``over``
    bytes, at least ``MIN_QUOTE_CHARS``); if that is not enough, without their quotes, last finding first, then
    without their next steps and references (the text still has them all)."""
    lines = [line for f in shown for line in f.evidence]
    longest = max(map(len, lines), default=0)
    saved = _quote_saving(lines, MIN_QUOTE_CHARS)
    if saved >= over:
        low, high = MIN_QUOTE_CHARS, longest  # the longest cut that still saves enough
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if _quote_saving(lines, mid) >= over else (low, mid - 1)
        return [f.model_copy(update={"evidence": [truncate_text(e, low) for e in f.evidence]}) for f in shown]
    over -= saved
    findings: list[models.Finding] = [
        x.model_copy(update={"evidence": [truncate_text(e, MIN_QUOTE_CHARS) for e in x.evidence]})
        for x in shown
    ]
    for one in reversed(findings):
        while one.evidence and over > 0:
            over -= json_bytes(one.evidence.pop()) + 1  # and its comma
    for copy in reversed(findings):  # copies: the findings of the text keep theirs
        if over <= 0:
            break
        steps: list[str] = [*copy.next_steps, *copy.refs]
        over -= json_bytes(steps) - 2
        copy.next_steps = []
        copy.refs = []
    return findings


def _quote_saving(lines: Sequence[str], chars: int) -> int:
    return sum(
        json_bytes(line) - json_bytes(truncate_text(line, chars)) for line in lines if len(line) > chars
    )


def _whole_bytes(model: Report, text: str) -> int:
    """The result as a client receives it (shaping.common.sent_bytes)."""
    return sent_bytes(model.model_dump(mode="json", exclude_none=True), text)


# Findings the cluster's events explain (an OOM kill, a node's death, a worker's crash): quoted with them.
EXPLAINED_BY_EVENTS = (
    Kind.OOM,
    Kind.NODE_DIED,
    Kind.WORKER_CRASH,
    Kind.RESTART_LOOP,
    Kind.OWNER_DIED,
    Kind.FAILED,
    Kind.RAISED,
)


def explaining_events(ev: GraphInputs, findings: Sequence[models.Finding]) -> list[str]:
    """Cluster events that explain a finding: OOM kills and node deaths, when the findings are about those."""
    kinds = {f.kind for f in findings}
    if not kinds & set(EXPLAINED_BY_EVENTS):
        return []
    job_id = str((ev.job or {}).get("job_id") or "")
    ids = {job_id} if job_id else set()
    ids |= {str(n.get("node_id")) for n in ev.nodes or [] if n.get("state") == "DEAD"}
    mine = [e for e in ev.events or [] if any(i and i in str(e.get("message") or "") for i in ids)]
    return event_lines(GraphInputs(events=mine), limit=EXPLAINING_EVENTS)


def health_report(dashboard_url: str, ev: GraphInputs, *, max_bytes: int) -> tuple[models.ClusterHealth, str]:
    """cluster_health's answer: the state and verdict, the chains ranked, events, what could not be read."""
    ranked = [*map(to_finding, explain_cluster(ev))]
    return health_answer(dashboard_url, ev, ranked, max_bytes=max_bytes)


def health_answer(
    dashboard_url: str, ev: GraphInputs, ranked: Sequence[models.Finding], *, max_bytes: int
) -> tuple[models.ClusterHealth, str]:
    """The answer over ``ranked`` findings (the cluster's chains, as findings), within ``max_bytes``."""
    unchecked = list(ev.unchecked) or list(dict.fromkeys(u.split(":")[0] for u in ev.unreadable))
    checked = [c for c in CHECKS if c not in unchecked]
    findings = merge_alike(ranked)
    serious = [f for f in findings if f.severity >= PROBLEM]
    unread = [
        *ev.capped,
        *ev.notes,
        *(f"Could not read {u}." for u in ev.unreadable),
        *trends.missing_note(ev),  # what could not be read comes first
        *ev.info,  # last: sources that are optional and not there (no answer is UNKNOWN for them)
    ]
    not_run = f"could not check {', '.join(unchecked)}" if unchecked else ""
    status: Literal["HEALTHY", "PROBLEMS_FOUND", "UNKNOWN"] = (
        "PROBLEMS_FOUND" if serious else "UNKNOWN" if unchecked else "HEALTHY"
    )
    if serious:
        suffix = f" (also {one_line(not_run, HEALTH_UNCHECKED_CHARS)})" if not_run else ""
        verdict = (
            fit_bytes(
                f"{len(serious)} problem(s); the most severe: {serious[0].title}",
                VERDICT_BYTES - len(suffix.encode()),
            )
            + suffix
        )
    elif unchecked:
        found = f"nothing wrong found in {', '.join(checked)}" if checked else "nothing could be read"
        verdict = f"Unknown: {not_run}; {found}. Not a sign of health: see the notes for why."
    else:
        verdict = "Healthy: nothing wrong found in " + ", ".join(checked) + "."
    events = event_lines(ev, limit=HEALTH_EVENTS)
    state = {"PROBLEMS_FOUND": "PROBLEMS FOUND"}.get(status, status)
    header = [f"Cluster {dashboard_url}: {state}", f"Verdict: {verdict}", ""]

    def build(budget: int) -> tuple[models.ClusterHealth, str]:
        footer, shown_events, shown_notes = fit_footer(events, unread[:NOTES_SHOWN], budget)
        text, shown = render_shown(header, findings, budget - len("\n".join(footer).encode()) - 1)
        model = models.ClusterHealth(
            healthy=status == "HEALTHY",
            status=status,
            verdict=verdict,
            dashboard_url=dashboard_url,
            findings=shown,
            checked=checked,
            notes=shown_notes,
            events=shown_events,
            unchecked=unchecked,
        )
        return model, "\n".join([text, *footer]) if footer else text

    return within_whole(build, max_bytes)
