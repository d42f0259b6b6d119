"""Nodes and the cluster's status: the node list, resources in use, pending demands."""

from __future__ import annotations

from typing import Any

from ray_mcp import models
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.limits import HOST_USAGE_MAX_NODES, STATE_API_MAX_ROWS
from ray_mcp.shaping.cluster import build_cluster_status
from ray_mcp.shaping.nodes import (
    NodeCapacity,
    build_node_list,
    node_capacities,
    summary_by_node,
    uncamel_resources,
)
from ray_mcp.sources.dashboard import Dashboard, gather


class Nodes:
    """Nodes, their capacities, and what ``ray status`` shows."""

    def __init__(self, client: Dashboard) -> None:
        self.client = client

    async def version(self) -> dict[str, Any]:
        return await self.client.get_json("/api/version", what="the version request (/api/version)")

    async def cluster_status(self, *, max_nodes: int) -> models.ClusterStatus:
        """Nodes, resource use, pending demands and autoscaler state: what ``ray status`` shows."""
        notes: list[str] = []
        version, nodes_result, status, pending_pgs = await gather(
            self.version(),
            self.client.list_state(
                "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS, detail=True
            ),
            self.client.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
            self._pending_placement_groups(),
        )
        summary = await self._host_usage(notes, nodes_result.get("result") or [])
        note_unknown_use(status, notes)
        return build_cluster_status(
            dashboard_url=self.client.dashboard_url,
            source=self.client.source,
            version=version,
            nodes=nodes_result.get("result") or [],
            status=status,
            pending_placement_groups=pending_pgs,
            max_nodes=max_nodes,
            summary=summary,
            notes=notes,
        )

    async def _pending_placement_groups(self) -> int:
        """How many placement groups are PENDING (the State API's exact count of one filtered list)."""
        result = await self.client.list_state(
            "placement_groups",
            what="the placement group list (/api/v0/placement_groups)",
            filters=[("state", "=", "PENDING")],
            limit=1,
        )
        return int(result.get("num_filtered") or 0)

    async def _host_usage(self, notes: list[str], nodes: list[dict[str, Any]]) -> dict[str, Any]:
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
            data = await self.summary()
        except RayMCPError as exc:
            notes.append(f"Host CPU, memory and GPU use unknown: {str(exc).split('. ')[0]}.")
            return {}
        return summary_by_node(data)

    async def summary(self) -> Any:
        """The dashboard's per-node summary (host use, raylet and store stats); read once per call."""
        return await self.client.get_data(
            "/nodes", what="the node summary (/nodes?view=summary)", params={"view": "summary"}
        )

    async def capacities(
        self, notes: list[str] | None = None
    ) -> tuple[list[dict[str, Any]], list[NodeCapacity]]:
        """Every node (State API) and, for the alive ones, total and available resources (``notes``: told
        when the use is unknown)."""
        nodes_result, status = await gather(
            self.client.list_state(
                "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS, detail=True
            ),
            self.client.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
        )
        nodes = list(nodes_result.get("result") or [])
        note_unknown_use(status, notes if notes is not None else [])
        load = ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
        known = {name for node in nodes for name in (node.get("resources_total") or {})}
        usage = {nid: uncamel_resources(u, known) for nid, u in (load.get("usageByNode") or {}).items()}
        return nodes, node_capacities(nodes, usage)

    async def page(self, *, state: str | None, limit: int, notes: list[str]) -> models.NodeList:
        nodes, capacities = await self.capacities(notes)
        summary = await self._host_usage(notes, nodes)
        if state:
            nodes = [n for n in nodes if n.get("state") == state]
        return build_node_list(rows=nodes, capacities=capacities, limit=limit, notes=notes, summary=summary)

    async def resolve(self, node: str) -> str:
        """A node id (hex) or IP -> the node id; NotFound says how to list the nodes."""
        node = node.strip()
        result = await self.client.list_state(
            "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS
        )
        nodes = result.get("result") or []
        for wanted_key in ("node_id", "node_ip"):
            hits = [n for n in nodes if str(n.get(wanted_key)) == node]
            hits.sort(key=lambda n: n.get("state") != "ALIVE")
            if hits:
                return str(hits[0]["node_id"])
        raise NotFound(
            f"No node {node!r} in the cluster at {self.client.dashboard_url} (give a node id or IP). "
            "Call cluster_status to see the nodes, with their ids and IPs."
        )


def note_unknown_use(status: Any, notes: list[str]) -> None:
    """A status without the autoscaler's load report (a History Server's record keeps none): the use of every
    resource is unknown, and the figures built without it count it all as free."""
    if not ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport"):
        notes.append(
            "Resource use unknown: /api/cluster_status carries no load report (a terminated cluster's record "
            "keeps none), so every resource is counted as free."
        )
