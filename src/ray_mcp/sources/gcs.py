"""Ray's GCS, through Ray's own gRPC channel and generated stubs: only what the dashboard does not serve.

Everything else is read through the dashboard, because often it is all a user can reach (a port-forward of
8265, or KubeRay's service proxy). What only the GCS has: where a GCS's dashboard listens (to resolve a GCS
address), placement groups' strategies, each actor's owner worker and assigned resource ids (job_topology),
how many task attempts the GCS stores, and killing an actor (the dashboard has no route for it).

One exception: pg_status, which reads the GCS's placement group table anyway, reads the nodes and what each has
free here too. Beside its page these cost no time; on the dashboard, which serves one request at a time, they
queued behind the page (a cluster with pending groups took 1.48x the page's proxy, bench/ "call overhead").

Channels come from Ray's own ``init_grpc_channel`` (sdk_private.ray_grpc_channel), which adds TLS (RAY_USE_TLS) and token authentication when
the cluster uses them. Each call blocks: ``Gcs`` runs it in a worker thread.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio.to_thread
import grpc
from ray.core.generated import common_pb2, gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

from ray_mcp import sdk_private
from ray_mcp.errors import ClusterUnavailable, RayRequestFailed, gcs_errors
from ray_mcp.limits import STATE_API_MAX_ROWS
from ray_mcp.sources import scope
from ray_mcp.sources.records import Node

RAY_DEFAULT = "ray-default"  # open_channel: let Ray decide the credentials (its process-wide token mode)
GCS_RETRY_S = 60.0  # a dashboard whose GCS was not found: how long before it is looked up again
LOOKUP_TIMEOUT_S = 3.0  # each candidate GCS asked for its dashboard when only the dashboard was given
T = TypeVar("T")

# The protobuf messages and enums of Ray's generated modules (mypy sees no attributes on them).
_PG_STATE_NAME = gcs_pb2.PlacementGroupTableData.PlacementGroupState.Name  # type: ignore[attr-defined]
_STRATEGY_NAME = common_pb2.PlacementStrategy.Name  # type: ignore[attr-defined]
_ACTOR_STATE_NAME = gcs_pb2.ActorTableData.ActorState.Name  # type: ignore[attr-defined]
_ACTOR_STATE_VALUE = gcs_pb2.ActorTableData.ActorState.Value  # type: ignore[attr-defined]
_NODE_STATE_NAME = gcs_pb2.GcsNodeInfo.GcsNodeState.Name  # type: ignore[attr-defined]
# The actor filters the GCS's GetAllActorInfo applies itself (as the State API sends them), and the class name,
# which actor_counts checks on each row.
GCS_ACTOR_FILTERS = frozenset({"actor_id", "job_id", "state", "class_name"})


def open_channel(gcs_address: str, authorization: str | None = RAY_DEFAULT) -> Any:
    """A synchronous gRPC channel to the GCS at ``host:port``.

    ``authorization`` is this cluster's own ``Authorization`` value (``Bearer <token>``), or None for none:
    it rides every call as metadata. Ray's ``init_grpc_channel`` would add this *process's* Ray token to every
    channel in token mode (RAY_AUTH_MODE=token), so then the channel is built without Ray's interceptor, with
    the same TLS (RAY_USE_TLS). ``RAY_DEFAULT`` keeps Ray's behaviour (doctor's check of a configured address).
    """
    if authorization == RAY_DEFAULT:
        return sdk_private.ray_grpc_channel(gcs_address)
    if sdk_private.ray_token_auth_enabled():
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            chain, key, ca = sdk_private.ray_tls_certs()
            tls = grpc.ssl_channel_credentials(certificate_chain=chain, private_key=key, root_certificates=ca)
            channel = grpc.secure_channel(gcs_address, tls)
        else:
            channel = grpc.insecure_channel(gcs_address)
    else:
        channel = sdk_private.ray_grpc_channel(gcs_address)
    if authorization:
        channel = grpc.intercept_channel(channel, _AddMetadata(("authorization", authorization)))
    return channel


class _Details(
    collections.namedtuple(
        "_Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    ),
    grpc.ClientCallDetails,
):
    pass


class _AddMetadata(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """A gRPC client interceptor that adds ``pairs`` to the metadata of every call."""

    def __init__(self, *pairs: tuple[str, str]) -> None:
        self.pairs = pairs

    def _details(self, d: Any) -> Any:
        metadata = [*(d.metadata or []), *self.pairs]
        return _Details(d.method, d.timeout, metadata, d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


# ---- which dashboard a GCS serves, and which GCS serves a dashboard ----


def dashboard_url(recorded: str) -> str | None:
    """The GCS's KV value for the dashboard (``host:port``, or a URL) as a URL; None when it is not set."""
    if not recorded:
        return None
    return recorded if re.match(r"^https?://", recorded) else f"http://{recorded}"


def reported_dashboard(
    gcs_address: str, timeout_s: float, authorization: str | None = RAY_DEFAULT
) -> str | None:
    """Where the GCS says its dashboard listens (Ray records it in its internal KV), as a URL; None if the GCS
    does not answer or has no dashboard. ``authorization``: see open_channel."""
    channel = open_channel(gcs_address, authorization)
    try:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        kv_get = gcs_service_pb2.InternalKVGetRequest  # type: ignore[attr-defined]
        reply = stub.InternalKVGet(kv_get(key=b"dashboard", namespace=b"dashboard"), timeout=timeout_s)
    except grpc.RpcError:
        return None
    finally:
        channel.close()
    return dashboard_url(reply.value.decode(errors="replace"))


def local_gcs_addresses() -> list[str]:
    """The GCS addresses the raylets on this machine were started with (Ray's find_gcs_addresses): from /proc
    where there is one (a process's 15-character name first, the command line only of a raylet), else through
    psutil."""
    found: set[str] = set()
    for cmdline in _raylet_cmdlines():
        for arg in (a for args in cmdline for a in args.split(" ")):
            if arg.startswith("--gcs-address=") and arg.split("=", 1)[1] not in ("", "None"):
                found.add(arg.split("=", 1)[1])
    return sorted(f"127.0.0.1:{a.rsplit(':', 1)[1]}" for a in found)


def _raylet_cmdlines() -> Iterator[list[str]]:
    if not os.path.isdir("/proc/self"):
        import psutil

        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
            except psutil.Error:
                continue
            if cmdline and "raylet" in os.path.basename(cmdline[0]):
                yield cmdline
        return
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/comm", "rb") as f:
                if b"raylet" not in f.read():
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:  # gone, or not ours to read
            continue
        if cmdline and "raylet" in os.path.basename(cmdline[0]):
            yield cmdline


def candidates(host: str) -> list[str]:
    """Where the GCS of a dashboard on ``host`` may listen: host:6379, then (for a local dashboard) every GCS
    of this machine's raylets."""
    out = [f"{host}:6379"]
    if host in ("127.0.0.1", "localhost", "::1") or host == socket.gethostbyname(socket.gethostname()):
        out += local_gcs_addresses()
    return list(dict.fromkeys(out))


def find_gcs_for_dashboard(
    dashboard: str, timeout_s: float, authorization: str | None = RAY_DEFAULT
) -> str | None:
    """The GCS whose dashboard is ``dashboard``: the first candidate (see candidates) that reports it."""
    parts = urlsplit(dashboard)
    host, port = parts.hostname or "127.0.0.1", parts.port
    for candidate in candidates(host):
        reported = reported_dashboard(candidate, timeout_s, authorization)
        if reported and urlsplit(reported).port == port:
            return candidate
    return None


@dataclass(frozen=True)
class GcsLookup:
    """The two questions ray-mcp asks about GCSes: where a GCS's dashboard is (to resolve a GCS address), and
    which GCS serves a dashboard (for the GCS's own facts, when only the dashboard was given). build_server
    takes another one, or None for a server that never looks for a GCS (tests replaying recorded answers).

    ``authorization`` is the cluster's own credentials (see open_channel); each connection asks with its own.
    Both calls block: run them in a worker thread.
    """

    authorization: str | None = RAY_DEFAULT

    def with_authorization(self, authorization: str | None) -> GcsLookup:
        return replace(self, authorization=authorization)

    def dashboard_of(self, gcs_address: str, timeout_s: float) -> str | None:
        return reported_dashboard(gcs_address, timeout_s, self.authorization)

    def gcs_of(self, dashboard: str, timeout_s: float) -> str | None:
        return find_gcs_for_dashboard(dashboard, timeout_s, self.authorization)

    def channel(self, gcs_address: str, authorization: str | None) -> Any:
        """The channel a cluster's Gcs sends its calls on (open_channel; a test may wrap it to count them)."""
        return open_channel(gcs_address, authorization)


GCS_LOOKUP = GcsLookup()


# ---- the GCS of one cluster ----


class Gcs:
    """The GCS of one cluster: its address (given, or found once from the dashboard) and one channel to it,
    reused by every call. Each read raises our errors (errors.gcs_errors); the first sentence of a message
    says why the GCS's facts are unknown, for answers that go on without them."""

    def __init__(
        self,
        dashboard: str,
        *,
        address: str | None,
        lookup: GcsLookup | None,
        authorization: str | None,
        timeout_s: float,
        out_of_reach: str | None = None,
    ) -> None:
        self.dashboard_url = dashboard
        self.address = address  # known for embedded clusters and GCS addresses; else found by ``lookup``
        # why no GCS can be reached from here at all (a Kubernetes service proxy), told instead of looking
        self.out_of_reach = out_of_reach
        self.timeout_s = timeout_s
        self._lookup = lookup
        self._authorization = authorization
        self._channel: Any = None
        self._lock = threading.Lock()  # the channel is made in a worker thread: by one of them
        self._missed_at = -GCS_RETRY_S

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    async def call(self, what: str, read: Callable[[Any], T], *, key: Hashable | None = None) -> T:
        """``read(channel)`` in a worker thread, its failures mapped onto our errors. A read (``key`` names it)
        is made once per call (sources/scope.py); a call without a key is a write, after which the call reads
        afresh."""
        if key is not None:
            return await scope.shared(("GCS", self.dashboard_url, key), lambda: self._in_thread(what, read))
        scope.fresh()
        try:
            return await self._in_thread(what, read)
        finally:
            scope.fresh()

    async def _in_thread(self, what: str, read: Callable[[Any], T]) -> T:
        return await anyio.to_thread.run_sync(self._call, what, read)

    async def connect(self) -> None:
        """Find the GCS and connect to it now (at start-up), so the first call that needs it does not pay for
        it; a GCS out of reach is left for the calls to report."""

        def connect() -> None:
            with contextlib.suppress(Exception):
                channel = self._open("connecting at start-up")
                grpc.channel_ready_future(channel).result(timeout=min(self.timeout_s, LOOKUP_TIMEOUT_S))

        await anyio.to_thread.run_sync(connect)

    async def known_address(self) -> str | None:
        """This cluster's GCS address: given, or found from the dashboard (once; in a worker thread), else None."""

        def find() -> str | None:
            with self._lock:
                return self._resolve()

        return await anyio.to_thread.run_sync(find)

    def _resolve(self) -> str | None:
        """The address, looked up from the dashboard when not given (the caller holds the lock)."""
        # A dashboard reached alone (a port-forward, a Kubernetes service proxy) has a GCS this machine cannot
        # reach: its lookup (up to LOOKUP_TIMEOUT_S a candidate) is asked again only after GCS_RETRY_S.
        lookup = self._lookup
        if self.address is None and lookup is not None and time.monotonic() - self._missed_at >= GCS_RETRY_S:
            self.address = lookup.gcs_of(self.dashboard_url, min(self.timeout_s, LOOKUP_TIMEOUT_S))
            if self.address is None:
                self._missed_at = time.monotonic()
        return self.address

    def _call(self, what: str, read: Callable[[Any], T]) -> T:
        channel = self._open(what)
        with gcs_errors(str(self.address), what, self.timeout_s):
            return read(channel)

    def _open(self, what: str) -> Any:
        with self._lock:
            if self._channel is not None:
                return self._channel
            lookup = self._lookup
            self._resolve()
            if self.address is None and self.out_of_reach:
                raise ClusterUnavailable(self.out_of_reach.format(what=what))
            if self.address is None:
                raise ClusterUnavailable(
                    f"No GCS found for the dashboard at {self.dashboard_url}: it is reached alone, or its GCS is "
                    f"not at host:6379. ray-mcp needs it for {what}: start ray-mcp with the GCS address "
                    "(--address host:6379) where this machine can reach it."
                )
            opener = lookup.channel if lookup is not None else open_channel
            self._channel = opener(self.address, self._authorization)
            return self._channel

    async def placement_group_table(self) -> list[dict[str, str]]:
        """Every placement group's id, name, state, creator job and strategy, in one call: the State API leaves
        strategies out, and counts per state cost it one conversion of every group each."""

        def read(channel: Any) -> list[dict[str, str]]:
            stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(channel)
            request = gcs_service_pb2.GetAllPlacementGroupRequest()  # type: ignore[attr-defined]
            reply = stub.GetAllPlacementGroup(request, timeout=self.timeout_s)
            return [
                {
                    "placement_group_id": d.placement_group_id.hex(),
                    "name": d.name,
                    "state": _PG_STATE_NAME(d.state),
                    "creator_job_id": d.creator_job_id.hex(),
                    "strategy": _STRATEGY_NAME(d.strategy),
                }
                for d in reply.placement_group_table_data
            ]

        return await self.call("the placement group table", read, key="placement_group_table")

    async def nodes(self) -> list[Node]:
        """Every node's basic fields (records.NodeBasic, but for a dead node's state_message) from the GCS's node
        table, the table the State API lists them from, in its form and order."""

        def read(channel: Any) -> list[Node]:
            stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
            reply = stub.GetAllNodeInfo(gcs_service_pb2.GetAllNodeInfoRequest(), timeout=self.timeout_s)  # type: ignore[attr-defined]
            rows: list[Node] = []
            for n in sorted(reply.node_info_list, key=lambda n: n.node_id.hex()):  # the State API's order
                rows.append(
                    Node(
                        node_id=n.node_id.hex(),
                        node_ip=n.node_manager_address,
                        is_head_node=n.is_head_node,
                        state=_NODE_STATE_NAME(n.state),
                        node_name=n.node_name,
                        resources_total=dict(n.resources_total),
                        labels=dict(n.labels),
                    )
                )
            return rows

        return await self.call("the node table", read, key="nodes")

    async def available_resources(self) -> dict[str, dict[str, float]]:
        """What each alive node has free, by node id (the GCS's view, synced from the raylets: what the
        autoscaler's per-node report is made from). A resource with nothing free is left out by Ray."""

        def read(channel: Any) -> dict[str, dict[str, float]]:
            stub = gcs_service_pb2_grpc.NodeResourceInfoGcsServiceStub(channel)
            request = gcs_service_pb2.GetAllAvailableResourcesRequest()  # type: ignore[attr-defined]
            reply = stub.GetAllAvailableResources(request, timeout=self.timeout_s)
            return {r.node_id.hex(): dict(r.resources_available) for r in reply.resources_list}

        return await self.call("the nodes' free resources", read, key="available_resources")

    async def job_actors(self, job_id: str, *, limit: int) -> list[dict[str, Any]]:
        """One job's actors from the GCS actor table: who owns each (the worker that created it), its worker,
        and the resource ids Ray assigned it (``resource_mapping``: GPU ids, kept after the actor died). The
        State API has none of these."""

        def read(channel: Any) -> list[dict[str, Any]]:
            stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
            request = gcs_service_pb2.GetAllActorInfoRequest(limit=limit)  # type: ignore[attr-defined]
            request.filters.job_id = bytes.fromhex(job_id)
            reply = stub.GetAllActorInfo(request, timeout=self.timeout_s)
            return [
                {
                    "actor_id": a.actor_id.hex(),
                    "owner_worker_id": a.owner_address.worker_id.hex(),
                    "worker_id": a.address.worker_id.hex(),
                    "used_resources": {
                        m.name: {
                            "resourceSlots": [
                                {"slot": str(r.index), "allocation": r.quantity} for r in m.resource_ids
                            ]
                        }
                        for m in a.resource_mapping
                    },
                }
                for a in reply.actor_table_data
            ]

        return await self.call(f"the actor table of job {job_id}", read, key=("job_actors", job_id, limit))

    async def actor_counts(self, filters: Sequence[tuple[str, str, str]]) -> dict[str, dict[str, int]]:
        """How many actors of each class are in each state, among those that pass ``=`` filters on
        ``GCS_ACTOR_FILTERS``: the GCS's actor table read as the State API reads it (the same request, the job,
        state and actor id filtered at the source), counted here, so a list that shows a page of its actors does
        not have the dashboard convert and send every one of them."""
        wanted = {key: value for key, _predicate, value in filters}
        if set(wanted) - GCS_ACTOR_FILTERS or any(p != "=" for _k, p, _v in filters):
            raise ValueError(f"the GCS filters actors only by {sorted(GCS_ACTOR_FILTERS)} (=): {filters}")

        def read(channel: Any) -> dict[str, dict[str, int]]:
            stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
            request = gcs_service_pb2.GetAllActorInfoRequest(limit=STATE_API_MAX_ROWS)  # type: ignore[attr-defined]
            if "actor_id" in wanted:
                request.filters.actor_id = bytes.fromhex(wanted["actor_id"])
            if "job_id" in wanted:
                request.filters.job_id = bytes.fromhex(wanted["job_id"])
            if "state" in wanted:
                request.filters.state = _ACTOR_STATE_VALUE(wanted["state"].upper())
            reply = stub.GetAllActorInfo(request, timeout=self.timeout_s)
            counts: dict[str, dict[str, int]] = {}
            for a in reply.actor_table_data:
                if "class_name" in wanted and a.class_name != wanted["class_name"]:
                    continue
                by_state = counts.setdefault(a.class_name, {})
                state = _ACTOR_STATE_NAME(a.state)
                by_state[state] = by_state.get(state, 0) + 1
            return counts

        key = ("actor_counts", tuple(sorted(wanted.items())))
        return await self.call("the actor table", read, key=key)

    async def stored_task_count(self) -> int:
        """How many task attempts the GCS holds. The State API reads at most 10,000 of them and, for tasks, does
        not say how many it left out; the GCS's own count does."""

        def read(channel: Any) -> int:
            stub = gcs_service_pb2_grpc.TaskInfoGcsServiceStub(channel)
            request = gcs_service_pb2.GetTaskEventsRequest(limit=1)  # type: ignore[attr-defined]
            return int(stub.GetTaskEvents(request, timeout=self.timeout_s).num_total_stored)

        return await self.call("the task count", read, key="stored_task_count")

    async def kill_actor(self, actor_id: str, *, no_restart: bool) -> None:
        """Force-kill an actor (KillActorViaGcs): what ray.kill does, without a driver."""

        def kill(channel: Any) -> None:
            stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
            request = gcs_service_pb2.KillActorViaGcsRequest(  # type: ignore[attr-defined]
                actor_id=bytes.fromhex(actor_id), force_kill=True, no_restart=no_restart
            )
            reply = stub.KillActorViaGcs(request, timeout=self.timeout_s)
            if reply.status.code != 0:
                raise RayRequestFailed(
                    f"The GCS at {self.address} refused to kill actor {actor_id}: {reply.status.message}"
                )

        await self.call(f"the kill of actor {actor_id}", kill)
