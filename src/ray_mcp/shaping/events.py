"""Cluster events (pure): filtered, newest first, one entry per message with how often it was recorded."""

from __future__ import annotations

import datetime
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray_mcp import models
from ray_mcp.limits import EVENT_MESSAGE_CHARS
from ray_mcp.shaping.common import to_number
from ray_mcp.text import truncate_text

# Ray's severities, least severe first: a severity filter keeps that one and the worse ones.
SEVERITIES = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "FATAL")
# What makes two messages the same one: they differ only in ids, pids, counts and times.
_VARYING = re.compile(r"\b[0-9a-fA-F]{8,}\b|\d+(\.\d+)?")


@dataclass(frozen=True)
class EventFilter:
    severity: str | None = None
    source: str | None = None
    node_id: str | None = None
    job_id: str | None = None
    submission_id: str | None = None
    since: float | None = None  # a UNIX time

    def keeps(self, e: Mapping[str, Any]) -> bool:
        fields = e.get("custom_fields") or {}
        if self.severity and _rank(e.get("severity")) < _rank(self.severity):
            return False
        if self.source and str(e.get("source_type") or "").upper() != self.source:
            return False
        if self.since is not None and _ts(e) < self.since:
            return False
        if (
            self.node_id
            and self.node_id not in (fields.get("node_id"), fields.get("nodeId"))
            and (self.node_id not in str(e.get("message") or ""))
        ):
            return False
        if self.job_id or self.submission_id:
            ids = {
                fields.get("job_id"),
                fields.get("jobId"),
                fields.get("submission_id"),
                fields.get("submissionId"),
            }
            text = str(e.get("message") or "")
            if not (
                (self.job_id and self.job_id in ids)
                or (self.submission_id and (self.submission_id in ids or self.submission_id in text))
            ):
                return False
        return True


def _rank(severity: Any) -> int:
    s = str(severity or "INFO").upper()
    return SEVERITIES.index(s) if s in SEVERITIES else SEVERITIES.index("INFO")


def _ts(e: Mapping[str, Any]) -> float:
    """The event's UNIX time: its timestamp, or (the State API keeps only this) its local time string."""
    ts = to_number(e.get("timestamp"))
    if isinstance(ts, int | float) and ts:
        return float(ts)
    try:
        return datetime.datetime.fromisoformat(str(e.get("time"))).timestamp()
    except ValueError:
        return 0.0


def _clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"


def build_event_list(
    rows: Sequence[Mapping[str, Any]], wanted: EventFilter, *, limit: int, notes: list[str]
) -> models.EventList:
    matching = sorted((e for e in rows if wanted.keeps(e)), key=_ts, reverse=True)
    grouped: dict[tuple[str, str, str], models.ClusterEvent] = {}
    for e in matching:  # newest first: the first of a message is its newest
        message = " ".join(str(e.get("message") or "").split())
        key = (str(e.get("severity")), str(e.get("source_type")), _VARYING.sub("#", message))
        seen = grouped.get(key)
        times = max(int(to_number(e.get("count")) or 1), 1)  # a Kubernetes event counts its repeats
        if seen is not None:
            seen.count += times
            seen.first_time = _clock(_ts(e))
            continue
        fields = e.get("custom_fields") or {}
        grouped[key] = models.ClusterEvent(
            time=_clock(_ts(e)),
            severity=str(e.get("severity") or "INFO"),
            source=str(e.get("source_type") or "?"),
            message=truncate_text(message, EVENT_MESSAGE_CHARS),
            count=times,
            node=fields.get("node_id") or fields.get("nodeId") or e.get("source_hostname") or None,
            job_id=fields.get("job_id") or fields.get("jobId") or None,
            label=e.get("label") or None,
        )
    distinct = list(grouped.values())
    shown = distinct[:limit]
    out = models.EventList(
        total=len(rows),
        matched=len(matching),
        shown=len(shown),
        events=shown,
        notes=notes,
    )
    if len(distinct) > limit:
        out.hints.append(
            f"{len(distinct) - limit} older distinct messages not shown: pass a larger limit, or narrow with "
            "severity, source, node, job or since_s."
        )
    if not matching and rows:
        out.hints.append(f"No event of the {len(rows)} kept matches: widen the filters.")
    return out


def render_event_list(ev: models.EventList) -> str:
    sev = Counter(e.severity for e in ev.events)
    worst = ", ".join(f"{k} {v}" for k, v in sorted(sev.items(), key=lambda kv: -_rank(kv[0])))
    lines = [
        f"{ev.matched} of {ev.total} cluster events match; {ev.shown} distinct message(s) shown"
        + (f" ({worst})" if worst else "")
        + ", newest first:"
    ]
    for e in ev.events:
        times = f" x{e.count}" + (f" since {e.first_time}" if e.first_time else "") if e.count > 1 else ""
        where = "".join(f" {k}={v}" for k, v in (("node", e.node), ("job", e.job_id)) if v)
        lines.append(f"  {e.time} {e.severity} {e.source}{where}{times}: {e.message}")
    lines += [f"Note: {n}" for n in ev.notes] + [f"Hint: {h}" for h in ev.hints]
    return "\n".join(lines)


# The autoscaler's words for a launch that failed (v1's node launcher, v2's node provider) and for a shape no
# node type can hold (both autoscalers; Ray logs the latter at INFO with "Error:" in the message).
AUTOSCALER_FAILED = re.compile(r"Failed to launch", re.I)
AUTOSCALER_INFEASIBLE = re.compile(r"No available node types can fulfill", re.I)


def autoscaler_decisions(rows: Sequence[Mapping[str, Any]], limit: int) -> list[str]:
    """The autoscaler's events (launches, removals, failures), distinct messages newest first, one line each:
    what cluster_status shows and cluster_health reasons over."""
    events = build_event_list(rows, EventFilter(source="AUTOSCALER"), limit=limit, notes=[])
    return [
        f"{e.time} {e.severity}: {e.message}" + (f" (x{e.count})" if e.count > 1 else "")
        for e in events.events
    ]
