"""The table of docs/diagnosis.md: each recorded failure class, the evidence its top chain used, answer bytes and
the byte offset of the verdict, measured over tests/recorded/ (``python -m eval.causal_table``; the test
tests/test_diagnosis_table.py checks that the doc shows exactly these rows)."""

from __future__ import annotations

import json

from tests.causal_support import RECORDED, replay

from ray_mcp.diagnosis import explain as chains
from ray_mcp.diagnosis import report
from ray_mcp.diagnosis.graph import GraphInputs

HEADER = [
    "| class (recording) | chain (link kinds) | evidence used | answer bytes | verdict offset | verdict bytes |",
    "|---|---|---|---|---|---|",
]
SOURCES = (
    "tasks",
    "actors",
    "nodes",
    "pgs",
    "workers",
    "events",
    "driver_lines",
    "status",
    "serve",
    "supervisor",
    "stacks",
    "datasets",
)


def used(ev: GraphInputs) -> str:
    names = {k for k in SOURCES if getattr(ev, k)}
    names |= {"worker stderr"} if ev.worker_logs else set()
    names |= {"holders"} if ev.alive_actors else set()
    return ", ".join(sorted(names))


def rows() -> list[str]:
    out = list(HEADER)
    for path in sorted(RECORDED.glob("*.json")):
        if "exchanges" in json.loads(path.read_text()):
            continue  # an HTTP recording (tests/replay.py): replayed through the server, not tabled here
        ev = replay(path.stem)
        if ev.job is not None:
            model, text = report.job_report("recorded", ev, max_bytes=6000)
            found = chains.explain_job(ev)[1]
            verdict = model.verdict
        else:
            health, text = report.health_report("http://recorded:8265", ev, max_bytes=6000)
            found = chains.explain_cluster(ev)
            verdict = f"Verdict: {health.verdict}"
        top = found[0] if found else None
        kinds = " → ".join(link.kind for link in top.links) if top else "-"
        offset = text.encode().find(verdict.encode())
        out.append(
            f"| {top.kind if top else '-'} ({path.stem}) | {kinds} | {used(ev)} | {len(text.encode())} | "
            f"{offset} | {len(verdict.encode())} |"
        )
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
