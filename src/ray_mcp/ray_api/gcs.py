"""Ray's GCS over gRPC: where the dashboard listens, killing an actor, and the actor, placement group and
unfinished-task tables as the State API's rows (one call each, converted here, only what a page needs).

Every function here imports Ray (slow, through ray_import's one lock) and blocks: run them in a worker
thread, after ``await ray_import.ensure("gcs")`` so that waiting for the import holds no thread. Channels come from Ray's own
``init_grpc_channel``, which adds TLS (RAY_USE_TLS) and token authentication when the cluster uses them.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from ray_mcp.errors import RayRequestFailed
from ray_mcp.ray_api import gcs_h2, ray_import

RAY_DEFAULT = "ray-default"  # open_channel: let Ray decide the credentials (its process-wide token mode)


def open_channel(gcs_address: str, authorization: str | None = RAY_DEFAULT) -> Any:
    """A synchronous gRPC channel to the GCS at ``host:port``.

    ``authorization`` is this cluster's own ``Authorization`` value (``Bearer <token>``), or None for none:
    it rides every call as metadata. Ray's ``init_grpc_channel`` would add this *process's* Ray token to every
    channel in token mode (RAY_AUTH_MODE=token), so then the channel is built without Ray's interceptor, with
    the same TLS (RAY_USE_TLS). ``RAY_DEFAULT`` keeps Ray's behaviour (the GCS lookup of a configured address).
    """
    ray_import.load_sync("gcs")
    from ray._private.grpc_utils import init_grpc_channel

    if authorization == RAY_DEFAULT:
        return init_grpc_channel(gcs_address, asynchronous=False)
    import grpc
    from ray._private.authentication import authentication_utils

    if authentication_utils.is_token_auth_enabled():
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            from ray._common.tls_utils import load_certs_from_env

            chain, key, ca = load_certs_from_env()
            tls = grpc.ssl_channel_credentials(certificate_chain=chain, private_key=key, root_certificates=ca)
            channel = grpc.secure_channel(gcs_address, tls)
        else:
            channel = grpc.insecure_channel(gcs_address)
    else:
        channel = init_grpc_channel(gcs_address, asynchronous=False)
    if authorization:
        channel = grpc.intercept_channel(channel, _metadata_interceptor(("authorization", authorization)))
    return channel


def _metadata_interceptor(*pairs: tuple[str, str]) -> Any:
    """A gRPC client interceptor that adds ``pairs`` to the metadata of every call."""
    import collections

    import grpc

    class Details(
        collections.namedtuple(
            "Details", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
        ),
        grpc.ClientCallDetails,
    ):
        pass

    class AddMetadata(
        grpc.UnaryUnaryClientInterceptor,
        grpc.UnaryStreamClientInterceptor,
        grpc.StreamUnaryClientInterceptor,
        grpc.StreamStreamClientInterceptor,
    ):
        def _details(self, d: Any) -> Any:
            metadata = [*(d.metadata or []), *pairs]
            return Details(d.method, d.timeout, metadata, d.credentials, d.wait_for_ready, d.compression)

        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            return continuation(self._details(details), request)

        def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
            return continuation(self._details(details), request)

        def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
            return continuation(self._details(details), requests)

        def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
            return continuation(self._details(details), requests)

    return AddMetadata()


def reported_dashboard(
    gcs_address: str, timeout_s: float, authorization: str | None = RAY_DEFAULT
) -> str | None:
    """Where the GCS says its dashboard listens (Ray records it in its internal KV), as a URL; None if the GCS
    does not answer or has no dashboard. ``authorization``: see open_channel."""
    ray_import.load_sync("gcs")
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = open_channel(gcs_address, authorization)
    try:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        kv_get = gcs_service_pb2.InternalKVGetRequest  # type: ignore[attr-defined]
        reply = stub.InternalKVGet(kv_get(key=b"dashboard", namespace=b"dashboard"), timeout=timeout_s)
    except grpc.RpcError:
        return None
    finally:
        channel.close()
    return gcs_h2.dashboard_url(reply.value.decode())


def find_gcs_for_dashboard(dashboard_url: str, timeout_s: float) -> str | None:
    """The GCS whose dashboard is ``dashboard_url``: try host:6379, then (for a local dashboard) every GCS
    process on this machine, and keep the one that reports this dashboard."""
    parts = urlsplit(dashboard_url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    for candidate in gcs_h2.candidates(host):
        reported = reported_dashboard(candidate, timeout_s)
        if reported and urlsplit(reported).port == port:
            return candidate
    return None


@dataclass(frozen=True)
class GcsLookup:
    """The two questions ray-mcp asks about GCSes: where a GCS's dashboard is (to resolve a GCS address), and
    which GCS serves a dashboard (for the gRPC calls, when only the dashboard was given). build_server takes
    another one, or None for a server that never looks for a GCS (tests replaying recorded answers).

    ``authorization`` is the cluster's own credentials (see open_channel); each connection asks with its own.
    """

    authorization: str | None = RAY_DEFAULT

    def with_authorization(self, authorization: str | None) -> GcsLookup:
        return replace(self, authorization=authorization)

    def dashboard_of(self, gcs_address: str, timeout_s: float) -> str | None:
        return reported_dashboard(gcs_address, timeout_s, self.authorization)

    def gcs_of(self, dashboard_url: str, timeout_s: float) -> str | None:
        return find_gcs_for_dashboard(dashboard_url, timeout_s)

    async def dashboard_of_without_ray(self, gcs_address: str, timeout_s: float) -> str | None:
        """dashboard_of's answer asked without Ray's modules (gcs_h2), with the cluster's own credentials; None
        when it cannot tell (then dashboard_of, through Ray, decides)."""
        try:
            return await gcs_h2.reported_dashboard(gcs_address, self._own_authorization(), timeout_s)
        except gcs_h2.GrpcFailed:
            return None

    async def gcs_of_without_ray(self, dashboard_url: str, timeout_s: float) -> str | None:
        """gcs_of's answer asked without Ray's modules (gcs_h2), with the cluster's own credentials; None when
        it cannot tell (then gcs_of, through Ray, decides)."""
        return await gcs_h2.find_gcs_for_dashboard(dashboard_url, self._own_authorization(), timeout_s)

    def _own_authorization(self) -> str | None:
        """What gcs_h2 sends: the cluster's own credentials, never Ray's process token (RAY_DEFAULT)."""
        return None if self.authorization == RAY_DEFAULT else self.authorization


GCS_LOOKUP = GcsLookup()


def placement_group_table(channel: Any, timeout_s: float) -> list[dict[str, str]]:
    """Every placement group's id, name, state, creator job and strategy, in one call (the State API omits the
    strategy and has no per-state summary)."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(channel)
    request = gcs_service_pb2.GetAllPlacementGroupRequest()  # type: ignore[attr-defined]
    return placement_group_table_rows(stub.GetAllPlacementGroup(request, timeout=timeout_s))


def placement_group_table_rows(reply: Any) -> list[dict[str, str]]:
    """placement_group_table's rows from a GetAllPlacementGroupReply (gcs_h2 reads the same from its bytes)."""
    ray_import.load_sync("gcs")
    from ray.core.generated import common_pb2, gcs_pb2

    state_name = gcs_pb2.PlacementGroupTableData.PlacementGroupState.Name  # type: ignore[attr-defined]
    return [
        {
            "placement_group_id": d.placement_group_id.hex(),
            "name": d.name,
            "state": state_name(d.state),
            "creator_job_id": d.creator_job_id.hex(),
            "strategy": common_pb2.PlacementStrategy.Name(d.strategy),  # type: ignore[attr-defined]
        }
        for d in reply.placement_group_table_data
    ]


# The columns of the State API's placement group rows (PlacementGroupState, detail=1), and the ids it prints in hex.
PG_COLUMNS = ("placement_group_id", "name", "creator_job_id", "state", "bundles", "is_detached", "stats",
              "topology_strategy", "topology_assignments")  # fmt: skip
_PG_HEX_KEYS = ("placement_group_id", "creator_job_id", "node_id")


# The columns of the State API's actor rows (ActorState, detail=1), and the ids it prints in hex.
ACTOR_COLUMNS = ("actor_id", "class_name", "state", "job_id", "name", "node_id", "pid", "ray_namespace",
                 "serialized_runtime_env", "required_resources", "death_cause", "is_detached", "placement_group_id",
                 "repr_name", "num_restarts", "num_restarts_due_to_lineage_reconstruction",
                 "num_restarts_due_to_node_preemption", "call_site", "label_selector", "fallback_strategy")  # fmt: skip
_ACTOR_HEX_KEYS = ("actor_id", "owner_id", "job_id", "node_id", "placement_group_id")


def actor_rows(channel: Any, timeout_s: float) -> list[dict[str, Any]]:
    """Every actor as the State API's detail rows, sorted by id as it sorts them: the conversion Ray's dashboard
    makes, from the same GCS call (~5 ms at 400 actors), without its filtering and JSON (~0.1 s at 400)."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
    reply = stub.GetAllActorInfo(gcs_service_pb2.GetAllActorInfoRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
    rows = [_state_row(m, ACTOR_COLUMNS, _ACTOR_HEX_KEYS) for m in reply.actor_table_data]
    rows.sort(key=lambda r: str(r.get("actor_id")))
    return rows


# The filterable columns of list_actors, each read from ActorTableData as the State API filters it (an id in
# hex; None for a field the message does not hold, which the State API's filter never matches, = or !=).
_ACTOR_FILTER_COLUMNS: dict[str, Any] = {
    "state": lambda a, names: names(a.state),
    "class_name": lambda a, _: a.class_name,
    "name": lambda a, _: a.name,
    "ray_namespace": lambda a, _: a.ray_namespace,
    "job_id": lambda a, _: a.job_id.hex(),
    "node_id": lambda a, _: a.node_id.hex() if a.HasField("node_id") else None,
    "placement_group_id": lambda a, _: (
        a.placement_group_id.hex() if a.HasField("placement_group_id") else None
    ),
}


def _matching(
    messages: Any, columns: dict[str, Any], names: Any, filters: list[tuple[str, str, str]]
) -> list[Any]:
    """The messages of a GCS table that the filters keep, as the State API filters its rows: each filter's
    column read from the message (``columns``); a column the message lacks (None) matches no filter."""
    from ray_mcp.ray_api.query import matches

    keys = {key for key, _op, _value in filters}

    def row(message: Any) -> dict[str, Any]:
        values = {key: columns[key](message, names) for key in keys}
        return {key: value for key, value in values.items() if value is not None}

    return [m for m in messages if matches(row(m), filters)]


def actor_page(
    channel: Any, filters: list[tuple[str, str, str]], limit: int, timeout_s: float
) -> tuple[int, int, list[dict[str, Any]], dict[str, dict[str, int]]] | None:
    """One page of actors as the State API lists them, from the GCS's actor table in one call: (total, matched,
    the first ``limit`` matching rows by id, counts per class and state of every match). Only the page is
    converted to rows (~0.2 ms an actor). None when a filter is one this cannot read from the table."""
    if any(key not in _ACTOR_FILTER_COLUMNS for key, _op, _value in filters):
        return None
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    names = gcs_pb2.ActorTableData.ActorState.Name  # type: ignore[attr-defined]
    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
    reply = stub.GetAllActorInfo(gcs_service_pb2.GetAllActorInfoRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
    hits = _matching(reply.actor_table_data, _ACTOR_FILTER_COLUMNS, names, filters)
    counts: dict[str, dict[str, int]] = {}
    for a in hits:
        per_state = counts.setdefault(a.class_name, {})
        state = names(a.state)
        per_state[state] = per_state.get(state, 0) + 1
    hits.sort(key=lambda a: a.actor_id.hex())
    rows = [_state_row(a, ACTOR_COLUMNS, _ACTOR_HEX_KEYS) for a in hits[: max(0, limit)]]
    return len(reply.actor_table_data), len(hits), rows, counts


# Rows converted before, by the exact bytes of their message: a dead actor or a created or removed group does
# not change, and converting it (MessageToDict, ~0.2 ms) is what a read of a big table costs. Cleared when full.
_ROWS: dict[bytes, dict[str, Any]] = {}
ROW_CACHE_SIZE = 10_000


def _state_row(message: Any, columns: tuple[str, ...], hex_keys: tuple[str, ...]) -> dict[str, Any]:
    """One GCS message as the State API's row: Ray's MessageToDict options, ids in hex, only its columns. A new
    dict (callers may add keys); its nested values are shared with the cache: read them, never change them."""
    from google.protobuf.json_format import MessageToDict

    key = b"%d:" % len(columns) + message.SerializeToString(deterministic=True)
    row = _ROWS.get(key)
    if row is None:
        raw = MessageToDict(
            message, use_integers_for_enums=False, preserving_proto_field_name=True,
            always_print_fields_with_no_presence=True,
        )  # fmt: skip
        row = _hex_ids(
            {key: raw.get(key) for key in columns}, hex_keys
        )  # absent: None, as the State API says
        if len(_ROWS) >= ROW_CACHE_SIZE:
            _ROWS.clear()
        _ROWS[key] = row
    return dict(row)


WORKER_COLUMNS = ("worker_id", "is_alive", "worker_type", "exit_type", "node_id", "ip", "pid", "exit_detail",
                  "worker_launch_time_ms", "worker_launched_time_ms", "start_time_ms", "end_time_ms",
                  "debugger_port", "num_paused_threads")  # fmt: skip
_WORKER_TIMES = ("start_time_ms", "end_time_ms", "worker_launch_time_ms", "worker_launched_time_ms")


def dead_worker_rows(channel: Any, timeout_s: float, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The dead workers as the State API's detail rows (its conversion: ids from the worker's address, times as
    numbers), the first ``limit`` by id, and how many are dead in all. One call; the State API converts every
    worker the GCS holds for the same answer."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.WorkerInfoGcsServiceStub(channel)
    reply = stub.GetAllWorkerInfo(gcs_service_pb2.GetAllWorkerInfoRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
    dead = sorted(
        (w for w in reply.worker_table_data if not w.is_alive), key=lambda w: w.worker_address.worker_id.hex()
    )
    rows = []
    for w in dead[: max(0, limit)]:
        raw = _state_row(w, ("worker_address", *WORKER_COLUMNS), ("worker_id", "node_id"))
        address = raw.pop("worker_address") or {}
        raw["worker_id"], raw["node_id"], raw["ip"] = (
            address.get("worker_id"), address.get("node_id"), address.get("ip_address"),
        )  # fmt: skip
        for key in _WORKER_TIMES:
            raw[key] = int(raw[key]) if raw.get(key) is not None else None
        rows.append(raw)
    return rows, len(dead)


_PG_FILTER_COLUMNS: dict[str, Any] = {
    "placement_group_id": lambda p, _: p.placement_group_id.hex(),
    "name": lambda p, _: p.name,
    "state": lambda p, names: names(p.state),
    "creator_job_id": lambda p, _: p.creator_job_id.hex(),
}


def placement_group_page(
    channel: Any, filters: list[tuple[str, str, str]], limit: int, timeout_s: float
) -> tuple[int, int, list[dict[str, Any]], dict[str, int]] | None:
    """One page of placement groups as the State API lists them (with strategies), from the GCS's table in
    one call: (total, matched, the first ``limit`` matching rows by id, matches per state). Only the page is
    converted. None when a filter is one this cannot read from the table."""
    if any(key not in _PG_FILTER_COLUMNS for key, _op, _value in filters):
        return None
    ray_import.load_sync("gcs")
    from ray.core.generated import common_pb2, gcs_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    names = gcs_pb2.PlacementGroupTableData.PlacementGroupState.Name  # type: ignore[attr-defined]
    stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(channel)
    reply = stub.GetAllPlacementGroup(gcs_service_pb2.GetAllPlacementGroupRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
    hits = _matching(reply.placement_group_table_data, _PG_FILTER_COLUMNS, names, filters)
    by_state: dict[str, int] = {}
    for p in hits:
        by_state[names(p.state)] = by_state.get(names(p.state), 0) + 1
    hits.sort(key=lambda p: p.placement_group_id.hex())
    strategy_name = common_pb2.PlacementStrategy.Name  # type: ignore[attr-defined]
    rows = []
    for p in hits[: max(0, limit)]:
        row = _state_row(p, PG_COLUMNS, _PG_HEX_KEYS)
        row["strategy"] = strategy_name(p.strategy)
        rows.append(row)
    return int(reply.total), len(hits), rows, by_state


def placement_group_rows(channel: Any, timeout_s: float) -> list[dict[str, Any]]:
    """Every placement group as the State API's detail rows (the same conversion Ray's dashboard makes, from
    the same GCS call), plus its ``strategy``, which the State API leaves out. One gRPC call (~15 ms at 1,000
    groups) instead of the dashboard's conversion, filtering and JSON of every group (~0.7 s at 1,000)."""
    ray_import.load_sync("gcs")
    from ray.core.generated import common_pb2, gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(channel)
    request = gcs_service_pb2.GetAllPlacementGroupRequest()  # type: ignore[attr-defined]
    reply = stub.GetAllPlacementGroup(request, timeout=timeout_s)
    strategy_name = common_pb2.PlacementStrategy.Name  # type: ignore[attr-defined]
    rows = []
    for message in reply.placement_group_table_data:
        row = _state_row(message, PG_COLUMNS, _PG_HEX_KEYS)
        row["strategy"] = strategy_name(message.strategy)
        rows.append(row)
    rows.sort(key=lambda r: str(r.get("placement_group_id")))  # the State API's order
    return rows


def _hex_ids(value: Any, keys: tuple[str, ...]) -> Any:
    """The id fields of a converted message (base64 in JSON) in hex, at any depth, as Ray's dashboard does."""
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in keys and isinstance(v, str) else _hex_ids(v, keys)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v, keys) for v in value]
    return value


def unfinished_task_rows(channel: Any, timeout_s: float, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The task attempts that did not finish (failed, running, waiting), as the State API's detail rows (Ray's
    own conversion), sorted by id as it sorts them, and how many more the GCS left out past ``limit``. One scan
    of the GCS's task events where the State API takes one per state."""
    ray_import.load_sync("state")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    from ray.util.state.common import TaskState, filter_fields, protobuf_to_task_state_dict

    request = gcs_service_pb2.GetTaskEventsRequest(limit=limit)  # type: ignore[attr-defined]
    unfinished = request.filters.state_filters.add()
    unfinished.state, unfinished.predicate = "FINISHED", gcs_service_pb2.FilterPredicate.NOT_EQUAL  # type: ignore[attr-defined]
    request.filters.exclude_driver = True  # as the State API lists them
    reply = gcs_service_pb2_grpc.TaskInfoGcsServiceStub(channel).GetTaskEvents(request, timeout=timeout_s)
    if reply.status.code != 0:
        raise RayRequestFailed(f"The GCS did not list the tasks: {reply.status.message}")
    rows = [filter_fields(protobuf_to_task_state_dict(m), TaskState, True) for m in reply.events_by_task]  # type: ignore[arg-type]
    rows.sort(key=lambda r: str(r.get("task_id")))
    return rows, int(reply.num_truncated)


def stored_task_count(channel: Any, timeout_s: float) -> int:
    """How many task attempts the GCS holds. The State API reads at most 10,000 of them and, for tasks, does
    not say how many it left out; the GCS's own count does."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.TaskInfoGcsServiceStub(channel)
    reply = stub.GetTaskEvents(gcs_service_pb2.GetTaskEventsRequest(limit=1), timeout=timeout_s)  # type: ignore[attr-defined]
    return int(reply.num_total_stored)


def kill_actor(channel: Any, gcs_address: str, actor_id: str, *, no_restart: bool, timeout_s: float) -> None:
    """Force-kill an actor (KillActorViaGcs): what ray.kill does, without a driver."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
    request = gcs_service_pb2.KillActorViaGcsRequest(  # type: ignore[attr-defined]
        actor_id=bytes.fromhex(actor_id), force_kill=True, no_restart=no_restart
    )
    try:
        reply = stub.KillActorViaGcs(request, timeout=timeout_s)
    except Exception as exc:  # grpc.RpcError: the GCS did not take the request
        raise RayRequestFailed(f"The GCS at {gcs_address} did not kill actor {actor_id}: {exc}") from exc
    if reply.status.code != 0:
        raise RayRequestFailed(
            f"The GCS at {gcs_address} refused to kill actor {actor_id}: {reply.status.message}"
        )


def job_actor_table(channel: Any, job_id: str, *, limit: int, timeout_s: float) -> list[dict[str, Any]]:
    """One job's actors from the GCS actor table: who owns each (the worker that created it) and the resource
    ids Ray assigned it (``resource_mapping``: GPU ids, kept after the actor died). The State API has neither."""
    ray_import.load_sync("gcs")
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(channel)
    request = gcs_service_pb2.GetAllActorInfoRequest(limit=limit)  # type: ignore[attr-defined]
    request.filters.job_id = bytes.fromhex(job_id)
    return job_actor_table_rows(stub.GetAllActorInfo(request, timeout=timeout_s))


def job_actor_table_rows(reply: Any) -> list[dict[str, Any]]:
    """job_actor_table's rows from a GetAllActorInfoReply (gcs_h2 reads the same from its bytes)."""
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
