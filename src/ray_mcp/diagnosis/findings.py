"""Findings and the verdict: severities, one finding, the ranking, and the text within a byte budget."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ray_mcp import models
from ray_mcp.limits import EVIDENCE_ITEMS, NEXT_STEPS

# Severities: higher is more likely the root cause (diagnose_job) or more urgent (cluster_health).
ROOT_CAUSE = 100
STUCK = 90
CONTRIBUTING = 60
SYMPTOM = 40
INFO = 10


def finding(
    severity: int,
    title: str,
    evidence: Iterable[str] = (),
    next_steps: Iterable[str] = (),
    refs: Iterable[str] = (),
    kind: str = "",
) -> models.Finding:
    return models.Finding(
        severity=severity,
        kind=kind,
        title=title,
        evidence=[e for e in evidence if e][:EVIDENCE_ITEMS],
        next_steps=list(next_steps)[:NEXT_STEPS],
        refs=list(refs)[:NEXT_STEPS],
    )


def rank(findings: Iterable[models.Finding]) -> list[models.Finding]:
    return sorted(findings, key=lambda f: -f.severity)


def render_findings(header: list[str], findings: Sequence[models.Finding], max_bytes: int) -> str:
    """Text for the agent: the verdict first, then each finding with its evidence, within a byte budget."""
    out = list(header)
    for i, f in enumerate(findings, 1):
        block = [f"{i}. {f.title}"]
        block += [f"   > {line}" for line in f.evidence]
        if f.next_steps:
            block.append("   Next: " + " | ".join(f.next_steps))
        if f.refs:
            block.append("   See: " + ", ".join(f.refs))
        candidate = "\n".join([*out, *block])
        if len(candidate.encode()) > max_bytes and i > 1:
            out.append(
                f"… {len(findings) - i + 1} lower-ranked finding(s) left out to stay under {max_bytes} bytes."
            )
            break
        out += block
    return "\n".join(out)


RUNTIME_ENV_DOC = "ray-docs://reference/11-runtime-environment"
JOBS_DOC = "ray-docs://reference/12-job-submission"
FT_DOC = "ray-docs://reference/14-fault-tolerance"
PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"
SERVE_DOC = "ray-docs://reference/06-ray-serve"
OBS_DOC = "ray-docs://reference/13-dashboard-observability"
