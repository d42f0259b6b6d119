"""The cluster's health, live: the resource ``ray://cluster/health`` (``?cluster=<name>`` on a server of several
clusters), which clients can subscribe to.

Reading it gives cluster_health's answer, the firing alerts of the cluster's Prometheus when one is known, and the
changes the last notification was about. Subscribing starts one shared poller per cluster (server/pollers.py),
however many sessions subscribe: every ``HEALTH_POLL_S`` it runs one cluster_health round (diagnosis/watch.py) and,
when a problem appeared, changed severity or cleared (shaping/health_watch.py), notifies every subscriber once
(``notifications/resources/updated``); the subscriber reads the resource again. The first round, made before the
subscribe is answered, is the baseline: what the subscriber reads then is not news.

Both protocol eras are served, as for the job resources (live.py routes each subscription here by its URI):
2025 ``resources/subscribe`` and 2026 ``subscriptions/listen``. Bounds: ``HEALTH_WATCHES_PER_SESSION`` clusters per
client connection; a poller stops when its last subscriber leaves (unsubscribe, a closed listen stream, a session
that is gone).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus, urlencode

from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ray_mcp.diagnosis.watch import health_round, unreachable_round
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import HEALTH_POLL_S, HEALTH_WATCHES_PER_SESSION
from ray_mcp.server.context import CURRENT_CLUSTER
from ray_mcp.server.pollers import Polled, SharedPollers
from ray_mcp.shaping.health_watch import Change, Problem, Round, advance, render_changes, render_problems
from ray_mcp.sources.scope import read_scope

if TYPE_CHECKING:
    from ray_mcp.server.context import App

log = logging.getLogger("ray_mcp.server.health_watch")

HEALTH_URI = "ray://cluster/health"
HEALTH_URI_TEMPLATE = HEALTH_URI + "{?cluster}"
HEALTH_URI_RE = re.compile(r"^ray://cluster/health(?:\?cluster=([^&#]{1,512}))?$")


def is_health_uri(uri: str) -> bool:
    return uri.startswith(HEALTH_URI)


def health_uri(cluster: str | None) -> str:
    return f"{HEALTH_URI}?{urlencode({'cluster': cluster})}" if cluster else HEALTH_URI


def cluster_of_uri(app: App, uri: str) -> str:
    """The cluster a health URI names, checked (one this server serves; named when it serves several)."""
    from ray_mcp.server.live import cluster_of_link

    match = HEALTH_URI_RE.match(uri)
    if match is None:
        raise MCPError(
            INVALID_PARAMS,
            f"Cannot subscribe to {uri!r}: the cluster's health is {HEALTH_URI}, with ?cluster=<name> on a server "
            "of several clusters.",
        )
    return cluster_of_link(app, unquote_plus(match.group(1)) if match.group(1) else None)


@dataclass
class HealthState:
    """What one cluster's watch holds: the problems of its last round and the changes last notified."""

    problems: dict[str, Problem] | None = None  # None until the baseline round is in
    last_changes: list[Change] = field(default_factory=list)
    changed_at: float | None = None


HealthWatchers = SharedPollers[str, HealthState]


class HealthFeed:
    """The cluster's health as a feed of shared pollers (server/pollers.py): keyed by cluster, one cluster_health
    round each, a change when a problem appeared, changed severity or cleared."""

    share_full = (
        "This client already watches the health of {watching} clusters, the most one client may ({per_session}); "
        "unsubscribe from one first."
    )
    all_full = None  # no bound on the clusters watched at once beyond the clusters this server serves

    def __init__(self, app: App) -> None:
        self.app = app

    def key_of(self, uri: str) -> str:
        return cluster_of_uri(self.app, uri)

    def label(self, key: str) -> str:
        return f"health watch {key}"

    async def admit(self, key: str) -> None:
        """Every cluster this server serves can be watched (an unreachable one is a problem, not a refusal)."""

    def start(self, key: str) -> HealthState:
        return HealthState()

    async def poll(self, key: str, state: HealthState) -> Polled:
        now, _text = await health_of(self.app, key)
        first = state.problems is None
        state.problems, changes = advance(state.problems or {}, now)
        if not changes or first:
            return Polled()
        state.last_changes, state.changed_at = changes, time.time()
        log.info(
            "ray-mcp: the health of cluster %s changed (%d changes); notifying its subscribers",
            key,
            len(changes),
        )
        return Polled(changed=True)


def health_watchers(
    app: App,
    publish: Callable[[str], Awaitable[None]],
    *,
    poll_interval_s: float = HEALTH_POLL_S,
    per_session: int = HEALTH_WATCHES_PER_SESSION,
) -> HealthWatchers:
    """The shared pollers of the cluster's health, one per watched cluster."""
    return SharedPollers(HealthFeed(app), publish, poll_interval_s=poll_interval_s, per_session=per_session)


async def health_of(app: App, cluster: str) -> tuple[Round, str]:
    """One round of the cluster's health, read afresh; an unreachable round when the cluster is not found."""
    token = CURRENT_CLUSTER.set(cluster)
    try:
        api = await app.api()
        with read_scope():  # each round reads afresh (not through a subscribe call's scope)
            return await health_round(api)
    except RayMCPError as exc:
        log.info("ray-mcp: cannot read the health of cluster %s (will retry): %s", cluster, exc)
        return unreachable_round(str(exc)), f"The cluster could not be read: {exc}"
    finally:
        CURRENT_CLUSTER.reset(token)


async def read_health(app: App, watchers: HealthWatchers, cluster: str | None) -> str:
    """The resource: cluster_health's answer, the watch's problems and its last notified changes, and how to
    subscribe."""
    name = cluster_of_uri(app, health_uri(cluster))
    now, text = await health_of(app, name)
    parts = [text]
    alerts = [p for p in now.problems.values() if p.source == "alerts"]
    if alerts:
        parts += ["", "Firing Prometheus alerts:", *render_problems({p.key: p for p in alerts})]
    parts += [f"Note: {n}" for n in now.notes]
    watch = watchers.watch_of(name)
    if watch is not None:
        parts += ["", *render_changes(watch.state.last_changes, watch.state.changed_at)]
    parts.append(
        f"\nSubscribe to {health_uri(cluster)} to be notified when a problem appears, changes severity or clears "
        f"(one round every {HEALTH_POLL_S:g} s)."
    )
    return "\n".join(parts)
