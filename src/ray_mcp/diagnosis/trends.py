"""Trends recognised (pure): the series summaries diagnosis/history.py read from Prometheus, turned into the
facts rules/trends.py states. Each recogniser reads the summary Prometheus's own figures gave (the trend the
summary names, its slope, its change point: shaping/metrics.classify) and keeps the figures the finding quotes.

A leak: memory rising on a straight line (the line explains the series, not a step), at least
LEAK_MIN_BYTES_PER_S, grown by LEAK_MIN_GROWTH_BYTES, over at least TREND_MIN_SPAN_S. A collapse: tasks finished
per minute stepped down to at most THROUGHPUT_COLLAPSE of what it was. A Serve regression: p99 stepped up by
LATENCY_RISE (and LATENCY_RISE_MIN_MS), or errors per second stepped up from (near) none. A filling store: its
use rising steadily by STORE_RISING_MIN_PCT points; spilling more and more: spilled bytes per second rising or
stepped up. Idle: the job's workers used under IDLE_SHARE of the CPUs it holds, on average over the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ray_mcp.diagnosis.graph import GraphInputs, num
from ray_mcp.limits import (
    IDLE_SHARE,
    LATENCY_RISE,
    LATENCY_RISE_MIN_MS,
    LEAK_MIN_BYTES_PER_S,
    LEAK_MIN_GROWTH_BYTES,
    MEMORY_USAGE_THRESHOLD,
    STORE_RISING_MIN_PCT,
    THROUGHPUT_COLLAPSE,
    THROUGHPUT_MIN_PER_MIN,
    TREND_MIN_SPAN_S,
)

Series = dict[str, Any]  # a models.SeriesSummary as JSON
HOW = "docs/metrics.md says how to give ray-mcp one (--prometheus)"


@dataclass(frozen=True)
class Reading:
    """The trend record of one diagnosis, read."""

    start: float
    end: float
    step_s: float
    threshold: float
    threshold_source: str
    panels: dict[str, list[dict[str, Any]]]

    def series(self, question: str, title: str) -> list[Series]:
        for panel in self.panels.get(question) or []:
            if panel.get("title") == title:
                return list(panel.get("series") or [])
        return []

    def promql(self, question: str, title: str) -> str:
        panel = next((p for p in self.panels.get(question) or [] if p.get("title") == title), {})
        return str(panel.get("promql") or "")

    def span_of(self, s: Series) -> float:
        """How much of the window the series covers (its points, one per step)."""
        return max(0, int(s.get("points") or 0) - 1 + int(s.get("gaps") or 0)) * self.step_s


def reading(ev: GraphInputs) -> Reading | None:
    """The trends read for this diagnosis; None when there are none (no Prometheus, not read, not RUNNING)."""
    t = ev.trends or {}
    if "panels" not in t:
        return None
    window = t.get("window") or {}
    threshold = t.get("threshold") or {}
    return Reading(
        num(window.get("start")),
        num(window.get("end")),
        num(window.get("step_s")) or 1.0,
        num(threshold.get("fraction")) or MEMORY_USAGE_THRESHOLD,
        str(threshold.get("source") or "Ray's default"),
        dict(t.get("panels") or {}),
    )


def epoch(iso: str | None) -> float:
    if not iso:
        return 0.0
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Leak:
    name: str  # the series' name: "ip:port/ray::Leaker" (a worker) or "ip:port" (a node)
    instance: str
    component: str  # "" for a node
    rate_per_s: float
    first: float
    last: float
    span_s: float
    node_share: float | None  # the node's memory use now (a fraction), when known
    left_s: float | None  # until the node reaches the threshold at this rate; 0: past it
    spark: str


def leaks(r: Reading, question: str, title: str) -> list[Leak]:
    """Series of ``question``'s ``title`` panel that grow steadily (worker_memory or node_memory)."""
    shares = {
        s.get("labels", {}).get("instance", ""): num(s.get("last")) / 100
        for s in r.series("node_memory", "Memory use")
    }
    used = {
        s.get("labels", {}).get("instance", ""): num(s.get("last"))
        for s in r.series("node_memory", "Memory used")
    }
    out = []
    for s in r.series(question, title):
        rate = num(s.get("slope_per_s"))
        grown = num(s.get("last")) - num(s.get("first"))
        if s.get("trend") != "rising" or rate < LEAK_MIN_BYTES_PER_S or grown < LEAK_MIN_GROWTH_BYTES:
            continue
        if r.span_of(s) < TREND_MIN_SPAN_S or s.get("ended_at"):
            continue  # too short to judge, or gone (its process ended: what it held was freed)
        labels = s.get("labels") or {}
        instance = str(labels.get("instance") or s.get("name") or "")
        share = shares.get(instance)
        left = None
        if share and instance in used:
            total = used[instance] / share
            left = max(0.0, (r.threshold * total - used[instance]) / rate)
        out.append(
            Leak(
                str(s.get("name") or ""),
                instance,
                str(labels.get("Component") or ""),
                rate,
                num(s.get("first")),
                num(s.get("last")),
                r.span_of(s),
                share,
                left,
                str(s.get("spark") or ""),
            )
        )
    return sorted(out, key=lambda leak: -leak.rate_per_s)


@dataclass(frozen=True)
class Collapse:
    before: float  # tasks finished per minute before the step
    after: float
    at: float  # when it stepped down (epoch seconds)
    last: float


def collapse(r: Reading) -> Collapse | None:
    """Tasks finished per minute stepped down to a small share of what it was."""
    for s in r.series("tasks", "Tasks ended per minute"):
        if (s.get("labels") or {}).get("State") != "FINISHED" or s.get("trend") != "stepped_down":
            continue
        change = s.get("change") or {}
        before, after = num(change.get("before")), num(change.get("after"))
        if before >= THROUGHPUT_MIN_PER_MIN and after <= THROUGHPUT_COLLAPSE * before:
            return Collapse(before, after, epoch(change.get("at")), num(s.get("last")))
    return None


@dataclass(frozen=True)
class Rise:
    app: str
    deployment: str
    what: str  # "p99 latency" or "errors"
    before: float
    after: float
    at: float


def serve_rises(r: Reading) -> list[Rise]:
    """Serve deployments whose p99 latency stepped up, or whose errors per second stepped up from (near) none."""
    out = []
    for title, what in (("p99 latency", "p99 latency"), ("Errors", "errors")):
        for s in r.series("serve", title):
            change = s.get("change") or {}
            before, after = num(change.get("before")), num(change.get("after"))
            if s.get("trend") != "stepped_up" or s.get("ended_at"):
                continue
            if what == "p99 latency" and (
                after < LATENCY_RISE * before or after - before < LATENCY_RISE_MIN_MS
            ):
                continue
            if what == "errors" and (after <= 0 or before > after / LATENCY_RISE):
                continue
            labels = s.get("labels") or {}
            out.append(
                Rise(
                    str(labels.get("application") or ""),
                    str(labels.get("deployment") or ""),
                    what,
                    before,
                    after,
                    epoch(change.get("at")),
                )
            )
    return out


@dataclass(frozen=True)
class Filling:
    instance: str
    what: str  # "use" (percent of the store) or "spilled" (bytes per second)
    first: float
    last: float
    rate_per_s: float
    left_s: float | None  # until full at this rate ("use" only)


def store_filling(r: Reading) -> list[Filling]:
    """Object stores filling steadily, and spilling more and more."""
    out = []
    for s in r.series("object_store", "Object store use"):
        first, last, rate = num(s.get("first")), num(s.get("last")), num(s.get("slope_per_s"))
        if s.get("trend") == "rising" and last - first >= STORE_RISING_MIN_PCT and rate > 0:
            instance = str((s.get("labels") or {}).get("instance") or s.get("name") or "")
            out.append(Filling(instance, "use", first, last, rate, max(0.0, (100 - last) / rate)))
    for s in r.series("object_store", "Spilled and restored"):
        labels = s.get("labels") or {}
        if labels.get("State") != "Spilled" or s.get("trend") not in ("rising", "stepped_up"):
            continue
        if num(s.get("last")) <= 0:
            continue
        out.append(
            Filling(
                str(labels.get("instance") or ""),
                "spilled",
                num(s.get("first")),
                num(s.get("last")),
                num(s.get("slope_per_s")),
                None,
            )
        )
    return out


@dataclass(frozen=True)
class Idle:
    cpus: float  # the CPUs the job holds now
    mean_pct: float  # its workers' CPU use, summed, on average over the window (100 = one core)
    peak_pct: float  # at most (the sum of each worker's highest: an upper bound)
    span_s: float


def idle(r: Reading, cpus: float) -> Idle | None:
    """The job's workers use under IDLE_SHARE of the CPUs it holds, on average over the window."""
    series = [s for s in r.series("worker_cpu", "Worker CPU") if r.span_of(s) >= TREND_MIN_SPAN_S]
    if cpus < 1 or not series:
        return None
    mean = sum(num(s.get("mean")) for s in series)
    if mean >= IDLE_SHARE * cpus * 100:
        return None
    return Idle(cpus, mean, sum(num(s.get("max")) for s in series), max(r.span_of(s) for s in series))


def held(ev: GraphInputs, resource: str) -> tuple[float, set[str]]:
    """How much of ``resource`` the job's alive actors and running tasks hold now, and the IPs of their nodes."""
    ips = {str(n.get("node_id")): str(n.get("node_ip")) for n in ev.nodes or []}
    amount, nodes = 0.0, set()
    rows = [a for a in ev.actors or [] if a.get("state") == "ALIVE"]
    rows += [t for t in ev.tasks or [] if t.get("state") == "RUNNING" and not t.get("actor_id")]
    for row in rows:
        value = num((row.get("required_resources") or {}).get(resource))
        if value > 0:
            amount += value
            nodes.add(ips.get(str(row.get("node_id")), ""))
    return amount, nodes - {""}


@dataclass(frozen=True)
class IdleGpus:
    gpus: float  # the GPUs the job holds now
    mean_pct: float  # the use of the GPUs on the nodes where it holds them, on average over the window
    peak_pct: float


def idle_gpus(r: Reading, gpus: float, ips: set[str]) -> IdleGpus | None:
    """The GPUs of the nodes where the job holds GPUs were busy under IDLE_SHARE, on average over the window."""
    series = [
        s
        for s in r.series("node_gpu", "GPU use")
        if str((s.get("labels") or {}).get("instance") or "").rsplit(":", 1)[0].strip("[]") in ips
        and r.span_of(s) >= TREND_MIN_SPAN_S
    ]
    if gpus <= 0 or not series:
        return None
    mean = sum(num(s.get("mean")) for s in series) / len(series)
    if mean >= IDLE_SHARE * 100:
        return None
    return IdleGpus(gpus, mean, max(num(s.get("max")) for s in series))


def missing_note(ev: GraphInputs) -> list[str]:
    """The note that history was not available, and why (the answer puts it after what could not be read)."""
    missing = (ev.trends or {}).get("missing")
    if not missing:
        return []
    return [
        f"History not available: {missing}, so trends (memory growth, throughput, Serve latency, idle "
        f"resources) were not read; {HOW}."
    ]
