"""The findings as text: alike ones merged, each with its evidence, within a byte budget (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp import models
from ray_mcp.limits import ALIKE_SHOWN, EVIDENCE_ITEMS
from ray_mcp.text import fit_bytes, single_line

# What differs between findings of the same failure in several places: numbers (pids, ranks, shards, IPs) and ids.
_VARYING = re.compile(r"[0-9a-f]{16,}|\d+")


def merge_alike(findings: Sequence[models.Finding]) -> list[models.Finding]:
    """Findings of one kind whose titles differ only in numbers and ids (the same error raised by several
    tasks or workers) as one: the first, which says how many more there are and quotes their titles."""
    groups: dict[tuple[str, str], list[models.Finding]] = {}
    for f in findings:  # by the engine's facts; a finding of another layer, by its title
        groups.setdefault((f.kind, f._alike or _VARYING.sub("#", f.title)), []).append(f)
    merged = []
    for first, *rest in groups.values():
        if rest:
            also = [f"also: {r.title}" for r in rest[:ALIKE_SHOWN]]
            first = first.model_copy(
                update={
                    "title": f"{first.title} (and {len(rest)} more like it)",
                    "severity": max(f.severity for f in (first, *rest)),
                    "evidence": [*first.evidence[: EVIDENCE_ITEMS - len(also)], *also],
                }
            )
        merged.append(first)
    return sorted(merged, key=lambda f: -f.severity)


def render_findings(header: list[str], findings: Sequence[models.Finding], max_bytes: int) -> str:
    """Text for the agent: the verdict first, then each finding with its evidence, within a byte budget."""
    return render_shown(header, findings, max_bytes)[0]


def render_shown(
    header: list[str], findings: Sequence[models.Finding], max_bytes: int
) -> tuple[str, list[models.Finding]]:
    """The text of ``render_findings`` and the findings as it shows them (for the structured answer).

    Never over ``max_bytes`` (unless the header alone is): room is kept for the line that says how many
    findings were left out, and a first finding too long for the budget loses evidence lines from its end.
    """
    out = list(header)
    shown: list[models.Finding] = []
    for i, f in enumerate(findings, 1):
        block = _block(i, f)
        after = len(findings) - i
        room = max_bytes - (len(_left_out(after, max_bytes).encode()) + 1 if after else 0)
        if _size([*out, *block]) > room:
            if i > 1:
                out.append(_left_out(after + 1, max_bytes))
                break
            evidence = list(f.evidence)
            while evidence and _size([*out, *block]) > room:
                evidence.pop()  # the last quote first; the title and next steps stay
                block = _block(i, f, evidence)
            f = f.model_copy(update={"evidence": evidence})
            if _size([*out, *block]) > room:  # then the next steps and references, then the title's end
                block = [
                    fit_bytes(f"{i}. {single_line(f.title)}", room - _size(out) - 1)
                ]  # as _block puts it
                title = block[0].removeprefix(f"{i}. ")
                f = f.model_copy(update={"title": title, "evidence": [], "next_steps": [], "refs": []})
        out += block
        shown.append(f)
    return "\n".join(out), shown


def fit_lines(lines: list[str], max_bytes: int) -> list[str]:
    """``lines`` without their last ones, as many as needed to join within ``max_bytes``."""
    kept = list(lines)
    while kept and _size(kept) > max_bytes:
        kept.pop()
    return kept


def _block(i: int, f: models.Finding, evidence: Sequence[str] | None = None) -> list[str]:
    # Titles and quotes hold the cluster's text: each stays on its line, so none can pose as a line of ours.
    block = [f"{i}. {single_line(f.title)}"]
    block += [f"   > {single_line(line)}" for line in (f.evidence if evidence is None else evidence)]
    if f.next_steps:
        block.append("   Next: " + " | ".join(f.next_steps))
    if f.refs:
        block.append("   See: " + ", ".join(f.refs))
    return block


def _left_out(n: int, max_bytes: int) -> str:
    return f"… {n} lower-ranked finding(s) left out to stay under {max_bytes} bytes."


def _size(lines: list[str]) -> int:
    return len("\n".join(lines).encode())
