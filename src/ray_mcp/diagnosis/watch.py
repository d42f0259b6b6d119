"""One round of a watch of the cluster's health: cluster_health's evidence and chains, read once, as problems
keyed so that the same problem keeps its key from one round to the next; and the firing alerts of the cluster's
Prometheus when one is known. The diff between rounds is pure (shaping/health_watch.py)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from ray_mcp.diagnosis import evidence
from ray_mcp.diagnosis.evidence import CHECKS
from ray_mcp.diagnosis.explain import explain_cluster
from ray_mcp.diagnosis.facts import PROBLEM, STUCK, Chain, Kind
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.diagnosis.report import health_answer, to_finding
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import ALERTS_READ, DIAGNOSIS_BYTES, FINDING_TITLE_CHARS
from ray_mcp.shaping.health_watch import Problem, Round, keyed
from ray_mcp.sources.prometheus import Alert
from ray_mcp.text import one_line, quoted

if TYPE_CHECKING:
    from ray_mcp.answers import RayAPI


class Source(StrEnum):
    """Where a watch's problem was read: what decides whether its absence clears it."""

    CLUSTER = "cluster"  # cluster_health's findings
    ALERTS = "alerts"  # the Prometheus's firing alerts
    REACH = "reach"  # whether the cluster answers at all


class WatchKind(StrEnum):
    """The kinds of a watch's problems that are not the engine's (facts.Kind names the rest)."""

    ALERT = "alert"  # a firing Prometheus alert
    UNREACHABLE = "unreachable"  # no check could run


# The entity a chain is about, in this order of preference: what keeps its key while the chain learns more (the
# actors a dead node took down are found over several rounds; the node stays the node).
PRIMARY = ("node:", "serve:", "memory:", "object_store", "jobs:", "pg:", "actor:", "task:")
# Kinds the engine gives one problem as it learns more about it: the watch keys them as one, so a subscriber hears
# of the problem once. A Serve deployment failing its health check is told as failing (Kind.SERVE) until the
# engine has seen its replicas replaced, then as a loop (Kind.SERVE_LOOP): the same deployment, the same fault.
SAME_PROBLEM = {Kind.SERVE_LOOP: Kind.SERVE}
# An alert's labels Prometheus adds or that vary while it fires: not part of which alert it is.
ALERT_SEVERITY = {"critical": STUCK, "error": STUCK - 10, "warning": PROBLEM + 5}


def primary(chain: Chain) -> str:
    for prefix in PRIMARY:
        mine = sorted(s for s in chain.subjects if s.startswith(prefix))
        if mine:
            return mine[0]
    return min(chain.subjects) if chain.subjects else repr(chain.alike_key())


def chain_problems(chain: Chain) -> list[Problem]:
    """A chain as problems: failed jobs one each (a job that fails is news even when others failed before),
    any other chain as one, keyed by its kind, its job and the entity it is about."""
    if chain.kind is Kind.FAILED_JOBS:
        return [
            Problem(
                f"{chain.kind}|{d.get('job')}",
                chain.severity,
                str(chain.kind),
                one_line(f"job {d.text}", FINDING_TITLE_CHARS),
                Source.CLUSTER,
            )
            for d in chain.details
            if d.get("job")
        ]
    finding = to_finding(chain)
    key = f"{SAME_PROBLEM.get(chain.kind, chain.kind)}|{chain.job_id or ''}|{primary(chain)}"
    return [Problem(key, chain.severity, finding.kind, finding.title, Source.CLUSTER)]


def alert_problems(alerts: Sequence[Alert]) -> list[Problem]:
    """Firing alerts as problems (a pending one has not fired yet), keyed by their labels."""
    out = []
    for a in [a for a in alerts if a.state == "firing"][:ALERTS_READ]:
        name = a.labels.get("alertname", "?")
        labels = ",".join(f"{k}={v}" for k, v in sorted(a.labels.items()) if k != "alertname")
        about = a.annotations.get("summary") or a.annotations.get("description") or labels
        title = f"Prometheus alert {quoted(name)} firing since {a.active_at}: {quoted(about)}"
        severity = ALERT_SEVERITY.get(a.labels.get("severity", "").lower(), PROBLEM)
        out.append(
            Problem(
                f"alert|{name}|{labels}",
                severity,
                WatchKind.ALERT,
                one_line(title, FINDING_TITLE_CHARS),
                Source.ALERTS,
            )
        )
    return out


def problems_of(
    ev: GraphInputs, chains: Sequence[Chain], alerts: Sequence[Alert] | None, notes: list[str]
) -> Round:
    """The round's problems (pure): the serious chains, the firing alerts (None: not read), and the cluster
    unreachable when no check could run."""
    unread = set()
    problems: list[Problem] = []
    if ev.unchecked:
        unread.add(Source.CLUSTER)
    if alerts is None:
        unread.add(Source.ALERTS)
    if len(ev.unchecked) == len(CHECKS):
        why = ev.unreadable[0] if ev.unreadable else "every read failed"
        problems.append(
            Problem(
                "unreachable",
                STUCK,
                WatchKind.UNREACHABLE,
                one_line(f"no check could run: {why}", FINDING_TITLE_CHARS),
                Source.REACH,
            )
        )
    for chain in chains:
        if chain.severity >= PROBLEM:
            problems += chain_problems(chain)
    problems += alert_problems(alerts or [])
    return Round(keyed(problems), frozenset(unread), notes)


async def firing_alerts(api: RayAPI, notes: list[str]) -> list[Alert] | None:
    """The alerts of the cluster's Prometheus; [] when none is known (nothing to read); None when it did not
    answer (its problems are then unknown, and kept)."""
    prometheus = await api.sources.prometheus.locate()
    if prometheus is None:
        return []
    try:
        return await prometheus.alerts()
    except RayMCPError as exc:
        notes.append(f"The alerts of the Prometheus at {prometheus.url} could not be read: {exc}")
        return None


async def health_round(api: RayAPI) -> tuple[Round, str]:
    """One round: cluster_health's evidence and chains, and the firing alerts, as problems; with cluster_health's
    answer in words (what the resource shows)."""
    notes: list[str] = []
    ev = await evidence.gather_cluster(api)
    alerts = await firing_alerts(api, notes)
    chains = explain_cluster(ev)
    ranked = sorted(map(to_finding, chains), key=lambda f: -f.severity)
    _model, text = health_answer(api.dashboard_url, ev, ranked, max_bytes=DIAGNOSIS_BYTES.default)
    return problems_of(ev, chains, alerts, notes), text


def unreachable_round(reason: str) -> Round:
    """A round where the cluster could not even be found: every other problem kept, as unknown."""
    problem = Problem(
        "unreachable",
        STUCK,
        WatchKind.UNREACHABLE,
        one_line(f"no check could run: {reason}", FINDING_TITLE_CHARS),
        Source.REACH,
    )
    return Round({problem.key: problem}, frozenset({Source.CLUSTER, Source.ALERTS}), [reason])
