"""The cluster events worth an agent's attention, one line each (the answer's events section)."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.diagnosis.recognise import memory_summary
from ray_mcp.limits import EVENT_CHARS, OOM_DETAIL_CHARS
from ray_mcp.text import one_line, single_line

EVENT_KINDS = (
    ("oom", re.compile(r"running low on memory|killed due to memory pressure", re.I)),
    (
        "node",
        re.compile(r"node .*(dead|removed|added|died|failed)|health check|Adding node|Removing node", re.I),
    ),
    ("autoscaler", re.compile(r"autoscal|Resized|launch|terminat|upscal|downscal", re.I)),
    ("worker", re.compile(r"worker died|Worker exit", re.I)),
)


def event_lines(ev: GraphInputs, limit: int) -> list[str]:
    """Cluster events worth an agent's attention, the most recent first, one line each."""
    out = []
    for e in reversed(ev.events or []):
        msg = str(e.get("message") or "")
        kind = next((k for k, p in EVENT_KINDS if p.search(msg)), None)
        if kind is None and e.get("severity") not in ("ERROR", "FATAL", "WARNING"):
            continue
        first = msg.strip().splitlines()[0] if msg.strip() else ""
        if kind == "oom":
            first = f"OOM kill: {memory_summary(msg)}; " + one_line(
                " ".join(re.findall(r"Selected to kill: \(([^)]*)\)?", msg))[:1], OOM_DETAIL_CHARS
            )
        out.append(
            single_line(f"{e.get('time') or '?'} {e.get('severity') or ''} {e.get('source_type') or ''}: ")
            + one_line(first, EVENT_CHARS)
        )
        if len(out) >= limit:
            break
    return out
