"""The object store answer (pure): references grouped by call site and owner, largest first; each node's
store use and spilling; leaks (references whose owner is dead or whose job finished)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import byte_size
from ray_mcp.limits import CALL_SITE_CHARS, STORE_NODES_NAMED, STORE_NODES_SHOWN
from ray_mcp.models.core import TERMINAL_JOB_STATUSES
from ray_mcp.shaping.common import to_number
from ray_mcp.shaping.nodes import summary_by_node
from ray_mcp.text import quoted, truncate_text

# A store this full evicts, spills and (past what spilling frees) fails puts with ObjectStoreFullError;
# Ray starts spilling at 80% (object_spilling_threshold).
STORE_NEAR_FULL = 0.8
STORE_CRITICAL = 0.9  # a store this full ranks higher: a watch of the cluster's health hears when it passes


def store_nodes(nodes: list[Mapping[str, Any]], summary: Mapping[str, Any]) -> list[models.StoreNode]:
    """Each alive node's store from its /nodes?view=summary entry (raylet storeStats), fullest first."""
    by_node = summary_by_node(summary)
    out: list[models.StoreNode] = []
    for node in nodes:
        if node.get("state") != "ALIVE":
            continue
        node_id = str(node.get("node_id"))
        raylet = (by_node.get(node_id) or {}).get("raylet") or {}
        stats = raylet.get("storeStats") or {}
        # The raylet's stats are a protobuf as JSON, which leaves out counters that are 0: with stats at all,
        # a counter not in them is 0, not unknown.
        zero = 0 if stats else None
        total = (node.get("resources_total") or {}).get("object_store_memory")
        used = _num(stats.get("objectStoreBytesUsed"), raylet.get("objectStoreUsedMemory"))
        store = models.StoreNode(
            node_id=node_id,
            ip=node.get("node_ip"),
            used=used,
            total=float(total) if total else None,
            spilled_bytes=_num(stats.get("spilledBytesTotal"), zero),
            spilled_objects=_int(stats.get("spilledObjectsTotal"), zero),
            restored_bytes=_num(stats.get("restoredBytesTotal"), zero),
            restored_objects=_int(stats.get("restoredObjectsTotal"), zero),
            fallback_bytes=_num(stats.get("objectStoreBytesFallback"), zero),
            local_objects=_int(stats.get("numLocalObjects"), zero),
        )
        if store.used is not None and store.total:
            store.fraction = round(store.used / store.total, 4)
        out.append(store)
    out.sort(key=lambda s: -(s.fraction or 0))
    return out


def _num(*values: Any) -> float | None:
    for v in values:
        n = to_number(v)
        if isinstance(n, int | float):
            return float(n)
    return None


def _int(*values: Any) -> int | None:
    n = _num(*values)
    return int(n) if n is not None else None


@dataclass
class Owners:
    """Who a process holding references is (by IP and pid): a driver of a job, an actor, a worker; alive?"""

    workers: dict[tuple[str, int], Mapping[str, Any]] = field(default_factory=dict)
    actors: dict[tuple[str, int], Mapping[str, Any]] = field(default_factory=dict)
    drivers: dict[tuple[str, int], Mapping[str, Any]] = field(default_factory=dict)
    job_status: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, *, workers: list[dict[str, Any]], actors: list[dict[str, Any]], jobs: list[dict[str, Any]]
    ) -> Owners:
        owners = cls()
        for w in workers:
            owners.workers[(str(w.get("ip")), int(to_number(w.get("pid")) or 0))] = w
        for a in sorted(actors, key=lambda a: a.get("state") == "ALIVE"):  # the alive one wins a reused pid
            address = a.get("address") or {}
            ip = address.get("ip_address") if isinstance(address, Mapping) else None
            owners.actors[(str(ip or a.get("node_ip")), int(to_number(a.get("pid")) or 0))] = a
        for j in jobs:
            driver = j.get("driver_info") or {}
            if j.get("job_id"):
                owners.job_status[str(j["job_id"])] = str(j.get("status"))
            if driver.get("pid"):
                owners.drivers[(str(driver.get("node_ip_address")), int(to_number(driver["pid"]) or 0))] = j
        return owners

    def describe(self, row: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
        """(who holds the reference, its job id, why it looks leaked or None)."""
        ip, pid = str(row.get("ip")), int(to_number(row.get("pid")) or 0)
        kind = str(row.get("type") or "WORKER").lower()
        worker, actor, driver = (
            self.workers.get((ip, pid)),
            self.actors.get((ip, pid)),
            self.drivers.get((ip, pid)),
        )
        job_id = str(driver.get("job_id")) if driver and driver.get("job_id") else None
        if actor is not None:
            job_id = str(actor.get("job_id") or "") or job_id
            kind = f"actor {actor.get('class_name') or ''} {actor.get('actor_id')}".replace("  ", " ")
        who = f"{kind} pid {pid} on {ip}" + (f" (job {job_id})" if job_id else "")
        if worker is not None and worker.get("is_alive") is False:
            return who, job_id, f"its owner process is dead ({worker.get('exit_type') or 'exited'})"
        status = self.job_status.get(job_id or "")
        if status in TERMINAL_JOB_STATUSES:
            holder = "detached actor" if actor is not None else "process"
            return who, job_id, f"its job {job_id} is {status} but this {holder} still holds them"
        return who, job_id, None


# A frame of Ray's call site ("path:function:line") inside an installed package or Python itself: not the user's.
_LIBRARY_FRAME = re.compile(r"/(?:site-packages|dist-packages)/|/lib/python3[.\d]*/")


def user_call_site(call_site: str) -> str:
    """Ray's recorded call site ("(put object) | <frame> | <frame> …", innermost first, Ray's own frames before
    the user's) with the installed packages' frames left out, so the user's line is not cut off behind them."""
    parts = [p.strip() for p in call_site.split(" | ")]
    if len(parts) < 2:
        return call_site
    users = [p for p in parts[1:] if not _LIBRARY_FRAME.search(p)]
    return " | ".join([parts[0], *(p.rsplit("/", 1)[-1] for p in users)]) if users else call_site


def build_object_store(
    *,
    stores: list[models.StoreNode],
    objects: list[Mapping[str, Any]],
    owners: Owners,
    limit: int,
    notes: list[str],
) -> models.ObjectStoreSummary:
    """Group the references by (call site, owner), largest first, and say what fills the store."""
    groups: dict[tuple[str, str], models.ObjectGroup] = {}
    sizes: dict[str, float] = {}
    for row in objects:
        size = max(0.0, float(to_number(row.get("object_size")) or 0))
        sizes[str(row.get("object_id"))] = size
        who, job_id, leak = owners.describe(row)
        site = truncate_text(
            user_call_site(" ".join(str(row.get("call_site") or "unknown").split())), CALL_SITE_CHARS
        )
        group = groups.get((site, who))
        if group is None:
            group = groups[(site, who)] = models.ObjectGroup(
                call_site=site,
                owner=who,
                pid=to_number(row.get("pid")),
                ip=row.get("ip"),
                job_id=job_id,
                objects=0,
                bytes=0,
                leak=leak,
            )
        group.objects += 1
        group.bytes += size
        ref = str(row.get("reference_type") or "UNKNOWN_STATUS")
        group.reference_types[ref] = group.reference_types.get(ref, 0) + 1
    ranked = sorted(groups.values(), key=lambda g: (-g.bytes, -g.objects, g.call_site))
    leaks = [g for g in ranked if g.leak]
    summary = models.ObjectStoreSummary(
        verdict="",
        objects=len(sizes),
        bytes=sum(sizes.values()),
        nodes=stores[:STORE_NODES_SHOWN],
        groups=ranked[:limit],
        leaks=len(leaks),
        notes=notes,
    )
    summary.verdict = _verdict(summary, ranked, leaks)
    summary.hints = _hints(summary, ranked, limit)
    return summary


def store_pressure(stores: list[models.StoreNode]) -> list[str]:
    """One line per node whose store is near full or has spilled (what diagnosis and health report)."""
    out = []
    for s in stores:
        parts = []
        if s.fraction is not None and s.fraction >= STORE_NEAR_FULL:
            parts.append(f"{s.fraction:.0%} full ({_size(s.used)} of {_size(s.total)})")
        if s.spilled_bytes:
            parts.append(
                f"spilled {_size(s.spilled_bytes)} in {s.spilled_objects or '?'} objects, "
                f"restored {_size(s.restored_bytes or 0)}"
            )
        if s.fallback_bytes:
            parts.append(f"{_size(s.fallback_bytes)} in fallback allocation on disk")
        if parts:
            out.append(f"node {s.node_id} ({s.ip}): " + "; ".join(parts))
    return out


def _size(value: float | None) -> str:
    return byte_size(value or 0)


def _verdict(
    summary: models.ObjectStoreSummary, ranked: list[models.ObjectGroup], leaks: list[models.ObjectGroup]
) -> str:
    pressure = store_pressure(summary.nodes)
    head = (
        "Object store under pressure on " + "; ".join(pressure[:STORE_NODES_NAMED]) + "."
        if pressure
        else f"Object store: {_size(summary.bytes)} in {summary.objects} object(s)"
        + (f" over {len(summary.nodes)} node(s)" if summary.nodes else "")
        + "; none near full, nothing spilled."
    )
    if ranked:
        top = ranked[0]
        head += f" Largest holder: {top.owner}, {_size(top.bytes)} in {top.objects} reference(s) from {quoted(top.call_site)}."
    if leaks:
        head += f" {len(leaks)} holder(s) look leaked: {leaks[0].owner}: {leaks[0].leak}."
    return head


def _hints(summary: models.ObjectStoreSummary, ranked: list[models.ObjectGroup], limit: int) -> list[str]:
    hints = []
    if len(ranked) > limit:
        hints.append(f"{len(ranked) - limit} smaller holders not shown; pass a larger limit.")
    if any(g.call_site == "disabled" for g in ranked):
        hints.append(
            "Call sites are 'disabled': start Ray with RAY_record_ref_creation_sites=1 to record them."
        )
    if summary.leaks:
        hints.append(
            "Leaked references stay until their holder drops them or dies: kill_actor a detached "
            "actor that holds them, or delete the refs in its code."
        )
    if any(s.spilled_bytes for s in summary.nodes):
        hints.append(
            "Spilling writes to the node's disk (object_spilling_config); a full disk makes it "
            "retry: check the spill directory's disk, and free references the holders above keep."
        )
    return hints


def render_object_store(s: models.ObjectStoreSummary) -> str:
    lines = [s.verdict]
    if s.nodes:
        lines.append("Store per node (fullest first):")
    for n in s.nodes:
        use = f"{_size(n.used)}/{_size(n.total)}" + (f" ({n.fraction:.0%})" if n.fraction is not None else "")
        spill = (
            f", spilled {_size(n.spilled_bytes)}, restored {_size(n.restored_bytes)}"
            if n.spilled_bytes
            else ""
        )
        fallback = f", fallback {_size(n.fallback_bytes)}" if n.fallback_bytes else ""
        lines.append(f"  {n.node_id} {n.ip}: {use}{spill}{fallback}")
    lines.append(f"Holders ({len(s.groups)} shown, largest first):")
    for g in s.groups:
        refs = ", ".join(f"{k} {v}" for k, v in sorted(g.reference_types.items()))
        leak = f" LEAK: {g.leak}" if g.leak else ""
        lines.append(f"  {_size(g.bytes)} in {g.objects}: {g.owner} at {quoted(g.call_site)} [{refs}]{leak}")
    lines += [f"Note: {n}" for n in s.notes] + [f"Hint: {h}" for h in s.hints]
    return "\n".join(lines)
