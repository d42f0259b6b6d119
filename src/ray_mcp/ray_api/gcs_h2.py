"""GCS reads without Ray's modules, for a server that has not imported Ray yet: the placement group table (ids,
names, states, creator jobs, strategies), one job's actors (owners, workers, assigned resource ids) and the
dashboard's address.

Ray's own path (gcs.py) imports ``ray``, grpc and the generated protobuf modules first: about 0.3 s of a
fresh server's first pg_status, where this path costs a few milliseconds. Each read is one unary gRPC call
over cleartext HTTP/2 (the ``h2`` state machine on an asyncio connection, on the event loop, no thread),
whose reply is read with a protobuf wire-format reader that knows only the fields read here (their numbers
are Ray's, checked against the installed descriptors by tests/test_gcs_h2.py).

It is used only where it asks exactly what Ray's channel would (``usable``): never with TLS (RAY_USE_TLS:
Ray's channel loads the certificates), and with the same ``authorization`` metadata as ``gcs.open_channel``
(the cluster's own, or none). Every failure raises ``GrpcFailed``: callers take Ray's path instead, so this
path can make an answer faster, never different or weaker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import struct
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio

# Replies over this size are not read here (Ray's channel takes over): 1,000 placement groups are ~0.3 MB.
MAX_REPLY_BYTES = 64 * 1024 * 1024
READ_CHUNK = 256 * 1024

# Ray's enums (common.proto PlacementStrategy, gcs.proto PlacementGroupTableData.PlacementGroupState), by number.
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
PG_STATES = ("PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING")

PG_TABLE_METHOD = "/ray.rpc.PlacementGroupInfoGcsService/GetAllPlacementGroup"
KV_GET_METHOD = "/ray.rpc.InternalKVGcsService/InternalKVGet"
ACTOR_TABLE_METHOD = "/ray.rpc.ActorInfoGcsService/GetAllActorInfo"


class GrpcFailed(Exception):
    """A read here did not give an answer (connection, protocol, gRPC status, or a reply it cannot read)."""


def usable() -> bool:
    """Whether Ray's channel would be a plain one here: TLS (RAY_USE_TLS) is Ray's to set up."""
    return os.environ.get("RAY_USE_TLS", "0").strip().lower() not in ("1", "true", "yes")


# ---- protobuf wire format: only what the replies read here need ----


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf) or shift > 63:
            raise GrpcFailed("a truncated or malformed varint in the GCS's reply")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one encoded message, in order: an int for varints, bytes for the others
    (length-delimited, fixed64, fixed32). Groups (deprecated wire types 3 and 4) are refused."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, i = _varint(buf, i)
            else:
                size = 8 if wire == 1 else 4
            if i + size > n:
                raise GrpcFailed("a truncated field in the GCS's reply")
            value, i = buf[i : i + size], i + size
        else:
            raise GrpcFailed(f"an unexpected wire type {wire} in the GCS's reply")
        if number == 0:
            raise GrpcFailed("a field numbered 0 in the GCS's reply")
        yield number, value


def _bytes_field(number: int, value: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(value)) + value


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b, value = value & 0x7F, value >> 7
        out.append(b | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _name(names: tuple[str, ...], number: int) -> str:
    return names[number] if 0 <= number < len(names) else str(number)


def _check_status(value: int | bytes) -> None:
    """A reply's GcsStatus (field 1 of every GCS reply): code 0 is OK."""
    if not isinstance(value, bytes):
        raise GrpcFailed("a malformed status in the GCS's reply")
    code, message = 0, b""
    for number, v in fields(value):
        if number == 1 and isinstance(v, int):
            code = v
        elif number == 2 and isinstance(v, bytes):
            message = v
    if code:
        raise GrpcFailed(f"the GCS answered status {code}: {message.decode(errors='replace')[:200]}")


def placement_group_rows(reply: bytes) -> list[dict[str, str]]:
    """GetAllPlacementGroupReply as gcs.placement_group_table's rows (id, name, state, creator job, strategy)."""
    rows = []
    for number, value in fields(reply):
        if number == 1:
            _check_status(value)
        elif number == 2 and isinstance(value, bytes):
            row = {"placement_group_id": "", "name": "", "state": PG_STATES[0], "creator_job_id": "",
                   "strategy": STRATEGIES[0]}  # fmt: skip  # proto3: an absent field is its default
            for n, v in fields(value):
                if n == 1 and isinstance(v, bytes):
                    row["placement_group_id"] = v.hex()
                elif n == 2 and isinstance(v, bytes):
                    row["name"] = v.decode(errors="replace")
                elif n == 4 and isinstance(v, int):
                    row["strategy"] = _name(STRATEGIES, v)
                elif n == 5 and isinstance(v, int):
                    row["state"] = _name(PG_STATES, v)
                elif n == 6 and isinstance(v, bytes):
                    row["creator_job_id"] = v.hex()
            rows.append(row)
    return rows


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise GrpcFailed("a malformed message field in the GCS's reply")
    return value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _worker_id(address: bytes) -> str:
    """Address.worker_id (field 4), in hex."""
    return next((_message(v).hex() for n, v in fields(address) if n == 4), "")


def job_actor_rows(reply: bytes) -> list[dict[str, Any]]:
    """GetAllActorInfoReply as gcs.job_actor_table's rows: each actor's id, owner worker, worker and the
    resource ids Ray assigned it (ActorTableData fields 1, 10, 9 and 15)."""
    rows = []
    for number, value in fields(reply):
        if number == 1:
            _check_status(value)
        elif number == 2:
            row: dict[str, Any] = {
                "actor_id": "",
                "owner_worker_id": "",
                "worker_id": "",
                "used_resources": {},
            }
            for n, v in fields(_message(value)):
                if n == 1:
                    row["actor_id"] = _message(v).hex()
                elif n == 10:
                    row["owner_worker_id"] = _worker_id(_message(v))
                elif n == 9:
                    row["worker_id"] = _worker_id(_message(v))
                elif n == 15:
                    name, slots = "", []
                    for en, ev in fields(_message(v)):
                        if en == 1:
                            name = _message(ev).decode(errors="replace")
                        elif en == 2:
                            index, quantity = 0, 0.0
                            for rn, rv in fields(_message(ev)):
                                if rn == 1 and isinstance(rv, int):
                                    index = _int64(rv)
                                elif rn == 2 and isinstance(rv, bytes) and len(rv) == 8:
                                    (quantity,) = struct.unpack("<d", rv)
                            slots.append({"slot": str(index), "allocation": quantity})
                    row["used_resources"][name] = {
                        "resourceSlots": slots
                    }  # a repeated name: the last, as Ray's
            rows.append(row)
    return rows


def kv_value(reply: bytes) -> bytes:
    """InternalKVGetReply's value (b"" when the key is not set)."""
    value = b""
    for number, v in fields(reply):
        if number == 1:
            _check_status(v)
        elif number == 2 and isinstance(v, bytes):
            value = v
    return value


# ---- one unary gRPC call over cleartext HTTP/2 ----


async def unary(
    address: str, method: str, request: bytes, *, authorization: str | None, timeout_s: float
) -> bytes:
    """The reply message of one unary call to the gRPC server at ``host:port``."""
    if not usable():
        raise GrpcFailed("the cluster uses TLS (RAY_USE_TLS): Ray's channel sets it up")
    try:
        with anyio.fail_after(timeout_s):
            return await _unary(address, method, request, authorization, timeout_s)
    except GrpcFailed:
        raise
    except TimeoutError as exc:
        raise GrpcFailed(f"the GCS at {address} did not answer within {timeout_s:g} s") from exc
    except Exception as exc:  # connection errors, h2 protocol errors: Ray's channel decides instead
        raise GrpcFailed(f"{type(exc).__name__}: {exc}") from exc


async def _unary(
    address: str, method: str, request: bytes, authorization: str | None, timeout_s: float
) -> bytes:
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host.strip("[]"), int(port))
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        conn.initiate_connection()
        window = 16 * 1024 * 1024  # one reply of the size read here in a few round trips at most
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        conn.increment_flow_control_window(window)
        stream = conn.get_next_available_stream_id()
        headers = [
            (":method", "POST"), (":scheme", "http"), (":path", method), (":authority", address),
            ("content-type", "application/grpc"), ("te", "trailers"),
            ("grpc-timeout", f"{max(1, int(timeout_s * 1000))}m"),
            *([("authorization", authorization)] if authorization else []),
        ]  # fmt: skip
        conn.send_headers(stream, headers)
        conn.send_data(stream, b"\x00" + len(request).to_bytes(4, "big") + request, end_stream=True)
        writer.write(conn.data_to_send())
        await writer.drain()
        body = bytearray()
        status: dict[str, str] = {}
        while True:
            data = await reader.read(READ_CHUNK)
            if not data:
                raise GrpcFailed(f"the GCS at {address} closed the connection before its reply ended")
            ended = False
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                    got = {str(k): str(v) for k, v in event.headers}
                    if got.get(":status", "200") != "200":
                        raise GrpcFailed(f"the GCS at {address} answered HTTP {got[':status']}")
                    status.update({k: v for k, v in got.items() if k.startswith("grpc-")})
                elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                    body += event.data
                    if len(body) > MAX_REPLY_BYTES + 5:
                        raise GrpcFailed(f"the GCS's reply is over {MAX_REPLY_BYTES} bytes")
                    conn.acknowledge_received_data(event.flow_controlled_length, stream)
                elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                    ended = True
                elif isinstance(event, h2.events.StreamReset | h2.events.ConnectionTerminated):
                    raise GrpcFailed(f"the GCS at {address} reset the call ({event})")
            out = conn.data_to_send()
            if out:
                writer.write(out)
                await writer.drain()
            if ended:
                break
        code = status.get("grpc-status", "")
        if code != "0":
            message = status.get("grpc-message", "")[:200]
            raise GrpcFailed(f"the GCS at {address} answered gRPC status {code or 'none'} {message}".rstrip())
        if len(body) < 5 or body[0] != 0:
            raise GrpcFailed("the GCS's reply is not one uncompressed gRPC message")
        size = int.from_bytes(body[1:5], "big")
        if len(body) != 5 + size:
            raise GrpcFailed("the GCS's reply is not one whole gRPC message")
        return bytes(body[5:])
    finally:
        writer.close()
        with contextlib.suppress(Exception):  # closing a connection the server already dropped
            await writer.wait_closed()


# ---- the reads ----


async def placement_group_table(
    address: str, authorization: str | None, timeout_s: float
) -> list[dict[str, str]]:
    """Every placement group's id, name, state, creator job and strategy (gcs.placement_group_table's rows)."""
    reply = await unary(address, PG_TABLE_METHOD, b"", authorization=authorization, timeout_s=timeout_s)
    if len(reply) > 1024 * 1024:  # ~3,000 groups and more: read off the event loop
        return await anyio.to_thread.run_sync(placement_group_rows, reply)
    return placement_group_rows(reply)


async def job_actor_table(
    address: str, authorization: str | None, job_id: str, *, limit: int, timeout_s: float
) -> list[dict[str, Any]]:
    """One job's actors, as gcs.job_actor_table's rows (GetAllActorInfo, filtered by job, up to ``limit``)."""
    try:
        filters = _bytes_field(2, bytes.fromhex(job_id))  # Filters.job_id
    except ValueError as exc:
        raise GrpcFailed(f"not a job id in hex: {job_id[:40]!r}") from exc
    request = _encode_varint(2 << 3) + _encode_varint(limit) + _bytes_field(3, filters)  # limit, filters
    reply = await unary(
        address, ACTOR_TABLE_METHOD, request, authorization=authorization, timeout_s=timeout_s
    )
    if len(reply) > 1024 * 1024:
        return await anyio.to_thread.run_sync(job_actor_rows, reply)
    return job_actor_rows(reply)


async def reported_dashboard(address: str, authorization: str | None, timeout_s: float) -> str | None:
    """Where the GCS at ``address`` says its dashboard listens, as a URL (gcs.reported_dashboard)."""
    request = _bytes_field(1, b"dashboard") + _bytes_field(2, b"dashboard")
    value = kv_value(
        await unary(address, KV_GET_METHOD, request, authorization=authorization, timeout_s=timeout_s)
    )
    return dashboard_url(value.decode(errors="replace"))


def dashboard_url(recorded: str) -> str | None:
    """The GCS's KV value for the dashboard (``host:port``, or a URL) as a URL; None when it is not set."""
    if not recorded:
        return None
    return recorded if re.match(r"^https?://", recorded) else f"http://{recorded}"


def local_gcs_addresses() -> list[str]:
    """The GCS addresses the raylets on this machine were started with (Ray's find_gcs_addresses): from /proc
    where there is one (a process's 15-character name first, the command line only of a raylet: ~2 ms), else
    through psutil."""
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


async def find_gcs_for_dashboard(
    dashboard_url: str, authorization: str | None, timeout_s: float
) -> str | None:
    """The GCS whose dashboard is ``dashboard_url`` (gcs.find_gcs_for_dashboard's candidates: host:6379, then
    for a local dashboard every GCS of this machine's raylets), asked concurrently; None if none says so."""
    parts = urlsplit(dashboard_url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    asked = await anyio.to_thread.run_sync(candidates, host)  # a name lookup and a process scan

    found: list[str | None] = [None] * len(asked)

    async def ask(i: int, candidate: str) -> None:
        try:
            reported = await reported_dashboard(candidate, authorization, timeout_s)
        except GrpcFailed:
            return
        if reported and urlsplit(reported).port == port:
            found[i] = candidate

    async with anyio.create_task_group() as tg:
        for i, candidate in enumerate(asked):
            tg.start_soon(ask, i, candidate)
    return next((f for f in found if f), None)
