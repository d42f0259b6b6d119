"""The answers of diagnose_job and cluster_health: verdict first, findings within a byte budget."""

from __future__ import annotations

from ray_mcp import models
from ray_mcp.diagnosis.findings import render_findings
from ray_mcp.limits import NOTES_SHOWN


def _fit_findings(
    header: list[str], findings: list[models.Finding], max_bytes: int
) -> tuple[str, list[models.Finding]]:
    """Render the findings that fit in ``max_bytes`` of text; the structured answer carries the same ones."""
    text = render_findings(header, findings, max_bytes)
    shown = [f for i, f in enumerate(findings, 1) if f"\n{i}. {f.title}" in "\n" + text]
    return text, shown


def job_diagnosis(
    job: str,
    info: models.JobInfo,
    findings: list[models.Finding],
    notes: list[str],
    *,
    max_bytes: int,
    unchecked: list[str] | None = None,
) -> tuple[models.JobDiagnosis, str]:
    unchecked = list(unchecked or [])
    if findings:
        verdict = findings[0].title + (f" (could not check {', '.join(unchecked)})" if unchecked else "")
    elif unchecked:  # nothing found, but not everything could be looked at: that is not a clean bill
        verdict = f"Unknown: no cause found in what could be read; could not check {', '.join(unchecked)}."
    else:
        verdict = "No finding."
    header = [
        f"Job {info.submission_id or job} ({info.job_id or 'no job id yet'}): {info.status}"
        + (f", error_type {info.error_type}" if info.error_type else "")
        + (f", driver exit code {info.driver_exit_code}" if info.driver_exit_code is not None else ""),
        f"Verdict: {verdict}",
        "",
    ]
    footer = [f"Note: {n}" for n in notes[:NOTES_SHOWN]]
    text, shown = _fit_findings(header, findings, max_bytes - len("\n".join(footer).encode()) - 1)
    model = models.JobDiagnosis(
        job=job, submission_id=info.submission_id, job_id=info.job_id, status=info.status,
        error_type=info.error_type, driver_exit_code=info.driver_exit_code, verdict=verdict,
        findings=shown, notes=notes[:NOTES_SHOWN], unchecked=unchecked,
    )  # fmt: skip
    return model, "\n".join([text, *footer]) if footer else text


def cluster_health(
    dashboard_url: str,
    findings: list[models.Finding],
    checked: list[str],
    notes: list[str],
    *,
    max_bytes: int,
    unchecked: list[str] | None = None,
) -> tuple[models.ClusterHealth, str]:
    """HEALTHY only when every check ran and found nothing serious; UNKNOWN when nothing serious was found
    but some check could not run (a dashboard down, an endpoint answering 500); else PROBLEMS FOUND."""
    unchecked = list(unchecked or [])
    serious = [f for f in findings if f.severity >= 40]
    not_run = f"could not check {', '.join(unchecked)}" if unchecked else ""
    if serious:
        state = "PROBLEMS FOUND"
        verdict = f"{len(serious)} problem(s); the most severe: {serious[0].title}" + (
            f" (also {not_run})" if not_run else ""
        )
    elif unchecked:
        state = "UNKNOWN"
        found = f"nothing wrong found in {', '.join(checked)}" if checked else "nothing could be read"
        verdict = f"Unknown: {not_run}; {found}. Not a sign of health: see the notes for why."
    else:
        state = "HEALTHY"
        verdict = "Healthy: nothing wrong found in " + ", ".join(checked) + "."
    healthy = state == "HEALTHY"
    header = [
        f"Cluster {dashboard_url}: {state}",
        f"Verdict: {verdict}",
        "",
    ]
    footer = [f"Note: {n}" for n in notes[:NOTES_SHOWN]]
    text, shown = _fit_findings(header, findings, max_bytes - len("\n".join(footer).encode()) - 1)
    model = models.ClusterHealth(
        healthy=healthy,
        verdict=verdict,
        dashboard_url=dashboard_url,
        findings=shown,
        checked=checked,
        unchecked=unchecked,
        status="PROBLEMS_FOUND" if serious else "UNKNOWN" if unchecked else "HEALTHY",
        notes=notes[:NOTES_SHOWN],
    )
    return model, "\n".join([text, *footer]) if footer else text
