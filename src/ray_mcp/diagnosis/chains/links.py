"""A chain and its links: the symptom, each edge followed (ended_by, raised_in, owns, waits_on, holds,
created_by) with Ray's own words quoted, and the severity that ranks it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ray_mcp.diagnosis.graph import one_line
from ray_mcp.limits import QUOTE_CHARS

# Severity, the one scale of every rule: higher ranks first. ROOT: the cause of a failure; STUCK: work that
# cannot go on; LOOP: a crash loop; PROBLEM and above: cluster_health counts it as a problem; CONTEXT: ranked
# after the status of a job that ended well; WARNING: retried and recovered; INFO: not a fault.
ROOT = 100
STUCK = 90
LOOP = 85
CONTEXT = 50
PROBLEM = 40
WARNING = 30
INFO = 10


@dataclass
class Link:
    kind: str  # waits_on | holds | owns | created_by | ended_by | raised_in
    text: str
    quote: str = ""


@dataclass
class Chain:
    severity: int
    kind: str
    symptom: str
    links: list[Link]
    next_steps: list[str] = field(default_factory=list)
    job_id: str | None = None
    subjects: set[str] = field(default_factory=set)  # entity keys this chain explains
    details: list[str] = field(default_factory=list)  # evidence beyond the links (settings, counts, stacks)

    @property
    def cause(self) -> str:
        """The last link; after an ownership link, both (the owner, and why it ended)."""
        if not self.links:
            return ""
        last = self.links[-1].text
        if len(self.links) >= 2 and self.links[-2].kind == "owns":
            owner = self.links[-2].text
            subject = re.match(r"(actor|task) \S+(?: '[^']*')? \([0-9a-f]+\)", last)
            if subject and subject.group(0) in owner:
                rest = last[len(subject.group(0)) :]
                last = ("its" + rest[2:]) if rest.startswith("'s") else "it" + rest
            return f"{owner}; {last}"
        if (
            len(self.links) >= 2
            and self.links[-2].text.endswith("died with its node")
            and " died at " in last
        ):
            return f"{self.links[-2].text}: {last}"  # what the node took down, and the node's death
        return last

    @property
    def verdict(self) -> str:
        """The symptom and the last link; a one-link chain is its own symptom."""
        if (
            len(self.links) == 1
            and self.symptom
            and not self.symptom.startswith(("Stuck", "The driver", "No progress"))
        ):
            return self.cause
        if self.symptom and self.cause.startswith(" ".join(self.symptom.split()[:2]) + " "):
            return self.cause  # the cause already names the symptom's subject
        return f"{self.symptom}: {self.cause}" if self.cause and self.symptom else self.symptom or self.cause

    def evidence(self) -> list[str]:
        out = []
        for link in self.links:
            if len(self.links) > 1:
                out.append(f"[{link.kind}] {link.text}")
            if link.quote:
                out.append(
                    f'{"  " if len(self.links) > 1 else "[" + link.kind + "] "}"{one_line(link.quote, QUOTE_CHARS)}"'
                )
        return [*out, *self.details]
