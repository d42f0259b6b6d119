"""Nodes and the cluster's status: the node list, resources in use, pending demands."""

from __future__ import annotations

from typing import Any

from ray_mcp import models
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.limits import HOST_USAGE_MAX_NODES
from ray_mcp.shaping.cluster import build_cluster_status
from ray_mcp.shaping.nodes import (
    NodeCapacity,
    build_node_list,
    node_capacities,
    node_model,
    summary_by_node,
    uncamel_usage,
    usage_from_free,
)
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.records import Node


class Nodes:
    """Nodes, their capacities, and what ``ray status`` shows."""

    def __init__(self, sources: ClusterSources) -> None:
        self.sources = sources
        self.state = sources.state
        self.routes = sources.routes

    async def version(self) -> dict[str, Any]:
        return await self.routes.version()

    async def cluster_status(self, *, max_nodes: int, groups_read: int | None = None) -> models.ClusterStatus:
        """Nodes, resource use, pending demands and autoscaler state: what ``ray status`` shows.

        ``groups_read``: the caller lists every placement group (up to that many, with detail) in the same call,
        so the pending ones are counted from that list, which the call's read scope shares, instead of from a
        read of their own (cluster_health: one request fewer)."""
        notes: list[str] = []
        version, nodes, status, pending_pgs = await gather(
            self.version(),
            self.state.nodes(),
            self.routes.cluster_status(),
            self._pending_placement_groups(groups_read),
        )
        summary = await self._host_usage(notes, nodes["result"])
        note_unknown_use(status, notes)
        return build_cluster_status(
            dashboard_url=self.sources.dashboard_url,
            source=self.sources.dashboard.source,
            version=version,
            nodes=list(nodes["result"]),
            status=status,
            pending_placement_groups=pending_pgs,
            max_nodes=max_nodes,
            summary=summary,
            notes=notes,
        )

    async def _pending_placement_groups(self, groups_read: int | None) -> int:
        """How many placement groups are PENDING: counted in the caller's whole list when it holds every group,
        else the State API's exact count of one filtered list."""
        if groups_read is not None:
            listed = await self.state.placement_groups(limit=groups_read, detail=True)
            rows = listed["result"]
            if int(listed.get("total") or 0) <= len(rows):
                return sum(1 for row in rows if row.get("state") == "PENDING")
        found = await self.state.placement_groups(filters=[("state", "=", "PENDING")], limit=1, detail=False)
        return int(found.get("num_filtered") or 0)

    async def _host_usage(self, notes: list[str], nodes: list[Node]) -> dict[str, Any]:
        """Host CPU, memory, object store and GPU use per node (/nodes?view=summary); a failure is a note.

        That answer carries every worker's stats (~1 KB each), so it is not read for clusters larger than
        HOST_USAGE_MAX_NODES alive nodes.
        """
        alive = sum(1 for n in nodes if n.get("state") == "ALIVE")
        if alive > HOST_USAGE_MAX_NODES:
            notes.append(
                f"Host CPU, memory and GPU use not read: {alive} alive nodes (more than "
                f"{HOST_USAGE_MAX_NODES}); the dashboard's node summary would be too large."
            )
            return {}
        try:
            data = await self.routes.node_summary()
        except RayMCPError as exc:
            notes.append(f"Host CPU, memory and GPU use unknown: {str(exc).split('. ')[0]}.")
            return {}
        return summary_by_node(data)

    async def capacities(
        self, notes: list[str] | None = None, *, from_gcs: bool = False
    ) -> tuple[list[Node], list[NodeCapacity]]:
        """Every node (State API) and, for the alive ones, total and available resources (``notes``: told
        when the use is unknown).

        ``from_gcs``: the same facts from the GCS, for a caller that reads the GCS anyway (pg_status): there they
        are read beside the caller's dashboard requests, where the dashboard would serve them one after another.
        The dashboard still answers when the GCS cannot."""
        if from_gcs:
            gcs = self.sources.gcs
            try:
                nodes, free = await gather(gcs.nodes(), gcs.available_resources())
            except RayMCPError:
                pass
            else:
                return nodes, node_capacities(nodes, usage_from_free(nodes, free))
        found, status = await gather(self.state.nodes(), self.routes.cluster_status())
        nodes = list(found["result"])
        note_unknown_use(status, notes if notes is not None else [])
        return nodes, node_capacities(nodes, usage_by_node(nodes, status))

    async def resolve(self, node: str) -> str:
        """A node id (hex) or IP -> the node id; NotFound says how to list the nodes."""
        found = await self._match(node, ("node_id", "node_ip"))
        if found is None:
            raise NotFound(
                f"No node {node.strip()!r} in the cluster at {self.sources.dashboard_url} (give a node id or IP). "
                "Call cluster_status to see the nodes, with their ids and IPs."
            )
        return str(found["node_id"])

    async def find(self, node: str) -> Node:
        """The node an id, IP or name names (get_node: a name is what an agent may have from a log or a pod)."""
        found = await self._match(node, ("node_id", "node_ip", "node_name"))
        if found is None:
            raise NotFound(
                f"No node {node.strip()!r} in the cluster at {self.sources.dashboard_url} (give a node id, IP or "
                "name). Call list_nodes to see the nodes, with their ids, IPs and names."
            )
        return found

    async def _match(self, node: str, keys: tuple[str, ...]) -> Node | None:
        """The node whose first of ``keys`` equals ``node``, an alive one first (an IP or a name may be reused)."""
        node = node.strip()
        nodes = (await self.state.nodes())["result"]
        for wanted_key in keys:
            hits = [n for n in nodes if str(n.get(wanted_key)) == node]
            hits.sort(key=lambda n: n.get("state") != "ALIVE")
            if hits:
                return hits[0]
        return None

    async def one(self, node: str) -> tuple[models.Node, list[str]]:
        """One node as list_nodes shows it (state, resources total and available, labels, host use or why it
        died), and the notes on what could not be read."""
        notes: list[str] = []
        row, (nodes, capacities) = await gather(
            self.find(node), self.capacities(notes)
        )  # one nodes read, shared
        summary = await self._host_usage(notes, nodes) if row.get("state") == "ALIVE" else {}
        return node_model(row, {c.node_id: c for c in capacities}, summary, notes), notes

    async def page(self, *, state: str | None, limit: int, notes: list[str]) -> models.NodeList:
        nodes, capacities = await self.capacities(notes)
        summary = await self._host_usage(notes, nodes)
        if state:
            nodes = [n for n in nodes if n.get("state") == state]
        return build_node_list(rows=nodes, capacities=capacities, limit=limit, notes=notes, summary=summary)


def usage_by_node(nodes: list[Node], status: Any) -> dict[str, dict[str, tuple[float, float]]]:
    """Each alive node's logical use (the autoscaler's per-node report), in the State API's resource names."""
    load = ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
    return uncamel_usage(load.get("usageByNode") or {}, nodes)


def note_unknown_use(status: Any, notes: list[str]) -> None:
    """A status without the autoscaler's load report (a History Server's record keeps none): the use of every
    resource is unknown, and the figures built without it count it all as free."""
    if not ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport"):
        notes.append(
            "Resource use unknown: /api/cluster_status carries no load report (a terminated cluster's record "
            "keeps none), so every resource is counted as free."
        )
