"""job_topology, the text part: render a JobTopology as the tree an agent reads (bounded by limits)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ray_mcp.amounts import resource_amount, resource_use
from ray_mcp.limits import GPUS_SHOWN, SPAWNED_ACTORS_SHOWN, TOPOLOGY_TEXT_BYTES, TOPOLOGY_TEXT_GAPS
from ray_mcp.models import JobTopology, TopoActor, TopoBundle, TopoGroup, TopoNode, TopoServe
from ray_mcp.shaping.placement_groups import topology_line
from ray_mcp.shaping.topology import ACCELERATOR_RESOURCES, LIVE
from ray_mcp.text import utf8_prefix


def _accel_count(actor: TopoActor) -> str:
    parts = [f"{actor.resources[r]:g} {r}" for r in ACCELERATOR_RESOURCES if actor.resources.get(r)]
    return ", ".join(parts)


def compress_ints(values: Iterable[int]) -> str:
    """0,1,2,3,5 -> '0-3,5'."""
    nums = sorted(set(values))
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ",".join(parts)


def compress_ids(ids: Sequence[str]) -> str:
    if ids and all(i.isdigit() for i in ids):
        return compress_ints(int(i) for i in ids)
    return ",".join(ids)


def _res(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{resource_amount(k, v)} {k}" for k, v in resources.items() if v)


def _occupant_key(actors: Sequence[TopoActor]) -> tuple[Any, ...]:
    return tuple(sorted((a.class_name, a.state, _accel_count(a)) for a in actors))


def _occupant_text(actors: Sequence[TopoActor], each: bool) -> str:
    if not actors:
        return "EMPTY"
    out = []
    for (cls, state, accel), n in Counter((a.class_name, a.state, _accel_count(a)) for a in actors).items():
        text = f"{cls}, {state}" + (f", {accel}{' each' if each else ''}" if accel else "")
        out.append(text if n == 1 else f"{n}× {text}")
    return "; ".join(out)


def render_group(group: TopoGroup, by_id: Mapping[str, TopoActor], labels: Mapping[str, str]) -> list[str]:
    head = (
        f"- group {group.name or '(unnamed)'} {group.placement_group_id}: {group.strategy or 'strategy ?'}, "
    )
    head += f"{group.state}, {group.bundles_total} bundle(s), {group.live_actors} live actor(s)"
    lines = [head]
    if topology := topology_line(group.topology_strategy, group.topology_assignments):
        lines.append(f"  {topology}")
    runs: list[tuple[list[TopoBundle], tuple[Any, ...]]] = []
    for b in group.bundles:
        members = [by_id[i] for i in b.actor_ids if i in by_id]
        key = (tuple(sorted(b.resources.items())), b.node_id, _occupant_key(members))
        if runs and runs[-1][1] == key and runs[-1][0][-1].index + 1 == b.index:
            runs[-1][0].append(b)
        else:
            runs.append(([b], key))
    for bundles, _key in runs:
        first = bundles[0]
        members = [by_id[i] for b in bundles for i in b.actor_ids if i in by_id]
        span = f"bundle {first.index}" if len(bundles) == 1 else f"bundles {first.index}-{bundles[-1].index}"
        where = labels.get(first.node_id or "", first.node_id or "unplaced")
        line = f"  {span} {{{_res(first.resources)}}} on {where}: {_occupant_text(members, len(bundles) > 1)}"
        ids: dict[str, list[str]] = defaultdict(list)
        for a in members:
            for r, v in a.accelerator_ids.items():
                ids[r] += v
        if ids:
            line += "; ids " + " ".join(f"{r} {compress_ids(v)}" for r, v in ids.items())
        if len(members) == 1 and (members[0].state != LIVE or len(bundles) == 1):
            a = members[0]
            line += (
                f" [{a.name + ' ' if a.name else ''}{a.actor_id}" + (f" pid {a.pid}" if a.pid else "") + "]"
            )
        lines.append(line)
    if group.any_bundle_actor_ids:
        members = [by_id[i] for i in group.any_bundle_actor_ids if i in by_id]
        where = ",".join(sorted({labels.get(a.node_id or "", "?") for a in members}))
        lines.append(f"  any bundle (index -1) on {where}: {_occupant_text(members, True)}")
    return lines


def render_outside(actors: Sequence[TopoActor], labels: Mapping[str, str]) -> list[str]:
    groups: dict[tuple[str, str, str], list[TopoActor]] = defaultdict(list)
    for a in actors:
        groups[(a.class_name, a.state, a.spawned_by or "")].append(a)
    lines = []
    for (cls, state, spawned), members in sorted(groups.items()):
        where = ",".join(sorted({labels.get(a.node_id or "", "?") for a in members}))
        text = (
            f"  {len(members)}× {cls}, {state} on {where}"
            if len(members) > 1
            else f"  {cls}, {state} on {where}"
        )
        accel = _accel_count(members[0])
        if accel:
            text += f", {accel}{' each' if len(members) > 1 else ''}"
        if spawned:
            text += f", spawned by Serve replica {spawned}"
        if len(members) == 1:
            a = members[0]
            text += f" [{a.name + ' ' if a.name else ''}{a.actor_id}]"
        lines.append(text)
    return lines


def _node_line(n: TopoNode) -> str:
    role = "head" if n.is_head else "worker"
    parts = []
    for name in ("CPU", "GPU", "memory", "object_store_memory"):
        use = n.resources.get(name)
        if use is None:
            continue
        text = resource_use(name, use.used, use.total)
        if n.job_share.get(name):
            text += f" (job {resource_amount(name, n.job_share[name])})"
        parts.append(text)
    for name, amount in n.job_share.items():
        if name not in ("CPU", "GPU", "memory", "object_store_memory"):
            parts.append(f"{name} job {amount:g}")
    line = f"- {n.label} = {n.node_id} {n.ip} {role} {n.state}"
    if n.state == "DEAD":
        return line + f": {n.death_reason}"
    line += ": " + ", ".join(parts)
    if n.memory_used_fraction is not None:
        line += f"; host memory {n.memory_used_fraction:.0%}" + (
            " MEMORY PRESSURE" if n.memory_pressure else ""
        )
    if n.object_store_used is not None:
        line += f"; object store used {resource_amount('object_store_memory', n.object_store_used)}"
    if n.gpus:
        line += "; GPUs " + ", ".join(
            f"{g.index}:{g.name}"
            + (f" {g.utilization_percent:g}%" if g.utilization_percent is not None else "")
            for g in n.gpus[:GPUS_SHOWN]
        )
    hosts = (
        [f"{n.actors} actor(s)"]
        + ([f"{n.bundles} bundle(s)"] if n.bundles else [])
        + (["driver"] if n.driver else [])
    )
    return line + "; hosts " + ", ".join(hosts)


def render_topology(t: JobTopology) -> str:
    labels = {n.node_id: n.label for n in t.nodes}
    by_id = {a.actor_id: a for a in t.actors}
    lines = [t.verdict]
    if t.gaps:
        lines.append("Gaps:")
        lines += [f"- {g.text}" for g in t.gaps[:TOPOLOGY_TEXT_GAPS]]
        if t.gaps_total > TOPOLOGY_TEXT_GAPS:
            lines.append(f"- ... {t.gaps_total - TOPOLOGY_TEXT_GAPS} more in the structured gaps list.")
    driver = labels.get(t.driver_node_id or "", t.driver_node_id or t.driver_ip or "unknown node")
    if t.driver_node_id is None:
        driver = next((n.label for n in t.nodes if n.driver), driver)
    lines.append(f"Driver: pid {t.driver_pid or '?'} on {driver}.")
    if t.placement_groups:
        lines.append(f"Placement groups ({t.placement_groups_total}):")
        for g in t.placement_groups:
            lines += render_group(g, by_id, labels)
    replicas = {
        r.actor_id for app in (t.serve.apps if t.serve else []) for d in app.deployments for r in d.replicas
    }
    outside = [
        a for a in t.actors if not a.placement_group_id and not a.spawned_by and a.actor_id not in replicas
    ]
    if outside:
        lines.append(f"Actors outside any placement group ({len(outside)}):")
        lines += render_outside(outside, labels)
    if t.serve:
        lines += render_serve(t.serve, by_id, labels)
    lines.append(f"Nodes ({len(t.nodes)}; used/total, the job's share in brackets):")
    lines += [_node_line(n) for n in t.nodes]
    counts = ", ".join(f"{k} {v}" for k, v in sorted(t.actors_by_state.items()))
    if counts:
        lines.append(f"Actors by state: {counts}.")
    lines += [f"Note: {n}" for n in t.notes] + [f"Hint: {h}" for h in t.hints]
    text = "\n".join(lines)
    if len(text.encode()) > TOPOLOGY_TEXT_BYTES:
        text = utf8_prefix(text.encode(), TOPOLOGY_TEXT_BYTES - 200).decode().rsplit("\n", 1)[0]
        text += "\n... (text cut at 12 KB; the structured content has the full tree)"
    return text


def render_serve(s: TopoServe, by_id: Mapping[str, TopoActor], labels: Mapping[str, str]) -> list[str]:
    if not s.attributed:
        return [f"Serve: {s.how}"]
    lines = [f"Serve ({s.how}):"]
    for app in s.apps:
        lines.append(f"- app {app.name}: {app.status}")
        for dep in app.deployments:
            states = Counter(r.state for r in dep.replicas)
            where = ",".join(sorted({labels.get(r.node_id or "", "?") for r in dep.replicas})) or "-"
            lines.append(
                f"  {dep.name}: {dep.status}, replicas "
                + ", ".join(f"{n} {s}" for s, n in states.items())
                + f" on {where}"
            )
            for r in dep.replicas:
                spawned = [by_id[i] for i in r.spawned_actor_ids if i in by_id]
                if spawned:
                    lines.append(
                        f"    replica {r.replica_id} spawned: "
                        + "; ".join(
                            f"{a.class_name} {a.state} on {labels.get(a.node_id or '', '?')} [{a.actor_id}]"
                            for a in spawned[:SPAWNED_ACTORS_SHOWN]
                        )
                        + (
                            f"; +{len(spawned) - SPAWNED_ACTORS_SHOWN} more"
                            if len(spawned) > SPAWNED_ACTORS_SHOWN
                            else ""
                        )
                    )
    return lines
