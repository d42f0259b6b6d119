"""Toolsets: the tools in groups, and which groups tools/list offers for a cluster.

Every tool module names its group once, where its tools are defined (``TOOLSET = Toolset.SERVE``); nothing
else lists tools by group. The default set fits what the cluster can use: the core and job tools always, the
Serve tools where Serve runs, the Train tools where Train keeps its runs, the Kubernetes tools for a k8s://
address and get_metrics where a Prometheus is known. ``--toolsets`` (RAY_MCP_TOOLSETS) chooses others, the way
github-mcp-server's and kubernetes-mcp-server's ``--toolsets`` do: comma-separated names, ``default`` for the
set that fits the cluster and ``all`` for every tool.

This module is pure (settings validate the names with it at start); server/toolsets.py applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Toolset(StrEnum):
    CORE = "core"
    JOBS = "jobs"
    TASKS = "tasks"
    SERVE = "serve"
    TRAIN = "train"
    PROFILING = "profiling"
    KUBERNETES = "kubernetes"
    METRICS = "metrics"


# What each toolset holds and when the default set includes it (the README's toolset table says the same).
ABOUT: dict[Toolset, tuple[str, str]] = {
    Toolset.CORE: (
        "the cluster's state and health, nodes, actors, placement groups, logs, job diagnosis",
        "always",
    ),
    Toolset.JOBS: ("submit, follow, stop and delete jobs", "always"),
    Toolset.TASKS: ("tasks, a job's task graph, the object store, cluster events", "on request"),
    Toolset.SERVE: ("Ray Serve status, deploy, delete", "where Serve runs"),
    Toolset.TRAIN: ("Ray Train runs and checkpoints", "where Train keeps its runs (state tracking on)"),
    Toolset.PROFILING: ("stack traces and CPU profiles of workers", "on request"),
    Toolset.KUBERNETES: (
        "KubeRay objects, pods, fleet, apply and delete",
        "a k8s:// address, or --kubernetes-tools",
    ),
    Toolset.METRICS: ("metrics over time from Prometheus", "a Prometheus is known, or --metrics-tools"),
}
ALWAYS = frozenset({Toolset.CORE, Toolset.JOBS})
FROM_THE_CLUSTER = frozenset({Toolset.SERVE, Toolset.TRAIN})  # offered by default as what runs is read
DEFAULT = "default"  # in a selection: the set that fits the cluster
ALL = "all"  # in a selection: every toolset


@dataclass(frozen=True)
class ClusterFacts:
    """What the default set is decided from: what runs on the cluster and how it was given."""

    serve: bool = False
    train: bool = False
    kubernetes: bool = False
    metrics: bool = False


def default_toolsets(facts: ClusterFacts) -> frozenset[Toolset]:
    """The toolsets that fit a cluster with these facts."""
    fitting = {
        Toolset.SERVE: facts.serve,
        Toolset.TRAIN: facts.train,
        Toolset.KUBERNETES: facts.kubernetes,
        Toolset.METRICS: facts.metrics,
    }
    return ALWAYS | {toolset for toolset, fits in fitting.items() if fits}


def parse_selection(text: str) -> tuple[str, ...]:
    """A --toolsets value as its names, in order, lower-cased; an unknown name is a ValueError that lists the
    known ones (a startup error, so a typo never silently offers fewer tools)."""
    names = tuple(dict.fromkeys(part.strip().lower() for part in text.split(",") if part.strip()))
    known = [t.value for t in Toolset]
    unknown = [name for name in names if name not in (*known, DEFAULT, ALL)]
    if unknown or not names:
        given = f"unknown toolset(s) {', '.join(repr(n) for n in unknown)}" if unknown else "no toolset named"
        raise ValueError(
            f"{given}; name toolsets separated by commas from {', '.join(known)}, or {DEFAULT} (the set that "
            f"fits the cluster) or {ALL} (every tool), e.g. {DEFAULT},{Toolset.PROFILING.value}"
        )
    return names


def selected(selection: tuple[str, ...] | None, facts: ClusterFacts) -> frozenset[Toolset]:
    """The toolsets tools/list offers: the default set unless a selection names others."""
    if selection is None:
        return default_toolsets(facts)
    if ALL in selection:
        return frozenset(Toolset)
    chosen = frozenset(Toolset(name) for name in selection if name != DEFAULT)
    return chosen | default_toolsets(facts) if DEFAULT in selection else chosen


def depends_on_the_cluster(selection: tuple[str, ...] | None) -> bool:
    """Does the selection follow what runs on the cluster (so its Serve and Train facts must be read)?"""
    return selection is None or (DEFAULT in selection and ALL not in selection)
