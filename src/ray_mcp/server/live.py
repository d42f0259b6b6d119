"""Live job updates: the resource ``ray://jobs/{submission_id}``, which clients can subscribe to.

Reading it gives the job's current state and the tail of its driver log (bounded, and redacted like every
resource). Subscribing starts one shared poller per job (server/pollers.py, however many sessions subscribe),
answered once it has read the job's status; each time the status changes, every subscriber gets
``notifications/resources/updated`` and reads the resource again.

Both eras of the protocol are served:

* 2025 sessions (Claude Code, Cursor, the SDK's ``mode="legacy"``): ``resources/subscribe`` and
  ``resources/unsubscribe``; the notification goes to each subscribed session.
* 2026-07-28 sessions: ``subscriptions/listen`` with ``resourceSubscriptions``; the job is watched for as long as
  the listen stream is open, and the update goes through the SDK's subscription bus.

Bounds: at most ``MAX_WATCHED_JOBS`` jobs watched at once, and ``WATCHES_PER_SESSION`` of them per client
connection, so one client cannot take every watch (another subscribe is refused with the reason); a job the
cluster does not have is refused, and a watched job that disappears is dropped. One poll every
``POLL_INTERVAL_S`` per job, and a poller stops when its last subscriber leaves (unsubscribe, a closed listen
stream, a session that is gone) or once the job has ended and that last change was sent.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote_plus, urlencode

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.session import ServerSession
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import (
    INVALID_PARAMS,
    EmptyResult,
    ResourceLink,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    UnsubscribeRequestParams,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ray_mcp import sdk_private
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.guard.redaction import clean_text
from ray_mcp.limits import JOB_LOG_TAIL_BYTES, JOB_LOG_TAIL_LINES, MAX_WATCHED_JOBS, WATCHES_PER_SESSION
from ray_mcp.models import TERMINAL_JOB_STATUSES
from ray_mcp.server.context import CURRENT_CLUSTER
from ray_mcp.server.health_watch import (
    HEALTH_URI,
    HEALTH_URI_TEMPLATE,
    HealthWatchers,
    health_watchers,
    is_health_uri,
    read_health,
)
from ray_mcp.server.icons import RAY_ICONS
from ray_mcp.server.pollers import Polled, SharedPollers, Then, connection_key
from ray_mcp.sources.scope import read_scope
from ray_mcp.text import quoted

if TYPE_CHECKING:
    from ray_mcp.server.build import RayMCPServer
    from ray_mcp.server.context import App

log = logging.getLogger("ray_mcp.server.live")

JOB_URI_FORM = "ray://jobs/{submission_id}"  # as messages name it
# ?cluster= names the cluster the job belongs to: every link handed out on a server of several clusters has it
JOB_URI_TEMPLATE = JOB_URI_FORM + "{?cluster}"


def job_uri(submission_id: str, cluster: str | None) -> str:
    """The job's resource URI; with its cluster when one is named (a server of several clusters)."""
    base = JOB_URI_FORM.format(submission_id=submission_id)
    return f"{base}?{urlencode({'cluster': cluster})}" if cluster else base


def job_link(submission_id: str) -> ResourceLink:
    """A link to the job's resource (status, error, driver log tail), for a tool result that names the job: it
    carries the call's cluster when the server has several (ClusterSelection always sets it there)."""
    return ResourceLink(
        uri=job_uri(submission_id, CURRENT_CLUSTER.get()),
        name=f"ray-job {submission_id}",
        description="Status, error and driver log tail; subscribe for status changes.",
        mime_type="text/markdown",
    )


JOB_URI = re.compile(r"^ray://jobs/([A-Za-z0-9_.:-]{1,128})(?:\?cluster=([^&#]{1,512}))?$")
POLL_INTERVAL_S = 2.0


@dataclass(frozen=True)
class JobRef:
    """What a job URI names: the job and, when the URI says, its cluster."""

    job: str
    cluster: str | None


def job_of(uri: str) -> JobRef:
    match = JOB_URI.match(uri)
    if match is None:
        raise MCPError(
            INVALID_PARAMS,
            f"Cannot subscribe to {uri!r}: only jobs change, as {JOB_URI_FORM} (find ids with list_jobs), and "
            "the cluster's health, as ray://cluster/health; with ?cluster=<name> on a server of several clusters. "
            "The reference pages are static.",
        )
    return JobRef(match.group(1), unquote_plus(match.group(2)) if match.group(2) else None)


def cluster_of_link(app: App, cluster: str | None) -> str:
    """The cluster a job URI belongs to, checked: one this server serves, and named whenever it serves several
    (a job id names different jobs on different clusters). Anything else is refused, never read elsewhere."""
    if cluster is None and not app.multi_cluster:
        return app.default_cluster
    names = ", ".join(map(quoted, app.connections))
    if cluster is None:
        raise MCPError(
            INVALID_PARAMS,
            f"This server serves several clusters ({names}): a job URI must name its cluster, as "
            f"{JOB_URI_FORM}?cluster=<name>. The links in tool results carry it.",
        )
    if cluster not in app.connections:
        raise MCPError(
            INVALID_PARAMS,
            f"The link belongs to cluster {quoted(cluster)}, which this server does not serve (it serves "
            f"{names}); nothing was read. Use a link this server handed out (list_jobs gives them).",
        )
    return cluster


@dataclass
class JobState:
    """What one job's watch holds: the job, its cluster, and the status last read."""

    job: str
    cluster: str  # the cluster the job belongs to (cluster_of_link)
    status: str | None = None  # None until a poll has read it


JobWatchers = SharedPollers[str, JobState]


class JobFeed:
    """Jobs as a feed of shared pollers (server/pollers.py): keyed by the job's URI, one status read each, a change
    when the status changes; polling ends with the job, and a job that is gone drops its watch."""

    share_full = (
        "This client already watches {watching} jobs, its share of the {max_watched} ray-mcp watches at once; "
        "unsubscribe from one (a finished job first)."
    )
    all_full = (
        "Already watching {max_watched} jobs, the most ray-mcp follows at once; unsubscribe from a finished job "
        "first."
    )

    def __init__(self, app: App) -> None:
        self.app = app

    def key_of(self, uri: str) -> str:
        """The job URI itself, once it names a job of a cluster this server serves."""
        cluster_of_link(self.app, job_of(uri).cluster)
        return uri

    def label(self, key: str) -> str:
        return f"watch {key}"

    def start(self, key: str) -> JobState:
        ref = job_of(key)
        return JobState(ref.job, cluster_of_link(self.app, ref.cluster))

    async def admit(self, key: str) -> None:
        state = self.start(key)
        if await self._status(state) == "NOT_FOUND":
            raise MCPError(
                INVALID_PARAMS,
                f"No job {state.job!r} in the cluster, so nothing to watch. Call list_jobs to see the submission "
                "ids that exist.",
            )

    async def poll(self, key: str, state: JobState) -> Polled:
        status = await self._status(state)
        if status is None:
            return Polled()  # not readable right now: the next poll tries again
        changed = state.status is not None and status != state.status  # the first status read is the baseline
        state.status = status
        if changed:
            log.info("ray-mcp: job %s is now %s; notifying its subscribers", state.job, status)
        if status == "NOT_FOUND":
            return Polled(changed, Then.GONE)  # a job that is gone holds no watch, subscribed or not
        # nothing changes after the end; the resource still reads the final state
        return Polled(changed, Then.END if status in TERMINAL_JOB_STATUSES else Then.AGAIN)

    async def _status(self, state: JobState) -> str | None:
        """The job's status; NOT_FOUND once it is gone; None when it cannot be read right now."""
        token = CURRENT_CLUSTER.set(state.cluster)
        try:
            api = await self.app.api()
            with read_scope():  # each poll reads the job afresh (not through the subscribe call's scope)
                return (await api.jobs.get(state.job)).status
        except NotFound:
            return "NOT_FOUND"
        except RayMCPError as exc:
            log.info("ray-mcp: cannot read job %s for its subscribers (will retry): %s", state.job, exc)
            return None
        finally:
            CURRENT_CLUSTER.reset(token)


def job_watchers(
    app: App,
    publish: Callable[[str], Awaitable[None]],
    *,
    poll_interval_s: float = POLL_INTERVAL_S,
    max_watched: int = MAX_WATCHED_JOBS,
    per_session: int = WATCHES_PER_SESSION,
) -> JobWatchers:
    """The shared pollers of the job resources, one per subscribed job."""
    feed = JobFeed(app)
    return SharedPollers(
        feed, publish, poll_interval_s=poll_interval_s, per_session=per_session, max_watched=max_watched
    )


async def read_job(app: App, submission_id: str, cluster: str | None = None) -> str:
    """The resource: the job's state, then the tail of its driver log (bounded; redacted by the middleware),
    read from the cluster the URI names (cluster_of_link)."""
    token = CURRENT_CLUSTER.set(cluster_of_link(app, cluster))
    try:
        return await _read_job(app, submission_id, cluster)
    finally:
        CURRENT_CLUSTER.reset(token)


async def _read_job(app: App, submission_id: str, cluster: str | None) -> str:
    from ray_mcp.answers.targets import LogTarget
    from ray_mcp.shaping.jobs import render_job
    from ray_mcp.shaping.logs import render_log_tail, without_colour

    try:
        api = await app.api()
        info = await api.jobs.get(submission_id)
    except NotFound as exc:
        raise ResourceNotFoundError(str(exc)) from None
    except RayMCPError as exc:
        raise ResourceError(str(exc)) from None
    parts = [render_job(info), ""]
    if (history := app.history_of_call()) is not None:  # a terminated cluster's record says so first
        parts.insert(0, history.notice())
    try:
        target = LogTarget(job=submission_id)
        tail = await api.logs.tail(target, lines=JOB_LOG_TAIL_LINES, max_bytes=JOB_LOG_TAIL_BYTES)
        parts += [
            f"Driver log, last {JOB_LOG_TAIL_LINES} lines at most (tail_logs reads more):",
            render_log_tail(without_colour(tail)),
        ]
    except RayMCPError as exc:
        parts.append(f"Driver log: not readable now ({exc}).")
    if info.status not in TERMINAL_JOB_STATUSES:
        parts.append(f"\nSubscribe to {job_uri(submission_id, cluster)} to hear when it changes.")
    return "\n".join(parts)


class Watchers(Protocol):
    """What a subscription is routed to: the job pollers or the cluster health pollers."""

    def check(self, uri: str) -> None: ...

    async def subscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None: ...

    async def unsubscribe(
        self, uri: str, session: ServerSession | None, owner: int | None = None
    ) -> None: ...


@dataclass
class Subscriptions:
    """Every subscription, routed by its URI: ray://cluster/health to the health watches, the rest to the jobs'
    (which refuse what is not a job)."""

    jobs: JobWatchers
    health: HealthWatchers

    def of(self, uri: str) -> Watchers:
        return self.health if is_health_uri(uri) else self.jobs

    def check(self, uri: str) -> None:
        self.of(uri).check(uri)

    async def subscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        await self.of(uri).subscribe(uri, session, owner)

    async def unsubscribe(self, uri: str, session: ServerSession | None, owner: int | None = None) -> None:
        await self.of(uri).unsubscribe(uri, session, owner)


def forget_on_close(session: ServerSession, uri: str, watchers: Watchers) -> None:
    """When the session's connection closes, drop its subscriptions (a poller with no subscriber stops)."""
    connection = sdk_private.connection_of(session)
    known = connection.state.get("ray_mcp_job_subscriptions")
    uris: set[str] = known if isinstance(known, set) else set()
    if known is None:
        connection.state["ray_mcp_job_subscriptions"] = uris

        async def unsubscribe_all() -> None:
            for each in list(uris):
                await watchers.unsubscribe(each, session)

        connection.exit_stack.push_async_callback(unsubscribe_all)
    uris.add(uri)


class ListenToJobs(ServerMiddleware[Any]):
    """A 2026 ``subscriptions/listen`` stream watches the jobs it names for as long as it is open.

    The SDK's listen handler serves the stream and delivers what ``publish`` puts on the bus; this middleware
    refuses a URI that cannot change before the stream opens, and holds a watch on each job while it runs.
    """

    def __init__(self, watchers: Subscriptions) -> None:
        self._watchers = watchers

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "subscriptions/listen" or ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)
        try:
            params = SubscriptionsListenRequestParams.model_validate(ctx.params or {}, by_name=False)
        except ValidationError:
            return await call_next(ctx)  # the SDK answers malformed params
        uris = list(params.notifications.resource_subscriptions or [])
        for uri in uris:
            self._watchers.check(uri)  # refuse what cannot change, first
        owner = connection_key(ctx.session)
        watching: list[str] = []
        try:
            for uri in uris:
                await self._watchers.subscribe(uri, None, owner)
                watching.append(uri)
            return await call_next(ctx)
        finally:
            with contextlib.suppress(Exception):
                for uri in watching:
                    await self._watchers.unsubscribe(uri, None, owner)


def register(server: RayMCPServer, bus: SubscriptionBus) -> JobWatchers:
    """The job resource template, the 2025 subscribe handlers, and the watches of 2026 listen streams.

    ``bus`` is the subscription bus the server was built with (``MCPServer(subscriptions=bus)``).
    """
    app = server.app

    async def publish(uri: str) -> None:
        await bus.publish(ResourceUpdated(uri=clean_text(uri)))  # sent outside any request: guarded here

    jobs = job_watchers(app, publish)
    health = health_watchers(app, publish)
    watchers = Subscriptions(jobs, health)
    server.health_watchers = health

    @server.resource(
        JOB_URI_TEMPLATE,
        name="ray-job",
        title="Ray job (live)",
        description="A job's status, error and the tail of its driver log. Subscribe to it to be notified when "
        "the job's status changes.",
        mime_type="text/markdown",
        icons=RAY_ICONS,
    )
    async def job_resource(submission_id: str, cluster: str | None = None) -> str:
        return await read_job(app, submission_id, cluster)

    async def on_subscribe(
        ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        await watchers.subscribe(params.uri, ctx.session)
        forget_on_close(ctx.session, params.uri, watchers)
        return EmptyResult()

    @server.resource(
        HEALTH_URI,
        name="ray-cluster-health",
        title="Cluster health (live)",
        description="What is wrong in the cluster now (cluster_health's answer) and Prometheus's firing alerts. "
        "Subscribe to it to be notified when a problem appears, changes severity or clears.",
        mime_type="text/markdown",
        icons=RAY_ICONS,
    )
    async def health_resource() -> str:
        return await read_health(app, health, None)

    @server.resource(
        HEALTH_URI_TEMPLATE,
        name="ray-cluster-health-of",
        title="Cluster health (live), of a named cluster",
        description="ray://cluster/health of one cluster of a server of several.",
        mime_type="text/markdown",
        icons=RAY_ICONS,
    )
    async def health_resource_of(cluster: str | None = None) -> str:
        return await read_health(app, health, cluster)

    async def on_unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        watchers.check(params.uri)
        await watchers.unsubscribe(params.uri, ctx.session)
        return EmptyResult()

    lowlevel = sdk_private.lowlevel_server(server)
    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, on_unsubscribe)
    server.middleware.append(ListenToJobs(watchers))
    app.on_close.append(jobs.aclose)
    app.on_close.append(health.aclose)
    return jobs
