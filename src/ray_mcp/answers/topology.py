"""job_topology, the gathering part: the rows topology_shape joins, from the dashboard and the GCS.

Sources, all read-only:
- Jobs API: the job (id, status, driver).
- State API: the job's placement groups (bundles, nodes) and actors (detail: restarts, death cause, the
  placement-group-formatted resources that carry the bundle index), and actors of other jobs placed in its groups.
- GCS actor table (one call, filtered by job): each actor's owner (which worker created it: a Serve replica's
  actors are linked to it that way), the bundle an index -1 actor landed in, and the accelerator ids assigned
  (``resource_mapping``: GPU ids, also for dead actors). Without the GCS, live actors' ids come from the
  dashboard's /logical/actors worker stats and owners are unknown (said in a note).
- Nodes: State API node list, the autoscaler's per-node usage, /nodes?view=summary for host CPU, memory,
  object store and physical GPUs.
- Serve: /api/serve/applications/ and the Serve controller actor's job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ray_mcp import limits
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.nodes import usage_by_node
from ray_mcp.answers.placement_groups import PlacementGroups
from ray_mcp.answers.serve import Serve
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.models import JobTopology
from ray_mcp.shaping.common import state_notes
from ray_mcp.shaping.topology import TopologySources, build_topology
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather as _gather
from ray_mcp.sources.records import Actor, Node, PlacementGroup
from ray_mcp.text import first_sentence


def no_ray_job(job: str, status: str) -> str:
    """Why a submitted job has no Ray job id, and what to call instead. A driver gets one when it connects to
    Ray (ray.init); one that never does (a plain script) never has actors, tasks or placement groups."""
    if status == "PENDING":
        return (
            f"Job {job!r} is PENDING: its driver has not started. Call wait_for_job, then job_topology again."
        )
    if status == "RUNNING":
        return (
            f"Job {job!r} is RUNNING but its driver has not connected to Ray (ray.init) yet, so it has no actors, "
            "tasks or placement groups. Call job_topology again later; tail_logs(job=...) shows what it prints."
        )
    return (
        f"Job {job!r} is {status or 'in an unknown status'} and its driver never connected to Ray (ray.init), so "
        "it had no actors, tasks or placement groups. tail_logs(job=...) shows what it printed."
    )


class Topology:
    """job_topology's gathering for one cluster; its siblings give the job, the strategies and Serve."""

    def __init__(
        self, sources: ClusterSources, jobs: Jobs, placement_groups: PlacementGroups, serve: Serve
    ) -> None:
        self.sources = sources
        self.jobs = jobs
        self.placement_groups = placement_groups
        self.serve = serve

    async def get(self, job: str) -> JobTopology:
        """The job's placement groups, bundles, actors and nodes, joined (shaping/topology.py)."""
        return await _job_topology(self, job)


async def _job_topology(api: Topology, job: str) -> JobTopology:
    details = await api.jobs.details(job)
    job_id = str(details.get("job_id") or "")
    if not job_id:
        raise NotFound(no_ray_job(job, str(details.get("status") or "")))
    notes: list[str] = []
    state = api.sources.state
    actors_page, pgs_page, gcs, nodes, summary, serve = await _gather(
        state.actors(filters=[("job_id", "=", job_id)], limit=limits.TOPOLOGY_ACTOR_ROWS),
        state.placement_groups(filters=[("creator_job_id", "=", job_id)], limit=limits.TOPOLOGY_GROUP_ROWS),
        _optional(_gcs_facts(api, job_id), notes, "the GCS actor and placement group tables"),
        _nodes(api.sources),
        _optional(api.sources.routes.node_summary(), notes, "host memory, CPU and GPU use"),
        _optional(_serve(api), notes, "Serve"),
    )
    actors_total = int(actors_page.get("num_filtered") or 0)
    pg_total = int(pgs_page.get("num_filtered") or 0)
    pg_rows = pgs_page["result"][: limits.TOPOLOGY_GROUP_ROWS]
    notes += state_notes("actors", actors_page) + state_notes("placement_groups", pgs_page)
    actor_rows: list[Actor] = list(actors_page["result"][: limits.TOPOLOGY_ACTOR_ROWS])
    actor_rows += await _other_jobs_members(api, pg_rows, actor_rows, notes)
    strategies: dict[str, str] = {}
    owners: dict[str, str] = {}
    stats: dict[str, dict[str, Any]] = {}
    if gcs is not None:
        strategies, owners, stats = gcs["strategies"], gcs["owners"], gcs["stats"]
    else:
        notes.append("Owners unknown without the GCS: actors a Serve replica created are not linked to it.")
    missing = [
        str(r["actor_id"])
        for r in actor_rows
        if r.get("state") == "ALIVE" and str(r["actor_id"]) not in stats
    ]
    physical_gpus = any((n.get("gpus") or []) for n in ((summary or {}).get("summary") or []))
    wanted = (
        [str(r["actor_id"]) for r in actor_rows if r.get("state") == "ALIVE"] if physical_gpus else missing
    )
    if wanted:
        logical = await _optional(
            _logical_actors(api.sources, wanted[: limits.TOPOLOGY_ACTORS]), notes, "the actors' worker stats"
        )
        for actor_id, info in (logical or {}).items():
            if not info:
                continue
            entry = stats.setdefault(actor_id, {})
            entry.setdefault("usedResources", info.get("usedResources") or {})
            entry["gpus"] = info.get("gpus") or []
    node_rows, usage = nodes
    controller_job = None
    serve_details = None
    if serve is not None:
        serve_details, controller_job = serve
    summary_by_node = {
        str((n.get("raylet") or {}).get("nodeId")): n for n in ((summary or {}).get("summary") or [])
    }
    evidence = TopologySources(
        details=details,
        pg_rows=pg_rows,
        pg_total=pg_total,
        strategies=strategies,
        actor_rows=actor_rows,
        actors_total=actors_total + sum(1 for r in actor_rows if r.get("job_id") != job_id),
        worker_stats=stats,
        owners=owners,
        node_rows=node_rows,
        usage_by_node=usage,
        node_summary=summary_by_node,
        serve_details=serve_details,
        serve_controller_job_id=controller_job,
        notes=notes,
    )
    return build_topology(evidence, job=job)


async def _other_jobs_members(
    api: Topology, pg_rows: list[PlacementGroup], actor_rows: list[Actor], notes: list[str]
) -> list[Actor]:
    """Actors of other jobs (e.g. created by a Serve replica) placed in this job's groups."""
    known = {str(r.get("actor_id")) for r in actor_rows}
    live_groups = [r for r in pg_rows if r.get("state") != "REMOVED"]
    if len(live_groups) > limits.TOPOLOGY_MEMBER_QUERIES:
        notes.append(
            f"Actors of other jobs looked up in the first {limits.TOPOLOGY_MEMBER_QUERIES} groups only."
        )
    members = await _gather(
        *(
            api.sources.state.actors(
                filters=[("placement_group_id", "=", str(r.get("placement_group_id")))],
                limit=limits.TOPOLOGY_ACTORS,
            )
            for r in live_groups[: limits.TOPOLOGY_MEMBER_QUERIES]
        )
    )
    found: list[Actor] = []
    for member in members:
        rows = member["result"][: limits.TOPOLOGY_ACTORS]
        found += [r for r in rows if str(r.get("actor_id")) not in known]
        known |= {str(r.get("actor_id")) for r in rows}
    return found


async def _optional(awaitable: Any, notes: list[str], what: str) -> Any:
    try:
        return await awaitable
    except RayMCPError as exc:
        notes.append(f"Could not read {what}: {first_sentence(str(exc))}")
        return None


async def _nodes(
    sources: ClusterSources,
) -> tuple[list[Node], dict[str, dict[str, tuple[float, float]]]]:
    """Every node (State API) and each alive node's logical use (the autoscaler's per-node report)."""
    found, status = await _gather(sources.state.nodes(), sources.routes.cluster_status())
    nodes = list(found["result"])
    return nodes, usage_by_node(nodes, status)


async def _serve(api: Topology) -> tuple[dict[str, Any], str | None] | None:
    details = await api.serve.details()
    if not (details.get("applications") or {}):
        return None
    controller = (details.get("controller_info") or {}).get("actor_id")
    job = None
    if controller:
        row = await api.sources.state.actor(str(controller))
        job = str(row.get("job_id")) if row else None
    return details, job


async def _logical_actors(sources: ClusterSources, actor_ids: Sequence[str]) -> dict[str, Any]:
    """Worker stats of live actors (assigned resource slots, physical GPUs), from /logical/actors?ids=..."""
    out: dict[str, Any] = {}
    chunks = [
        actor_ids[i : i + limits.TOPOLOGY_IDS_PER_REQUEST]
        for i in range(0, len(actor_ids), limits.TOPOLOGY_IDS_PER_REQUEST)
    ]
    pages = await _gather(*(sources.routes.logical_actors(chunk) for chunk in chunks))
    for page in pages:
        for actor_id, info in page.items():
            if isinstance(info, Mapping):
                out[actor_id] = {"usedResources": info.get("usedResources"), "gpus": info.get("gpus")}
    return out


async def _gcs_facts(api: Topology, job_id: str) -> dict[str, Any]:
    """Strategies of every group, and per actor of the job: owner worker id and assigned resource ids."""
    strategies, actors = await _gather(
        api.placement_groups.strategies(),
        api.sources.gcs.job_actors(job_id, limit=limits.TOPOLOGY_ACTOR_ROWS),
    )
    return _facts(strategies, actors)


def _facts(strategies: dict[str, str], actors: list[dict[str, Any]]) -> dict[str, Any]:
    owners = {a["actor_id"]: a["owner_worker_id"] for a in actors}
    stats = {
        a["actor_id"]: {"usedResources": a["used_resources"], "worker_id": a["worker_id"]} for a in actors
    }
    return {
        "strategies": strategies,
        "owners": owners,
        "stats": stats,
    }
