"""job_topology's gaps: what is wrong in the tree that shaping/topology.py joins (actors not placed or restarting,
bundles with no live rank, dead or memory-pressed nodes that held the job's work, GPU nodes the job leaves idle).
Pure: every function takes the tree's parts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ray_mcp import limits
from ray_mcp.amounts import resource_shape
from ray_mcp.models import Gap, TopoActor, TopoGroup, TopoNode
from ray_mcp.shaping.nodes import MEMORY_USAGE_THRESHOLD
from ray_mcp.text import truncate_text

LIVE = "ALIVE"


def actor_gaps(actors: Sequence[TopoActor]) -> list[Gap]:
    """Actors that are not in a group bundle: pending, restarting and dead ones are gaps too."""
    gaps: list[Gap] = []
    for a in actors:
        if a.placement_group_id and a.bundle_index is not None:
            continue  # reported with its bundle
        if a.state == "DEAD" and a.placement_group_id is None:
            continue  # ended actors outside groups are counted, not flagged (jobs end actors all the time)
        if a.state in ("PENDING_CREATION", "DEPENDENCIES_UNREADY"):
            gaps.append(
                Gap(
                    kind="pending_actor",
                    actor_id=a.actor_id,
                    placement_group_id=a.placement_group_id,
                    text=f"actor {a.actor_id} ({_who(a)}) is {a.state}: not placed yet.",
                )
            )
        elif a.state == "RESTARTING":
            gaps.append(
                Gap(
                    kind="restarting_actor",
                    actor_id=a.actor_id,
                    text=f"actor {a.actor_id} ({_who(a)}) is RESTARTING (restarts {a.restarts}).",
                )
            )
    return gaps


# An actor on its way to live: its bundle is neither empty nor a dead rank; the actor is the gap (pending or
# restarting).
NOT_YET_LIVE = ("PENDING_CREATION", "RESTARTING", "DEPENDENCIES_UNREADY")


def _who(a: TopoActor) -> str:
    return f"{a.class_name} {a.name}" if a.name else a.class_name


def group_gaps(group: TopoGroup, by_id: Mapping[str, TopoActor]) -> list[Gap]:
    gaps: list[Gap] = []
    pg, label = group.placement_group_id, group.name or group.placement_group_id
    if group.state == "REMOVED":
        return gaps
    for b in group.bundles:
        members = [by_id[i] for i in b.actor_ids if i in by_id]
        if not b.node_id:
            gaps.append(
                Gap(
                    kind="unplaced_bundle",
                    placement_group_id=pg,
                    bundle_index=b.index,
                    text=f"group {label}: bundle {b.index} {resource_shape(b.resources)} is not placed "
                    f"(group {group.state}).",
                )
            )
            continue
        live = [a for a in members if a.state == LIVE]
        if live or any(a.state in NOT_YET_LIVE for a in members):
            for a in members:
                if a.state in NOT_YET_LIVE:
                    gaps.append(
                        Gap(
                            kind="restarting_actor" if a.state == "RESTARTING" else "pending_actor",
                            placement_group_id=pg,
                            bundle_index=b.index,
                            actor_id=a.actor_id,
                            text=f"group {label}: bundle {b.index}: {_who(a)} {a.actor_id} is {a.state}.",
                        )
                    )
            continue
        dead = [a for a in members if a.state == "DEAD"]
        if dead:
            a = dead[-1]
            why = death_text(a)
            gaps.append(
                Gap(
                    kind="dead_rank",
                    placement_group_id=pg,
                    bundle_index=b.index,
                    actor_id=a.actor_id,
                    node_id=a.node_id,
                    text=f"group {label}: bundle {b.index}: {_who(a)} {a.actor_id} is DEAD: {why}",
                )
            )
        elif not group.any_bundle_actor_ids:
            gaps.append(
                Gap(
                    kind="empty_bundle",
                    placement_group_id=pg,
                    bundle_index=b.index,
                    node_id=b.node_id,
                    text=f"group {label}: bundle {b.index} {resource_shape(b.resources)} on node "
                    f"{b.node_id} holds no actor.",
                )
            )
    if group.bundles_total and group.live_actors < group.bundles_total and group.state != "PENDING":
        gaps.append(
            Gap(
                kind="short_group",
                placement_group_id=pg,
                text=f"group {label}: {group.live_actors} live actor(s) for {group.bundles_total} bundles.",
            )
        )
    return gaps


def death_text(a: TopoActor) -> str:
    c = a.death_cause
    if c is None:
        return "no death cause recorded."
    text = c.reason + (f" ({c.error_type})" if c.error_type else "")
    if c.message:
        text += ": " + truncate_text(" ".join(c.message.split()), limits.DEATH_CHARS)
    return text


def node_gaps(node: TopoNode) -> list[Gap]:
    """What is wrong with a node that holds this job's work: it is dead, or its memory is under pressure."""
    gaps: list[Gap] = []
    if node.state != "ALIVE":
        gaps.append(
            Gap(
                kind="dead_node",
                node_id=node.node_id,
                text=f"node {node.node_id} ({node.ip}) that held this job's work is DEAD: {node.death_reason}",
            )
        )
    if node.memory_pressure:
        gaps.append(
            Gap(
                kind="memory_pressure",
                node_id=node.node_id,
                text=f"node {node.node_id} ({node.ip}) uses {node.memory_used_fraction:.0%} of its "
                f"memory (Ray's memory monitor kills workers at {MEMORY_USAGE_THRESHOLD:.0%}).",
            )
        )
    return gaps


def add_idle_gpu_nodes(idle_gpu: list[TopoNode], nodes: list[TopoNode], gaps: list[Gap]) -> None:
    """The first few GPU nodes that host no actor of the job join the nodes with a gap each; the rest are
    counted in one gap."""
    for node in idle_gpu[: limits.TOPOLOGY_IDLE_GPU_NODES]:
        gpu = node.resources.get("GPU")
        used = f"{gpu.used:g}/{gpu.total:g} GPUs in use" if gpu else "GPUs"
        mine = " though this job holds bundles there" if node.bundles else ""
        gaps.append(
            Gap(
                kind="idle_gpu_node",
                node_id=node.node_id,
                text=f"node {node.node_id} ({node.ip}) has GPUs ({used}) and hosts no actor of this "
                f"job{mine}.",
            )
        )
        if node not in nodes:
            nodes.append(node)
    if len(idle_gpu) > limits.TOPOLOGY_IDLE_GPU_NODES:
        gaps.append(
            Gap(
                kind="idle_gpu_node",
                text=f"{len(idle_gpu) - limits.TOPOLOGY_IDLE_GPU_NODES} more GPU node(s) host no actor of this job.",
            )
        )
