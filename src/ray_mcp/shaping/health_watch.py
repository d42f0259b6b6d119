"""What a watch of the cluster's health holds and tells (pure): its problems, each by a key that holds from one
round to the next, and what changed between two rounds (appeared, changed severity, cleared).

A problem whose source could not be read in a round is kept as it was, never cleared: what cannot be checked is
unknown, not healthy.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ray_mcp.limits import HEALTH_CHANGES_SHOWN


@dataclass(frozen=True)
class Problem:
    """One problem: ``key`` names it across rounds, ``source`` is what it was read from (``cluster`` for
    cluster_health's findings, ``alerts`` for Prometheus's firing alerts, ``reach`` for the cluster answering)."""

    key: str
    severity: int
    kind: str
    title: str
    source: str


@dataclass
class Round:
    """One poll of the cluster's health: its problems, the sources it could not read (whose problems are kept)
    and why."""

    problems: dict[str, Problem]
    unread: frozenset[str] = frozenset()
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Change:
    """``before`` None: the problem appeared; ``after`` None: it cleared; else its severity changed."""

    problem: Problem
    before: int | None
    after: int | None


def keyed(problems: Sequence[Problem]) -> dict[str, Problem]:
    """Problems by key; two under one key (the same thing told twice) keep the more severe."""
    out: dict[str, Problem] = {}
    for p in problems:
        if p.key not in out or p.severity > out[p.key].severity:
            out[p.key] = p
    return out


def advance(held: Mapping[str, Problem], now: Round) -> tuple[dict[str, Problem], list[Change]]:
    """The problems held after ``now``, and what changed since ``held``: new problems, a new severity, and
    problems gone from a source that was read (one that was not read keeps its problems)."""
    state: dict[str, Problem] = {}
    changes: list[Change] = []
    for key, problem in now.problems.items():
        old = held.get(key)
        if old is None:
            changes.append(Change(problem, None, problem.severity))
        elif old.severity != problem.severity:
            changes.append(Change(problem, old.severity, problem.severity))
        state[key] = problem
    for key, old in held.items():
        if key in now.problems:
            continue
        if old.source in now.unread:
            state[key] = old
        else:
            changes.append(Change(old, old.severity, None))
    changes.sort(key=lambda c: -max(c.before or 0, c.after or 0))
    return state, changes


def change_line(change: Change) -> str:
    p = change.problem
    if change.before is None:
        return f"appeared (severity {change.after}, {p.kind}): {p.title}"
    if change.after is None:
        return f"cleared ({p.kind}): {p.title}"
    return f"severity {change.before} -> {change.after} ({p.kind}): {p.title}"


def render_changes(changes: Sequence[Change], at: float | None) -> list[str]:
    """The changes a watch last notified, bounded, newest state first; nothing when none was notified."""
    if at is None:
        return []
    when = datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [f"Last change notified at {when}:"]
    lines += [f"- {change_line(c)}" for c in changes[:HEALTH_CHANGES_SHOWN]]
    if len(changes) > HEALTH_CHANGES_SHOWN:
        lines.append(f"- and {len(changes) - HEALTH_CHANGES_SHOWN} more changes (cluster_health lists them)")
    return lines


def render_problems(problems: Mapping[str, Problem]) -> list[str]:
    """The problems a watch holds, most severe first, bounded (cluster_health tells each in full)."""
    ranked = sorted(problems.values(), key=lambda p: -p.severity)
    lines = [f"- [{p.severity}] {p.kind}: {p.title}" for p in ranked[:HEALTH_CHANGES_SHOWN]]
    if len(ranked) > HEALTH_CHANGES_SHOWN:
        lines.append(f"- and {len(ranked) - HEALTH_CHANGES_SHOWN} more")
    return lines
