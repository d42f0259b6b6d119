"""job_topology, the pure part: join placement groups, actors, worker stats, Serve and nodes into one tree.

Nothing here talks to Ray: every function takes the rows the dashboard (or GCS) returned and is unit-tested on
recorded or constructed evidence. answers/topology.py collects those rows.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ray_mcp import limits, models
from ray_mcp.models import (
    Gap,
    JobTopology,
    TopoActor,
    TopoBundle,
    TopoDeployment,
    TopoGPU,
    TopoGroup,
    TopoNode,
    TopoReplica,
    TopoServe,
    TopoServeApp,
)
from ray_mcp.shaping.actors import death_cause
from ray_mcp.shaping.common import to_number
from ray_mcp.shaping.nodes import (
    MEMORY_USAGE_THRESHOLD,
    host_usage,
    is_internal_resource,
)
from ray_mcp.shaping.placement_groups import label_map
from ray_mcp.shaping.topology_gaps import LIVE, actor_gaps, add_idle_gpu_nodes, group_gaps, node_gaps

# Accelerator resources whose assigned ids Ray tracks per worker (resource slots).
ACCELERATOR_RESOURCES = ("GPU", "TPU", "neuron_cores", "HPU", "NPU", "RBLN")
# Bounds of the structured answer (the text tree groups repeated structure and stays far smaller).

_PG_INDEXED = re.compile(r"^(?P<res>.+)_group_(?P<index>\d+)_(?P<pg>[0-9a-f]{36})$")
_PG_WILDCARD = re.compile(r"^(?P<res>.+)_group_(?P<pg>[0-9a-f]{36})$")


def split_pg_resources(required: Mapping[str, Any]) -> tuple[dict[str, float], int | None]:
    """An actor's required resources in Ray's own names, and its bundle index (None: any bundle or no group).

    Inside a placement group Ray renames each resource: ``GPU_group_<i>_<pg>`` for bundle i and
    ``GPU_group_<pg>`` for the group; ``bundle_group_*`` (0.001) is Ray's marker that places zero-resource
    actors in the bundle too.
    """
    plain: dict[str, float] = {}
    wildcard: dict[str, float] = {}
    index: int | None = None
    for key, value in required.items():
        amount = float(value)
        if m := _PG_INDEXED.match(key):
            index = int(m["index"])
            continue
        if m := _PG_WILDCARD.match(key):
            if m["res"] != "bundle":
                wildcard[m["res"]] = amount
            continue
        plain[key] = amount
    return (wildcard or plain), index


def accelerator_ids(used_resources: Mapping[str, Any]) -> dict[str, list[str]]:
    """Assigned accelerator ids per resource, from a worker's ``usedResources`` (slot = device id)."""
    out: dict[str, list[str]] = {}
    for key, alloc in used_resources.items():
        base = key
        if (m := _PG_INDEXED.match(key)) or (m := _PG_WILDCARD.match(key)):
            base = m["res"]
        if base not in ACCELERATOR_RESOURCES:
            continue
        slots = alloc.get("resourceSlots") or alloc.get("resource_slots") or []
        ids = out.setdefault(base, [])
        for slot in slots:
            sid = str(slot.get("slot", ""))
            if sid and sid not in ids:
                ids.append(sid)
    return {k: sorted(v, key=_natural) for k, v in out.items() if v}


def _natural(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


@dataclass
class TopologySources:
    """Everything job_topology joins, as the sources returned it."""

    details: Mapping[str, Any]
    pg_rows: Sequence[Mapping[str, Any]] = ()
    pg_total: int = 0
    strategies: Mapping[str, str] = field(default_factory=dict)
    actor_rows: Sequence[Mapping[str, Any]] = ()
    actors_total: int = 0
    worker_stats: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    owners: Mapping[str, str] = field(default_factory=dict)  # actor id -> owner's worker id (GCS)
    node_rows: Sequence[Mapping[str, Any]] = ()
    usage_by_node: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    node_summary: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    serve_details: Mapping[str, Any] | None = None
    serve_controller_job_id: str | None = None
    notes: list[str] = field(default_factory=list)


# -- actors -------------------------------------------------------------------------------------------------


def topo_actor(row: Mapping[str, Any], job_id: str, stats: Mapping[str, Any] | None) -> TopoActor:
    resources, index = split_pg_resources(row.get("required_resources") or {})
    state = str(row.get("state", ""))
    actor = TopoActor(
        actor_id=str(row.get("actor_id", "")),
        class_name=str(row.get("class_name", "")),
        state=state,
        name=row.get("name") or None,
        pid=to_number(row.get("pid")) or None,
        restarts=to_number(row.get("num_restarts")),
        node_id=row.get("node_id") or None,
        job_id=row.get("job_id") if row.get("job_id") not in (None, "", job_id) else None,
        placement_group_id=row.get("placement_group_id") or None,
        bundle_index=index,
        resources={k: v for k, v in sorted(resources.items()) if v},
        death_cause=death_cause(row.get("death_cause"), exception_chars=300) if state == "DEAD" else None,
    )
    used = (stats or {}).get("usedResources") or {}
    if index is None and actor.placement_group_id:
        landed = {
            int(m["index"])
            for k in used
            if (m := _PG_INDEXED.match(k)) and m["pg"] == actor.placement_group_id
        }
        if len(landed) == 1:  # asked for any bundle (index -1); Ray's allocation names the one it got
            actor.bundle_index, actor.any_bundle = landed.pop(), True
    if stats:
        actor.accelerator_ids = accelerator_ids(used)
        actor.gpu_devices = [
            f"{g.get('index')}:{g.get('name')}" for g in stats.get("gpus") or [] if isinstance(g, Mapping)
        ]
    return actor


# -- nodes --------------------------------------------------------------------------------------------------


def _share_add(share: dict[str, float], resources: Mapping[str, float]) -> None:
    for name, amount in resources.items():
        if amount and not is_internal_resource(name) and name != "bundle":
            share[name] = share.get(name, 0.0) + float(amount)


def physical(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """Host CPU, memory and object store use and physical GPUs from one /nodes?view=summary entry."""
    usage = host_usage(summary)
    if usage is None:
        return {}
    gpus = [TopoGPU(**g.model_dump()) for g in usage.gpus]
    return {
        "cpu_percent": usage.cpu_percent,
        "memory_used_fraction": usage.memory_fraction,
        "object_store_used": usage.object_store_used,
        "gpus": gpus,
    }


def memory_flag(fraction: float | None, threshold: float = MEMORY_USAGE_THRESHOLD) -> bool | None:
    return None if fraction is None else fraction >= threshold


# -- the join -------------------------------------------------------------------------------------------------


def build_topology(ev: TopologySources, *, job: str) -> JobTopology:
    d = ev.details
    job_id = str(d.get("job_id") or "")
    notes = list(ev.notes)
    actors = _job_actors(ev, job_id)
    by_id = {a.actor_id: a for a in actors}

    # Serve: replicas, and the actors each replica's process created (owner = the replica's worker).
    serve, replica_of_worker = _serve(ev, job_id)
    for actor in actors:
        owner = ev.owners.get(actor.actor_id)
        if owner and owner in replica_of_worker:
            actor.spawned_by = replica_of_worker[owner][0]
            replica_of_worker[owner][1].spawned_actor_ids.append(actor.actor_id)

    # Placement groups and their bundles.
    gaps: list[Gap] = []
    groups, bundle_nodes = _groups(ev, actors, by_id, gaps)

    gaps += actor_gaps(actors)

    nodes = _nodes(ev, actors, bundle_nodes, gaps)
    by_state = dict(Counter(a.state for a in actors))
    hints: list[str] = []
    shown_actors = _shown_actors(ev, actors, notes, hints)
    shown_groups = _shown_groups(ev, groups, job_id, notes, hints)
    if gaps:
        hints.append(
            "Call get_actor with actor_id=<id> for a dead rank's full death cause, tail_logs with "
            "actor_id=<id> for its output."
        )
    topo = JobTopology(
        verdict="",
        job=job,
        job_id=job_id,
        submission_id=d.get("submission_id") or None,
        status=str(d.get("status", "")),
        driver_node_id=d.get("driver_node_id") or None,
        driver_ip=(d.get("driver_info") or {}).get("node_ip_address") or None,
        driver_pid=to_number((d.get("driver_info") or {}).get("pid")) or None,
        gaps=gaps[: limits.TOPOLOGY_GAPS],
        gaps_total=len(gaps),
        placement_groups=shown_groups,
        placement_groups_total=max(ev.pg_total, len(groups)),
        actors=shown_actors,
        actors_total=max(ev.actors_total, len(actors)),
        actors_by_state=by_state,
        serve=serve,
        nodes=nodes[: limits.TOPOLOGY_NODES],
        memory_threshold=MEMORY_USAGE_THRESHOLD,
        notes=notes,
        hints=hints,
    )
    topo.verdict = _verdict(topo)
    return topo


def _job_actors(ev: TopologySources, job_id: str) -> list[TopoActor]:
    """The job's actors, group by group and bundle by bundle, then by class, name and id."""
    stats = ev.worker_stats
    actors = [topo_actor(r, job_id, stats.get(str(r.get("actor_id")))) for r in ev.actor_rows]
    actors.sort(
        key=lambda a: (
            a.placement_group_id or "~",
            a.bundle_index if a.bundle_index is not None else 1 << 30,
            a.class_name,
            a.name or "",
            a.actor_id,
        )
    )
    return actors


def _shown_actors(
    ev: TopologySources, actors: list[TopoActor], notes: list[str], hints: list[str]
) -> list[TopoActor]:
    """The actors the answer lists, with a note for each cut (the State API's page, our cap)."""
    shown = actors[: limits.TOPOLOGY_ACTORS]
    if len(actors) < ev.actors_total:
        notes.append(f"Actors joined: the first {len(actors):,} of {ev.actors_total:,} (State API page).")
    if len(shown) < len(actors):
        notes.append(
            f"Structured actor list capped at {limits.TOPOLOGY_ACTORS:,} of {len(actors):,}; counts are exact."
        )
        hints.append("Call list_actors with filters (job_id, state, class_name) to page through the actors.")
    return shown


def _shown_groups(
    ev: TopologySources, groups: list[TopoGroup], job_id: str, notes: list[str], hints: list[str]
) -> list[TopoGroup]:
    """The groups the answer lists, each with its first bundles, with a note for each cut."""
    if ev.pg_total > len(ev.pg_rows):
        notes.append(f"Placement groups joined: the first {len(ev.pg_rows):,} of {ev.pg_total:,}.")
    shown = groups[: limits.TOPOLOGY_GROUPS]
    for g in shown:
        if len(g.bundles) > limits.TOPOLOGY_BUNDLES_PER_GROUP:
            g.bundles = g.bundles[: limits.TOPOLOGY_BUNDLES_PER_GROUP]
            notes.append(
                f"Group {g.placement_group_id}: first {limits.TOPOLOGY_BUNDLES_PER_GROUP} bundles listed."
            )
    if len(shown) < len(groups):
        notes.append(f"Structured group list capped at {limits.TOPOLOGY_GROUPS} of {len(groups)}.")
        hints.append(f"Call pg_status with job_id={job_id!r} to page through the placement groups.")
    return shown


def _groups(
    ev: TopologySources, actors: Sequence[TopoActor], by_id: Mapping[str, TopoActor], gaps: list[Gap]
) -> tuple[list[TopoGroup], dict[str, list[tuple[str, dict[str, float]]]]]:
    """The job's placement groups with their bundles; appends each group's gaps to `gaps`."""
    groups: list[TopoGroup] = []
    in_group: dict[str, list[TopoActor]] = defaultdict(list)
    for a in actors:
        if a.placement_group_id:
            in_group[a.placement_group_id].append(a)
    bundle_nodes: dict[str, list[tuple[str, dict[str, float]]]] = defaultdict(list)
    for row in ev.pg_rows:
        pg_id = str(row.get("placement_group_id", ""))
        state = str(row.get("state", ""))
        members = in_group.get(pg_id, [])
        bundles: list[TopoBundle] = []
        for b in row.get("bundles") or []:
            idx = int((b.get("bundle_id") or {}).get("bundle_index", len(bundles)))
            res = {k: float(v) for k, v in sorted((b.get("unit_resources") or {}).items())}
            node = b.get("node_id") or None
            bundles.append(
                TopoBundle(
                    index=idx,
                    resources=res,
                    node_id=node,
                    actor_ids=[a.actor_id for a in members if a.bundle_index == idx],
                )
            )
            if node and state != "REMOVED":
                bundle_nodes[node].append((pg_id, res))
        bundles.sort(key=lambda b: b.index)
        live = sum(1 for a in members if a.state == LIVE)
        group = TopoGroup(
            placement_group_id=pg_id,
            name=row.get("name") or None,
            state=state,
            strategy=ev.strategies.get(pg_id),
            bundles_total=len(bundles),
            live_actors=live,
            bundles=bundles,
            any_bundle_actor_ids=[a.actor_id for a in members if a.bundle_index is None],
            topology_strategy=label_map(row.get("topology_strategy")),
            topology_assignments=label_map(row.get("topology_assignments"))
            if row.get("topology_strategy")
            else None,
        )
        groups.append(group)
        gaps += group_gaps(group, by_id)
    groups.sort(key=lambda g: (g.state == "REMOVED", g.name or "", g.placement_group_id))
    return groups, bundle_nodes


def _serve(ev: TopologySources, job_id: str) -> tuple[TopoServe | None, dict[str, tuple[str, TopoReplica]]]:
    details = ev.serve_details
    replica_of_worker: dict[str, tuple[str, TopoReplica]] = {}
    if not details or not (details.get("applications") or {}):
        return None, replica_of_worker
    controller = ev.serve_controller_job_id
    job_actor_ids = {str(r.get("actor_id")) for r in ev.actor_rows}
    apps: list[TopoServeApp] = []
    any_replica_in_job = False
    for app_name, app in sorted((details.get("applications") or {}).items()):
        deployments = []
        for dep_name, dep in sorted((app.get("deployments") or {}).items()):
            replicas = []
            for r in dep.get("replicas") or []:
                rep = TopoReplica(
                    replica_id=r.get("replica_id"),
                    state=str(r.get("state", "")),
                    actor_id=r.get("actor_id"),
                    node_id=r.get("node_id"),
                    pid=to_number(r.get("pid")) or None,
                )
                any_replica_in_job |= rep.actor_id in job_actor_ids
                if r.get("worker_id"):
                    label = f"{app_name}/{dep_name}#{rep.replica_id or rep.actor_id}"
                    replica_of_worker[str(r["worker_id"])] = (label, rep)
                replicas.append(rep)
            deployments.append(
                TopoDeployment(name=dep_name, status=str(dep.get("status", "")), replicas=replicas)
            )
        apps.append(TopoServeApp(name=app_name, status=str(app.get("status", "")), deployments=deployments))
    if controller and controller == job_id:
        how = (
            f"Serve's controller was started by this job ({job_id}), so its applications and replicas "
            "(Serve-created actors carry the controller's job id) belong to it."
        )
        return TopoServe(attributed=True, controller_job_id=controller, how=how, apps=apps), replica_of_worker
    if any_replica_in_job:
        how = "Replica actors carry this job's id."
        return TopoServe(attributed=True, controller_job_id=controller, how=how, apps=apps), replica_of_worker
    names = ", ".join(a.name for a in apps[: limits.SERVE_APPS_NAMED])
    how = (
        f"Unattributed: Serve's controller belongs to job {controller or 'unknown'}, and Ray records the "
        "deploying job only inside the Serve controller (not over its REST API), so the "
        f"{len(apps)} application(s) ({names}) are not linked to this job."
    )
    return TopoServe(attributed=False, controller_job_id=controller, how=how), {}


def _nodes(
    ev: TopologySources,
    actors: Sequence[TopoActor],
    bundle_nodes: Mapping[str, list[tuple[str, dict[str, float]]]],
    gaps: list[Gap],
) -> list[TopoNode]:
    """The nodes that hold this job's work (its actors, its bundles, its driver), with what each shows wrong,
    and the live GPU nodes that hold none of it (a few of them, the rest counted)."""
    driver_node = _driver_node(ev)
    live_on: Counter[str] = Counter(a.node_id for a in actors if a.state == LIVE and a.node_id)
    share = _job_share(actors, bundle_nodes)
    hosting = set(live_on) | set(bundle_nodes) | ({driver_node} if driver_node else set())
    nodes: list[TopoNode] = []
    idle_gpu: list[TopoNode] = []
    rows = sorted(
        ev.node_rows, key=lambda r: (not r.get("is_head_node"), str(r.get("node_ip")), str(r.get("node_id")))
    )
    label_no = 0
    for row in rows:
        node_id = str(row.get("node_id", ""))
        alive = row.get("state") == "ALIVE"
        totals = {
            k: float(v) for k, v in (row.get("resources_total") or {}).items() if not is_internal_resource(k)
        }
        has_gpu = totals.get("GPU", 0) > 0
        if node_id not in hosting and not (alive and has_gpu):
            continue
        label_no += 1
        phys = physical(ev.node_summary.get(node_id))
        node = TopoNode(
            node_id=node_id,
            label=f"n{label_no}",
            ip=str(row.get("node_ip", "")),
            state="ALIVE" if alive else "DEAD",
            is_head=bool(row.get("is_head_node")),
            resources=_resource_use(totals, ev.usage_by_node.get(node_id, {})),
            job_share={k: round(v, 4) for k, v in sorted(share.get(node_id, {}).items())},
            cpu_percent=phys.get("cpu_percent"),
            memory_used_fraction=phys.get("memory_used_fraction"),
            memory_pressure=memory_flag(phys.get("memory_used_fraction")),
            object_store_used=phys.get("object_store_used"),
            gpus=phys.get("gpus") or [],
            actors=live_on.get(node_id, 0),
            bundles=len(bundle_nodes.get(node_id, [])),
            driver=node_id == driver_node,
            death_reason=None if alive else (row.get("state_message") or "no reason recorded"),
        )
        if node_id not in hosting:
            idle_gpu.append(node)
            continue
        nodes.append(node)
        gaps += node_gaps(node)
        if alive and has_gpu and node.actors == 0:
            idle_gpu.append(node)
    add_idle_gpu_nodes(idle_gpu, nodes, gaps)
    return nodes


def _driver_node(ev: TopologySources) -> str | None:
    """The driver's node: as the job records it, else the one live node at the driver's address."""
    driver_node = ev.details.get("driver_node_id") or None
    driver_ip = (ev.details.get("driver_info") or {}).get("node_ip_address")
    if driver_node is None and driver_ip:
        same_ip = [r for r in ev.node_rows if r.get("node_ip") == driver_ip and r.get("state") == "ALIVE"]
        driver_node = str(same_ip[0].get("node_id")) if len(same_ip) == 1 else None
    return driver_node


def _job_share(
    actors: Sequence[TopoActor], bundle_nodes: Mapping[str, list[tuple[str, dict[str, float]]]]
) -> dict[str, dict[str, float]]:
    """What the job holds on each node: its groups' bundles, and its live actors outside any group."""
    share: dict[str, dict[str, float]] = defaultdict(dict)
    for holder, bundles in bundle_nodes.items():
        for _pg, res in bundles:
            _share_add(share[holder], res)
    for a in actors:
        if a.state == LIVE and a.node_id and not a.placement_group_id and not a.job_id:
            _share_add(share[a.node_id], a.resources)
    return share


def _resource_use(
    totals: Mapping[str, float], usage: Mapping[str, tuple[float, float]]
) -> dict[str, models.ResourceUse]:
    return {k: models.ResourceUse(used=usage.get(k, (0.0, v))[0], total=v) for k, v in sorted(totals.items())}


def _verdict(t: JobTopology) -> str:
    alive = t.actors_by_state.get(LIVE, 0)
    node_count = sum(1 for n in t.nodes if n.actors or n.bundles or n.driver)
    head = (
        f"Job {t.submission_id + ' (' + t.job_id + ')' if t.submission_id else t.job_id} {t.status}: "
        f"{t.placement_groups_total} placement "
        f"group(s), {t.actors_total} actor(s) ({alive} alive) on {node_count} node(s)"
    )
    if t.serve and t.serve.attributed:
        head += f", {len(t.serve.apps)} Serve app(s)"
    if not t.gaps_total:
        return head + "; no gaps found."
    kinds = Counter(g.kind for g in t.gaps)
    parts = [f"{n} {k.replace('_', ' ')}{'s' if n > 1 else ''}" for k, n in kinds.most_common()]
    return head + f"; {t.gaps_total} gap(s): " + ", ".join(parts) + "."
