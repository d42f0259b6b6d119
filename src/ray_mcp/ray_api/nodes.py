"""Nodes and the cluster's status: the node list, resources in use, pending demands."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from ray_mcp import models
from ray_mcp.errors import NotFound, RayMCPError
from ray_mcp.limits import HOST_USAGE_MAX_NODES, STATE_API_MAX_ROWS
from ray_mcp.ray_api import gcs, ray_import
from ray_mcp.ray_api.client import RayClient, gather
from ray_mcp.shaping.cluster import build_cluster_status
from ray_mcp.shaping.nodes import (
    NodeCapacity,
    build_node_list,
    node_capacities,
    summary_by_node,
    uncamel_resources,
)


class NodesAPI(RayClient):
    """Nodes, their capacities, and what ``ray status`` shows."""

    async def version(self) -> dict[str, Any]:
        return await self.get_json("/api/version", what="the version request (/api/version)")

    async def cluster_status(self, *, max_nodes: int, gcs_first: bool = False) -> models.ClusterStatus:
        """Nodes, resource use, pending demands and autoscaler state: what ``ray status`` shows.
        ``gcs_first``: count the pending groups in the GCS's table even if no channel to it is open yet."""
        notes: list[str] = []
        version, nodes_result, status, pending_pgs = await gather(
            self.version(),
            self.list_state(
                "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS, detail=True
            ),
            self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
            self.pending_pg_count(gcs_first=gcs_first),
        )
        summary = await self.node_summary(notes, nodes_result.get("result") or [])
        return build_cluster_status(
            dashboard_url=self.dashboard_url,
            source=self.source,
            version=version,
            nodes=nodes_result.get("result") or [],
            status=status,
            pending_placement_groups=pending_pgs,
            max_nodes=max_nodes,
            summary=summary,
            notes=notes,
        )

    async def pg_rows(self) -> list[dict[str, Any]] | None:
        """Every placement group as the State API's detail rows (with its strategy), read from the GCS in one
        call; concurrent askers share the read. None when the GCS cannot be reached from here (the caller
        asks the State API instead)."""

        async def read() -> list[dict[str, Any]] | None:
            try:
                await ray_import.ensure("gcs")
                return await anyio.to_thread.run_sync(
                    lambda: gcs.placement_group_rows(self._gcs(), self.timeout_s)
                )
            except Exception:  # the GCS may be unreachable from here (a dashboard behind a proxy)
                return None

        rows: list[dict[str, Any]] | None = await self.shared("pg_rows", read)
        return rows

    async def dead_workers(self, limit: int) -> tuple[list[dict[str, Any]], int] | None:
        """The dead workers as the State API's detail rows (the first ``limit`` by id) and how many are dead,
        from the GCS in one call; None when the GCS cannot be reached from here (the caller asks the State
        API, which converts every worker for the same answer)."""
        try:
            await ray_import.ensure("gcs")
            return await anyio.to_thread.run_sync(
                lambda: gcs.dead_worker_rows(self._gcs(), self.timeout_s, limit)
            )
        except Exception:  # the GCS may be unreachable from here
            return None

    async def pending_pg_count(self, *, gcs_first: bool = False) -> int:
        """How many placement groups are PENDING: counted in the GCS's table when the channel to it is open
        (a first call does not wait for Ray's import or the GCS's lookup for this) or ``gcs_first``, else one
        State API call (which converts every group in the dashboard: ~0.7 s at 1,000)."""
        if self.gcs_connected or gcs_first:
            try:
                await ray_import.ensure("gcs")
                page = await anyio.to_thread.run_sync(  # a count: no group converted
                    lambda: gcs.placement_group_page(
                        self._gcs(), [("state", "=", "PENDING")], 0, self.timeout_s
                    )
                )
                if page is not None:
                    return page[1]
            except Exception:  # the GCS may be unreachable from here: the State API counts them
                pass
        result = await self.list_state(
            "placement_groups", what="the placement group list (/api/v0/placement_groups)",
            filters=[("state", "=", "PENDING")], limit=1,
        )  # fmt: skip
        return int(result.get("num_filtered") or 0)

    async def node_summary(self, notes: list[str], nodes: list[dict[str, Any]]) -> dict[str, Any]:
        """Host CPU, memory, object store and GPU use per node (/nodes?view=summary); a failure is a note.

        That answer carries every worker's stats (~1 KB each), so it is not read for clusters larger than
        HOST_USAGE_MAX_NODES alive nodes.
        """
        alive = sum(1 for n in nodes if n.get("state") == "ALIVE")
        if alive > HOST_USAGE_MAX_NODES:
            notes.append(f"Host CPU, memory and GPU use not read: {alive} alive nodes (more than "
                         f"{HOST_USAGE_MAX_NODES}); the dashboard's node summary would be too large.")  # fmt: skip
            return {}
        try:
            data = await self.get_data(
                "/nodes", what="the node summary (/nodes?view=summary)", params={"view": "summary"}
            )
        except RayMCPError as exc:
            notes.append(f"Host CPU, memory and GPU use unknown: {str(exc).split('. ')[0]}.")
            return {}
        return summary_by_node(data)

    async def node_capacities(self) -> tuple[list[dict[str, Any]], list[NodeCapacity]]:
        """Every node (State API) and, for the alive ones, total and available resources."""
        nodes_result, status = await gather(
            self.list_state(
                "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS, detail=True
            ),
            self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
        )
        nodes = list(nodes_result.get("result") or [])
        load = ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
        known = {name for node in nodes for name in (node.get("resources_total") or {})}
        usage = {nid: uncamel_resources(u, known) for nid, u in (load.get("usageByNode") or {}).items()}
        return nodes, node_capacities(nodes, usage)

    async def list_nodes(self, *, state: str | None, limit: int, notes: list[str]) -> models.NodeList:
        nodes, capacities = await self.node_capacities()
        summary = await self.node_summary(notes, nodes)
        if state:
            nodes = [n for n in nodes if n.get("state") == state]
        return build_node_list(rows=nodes, capacities=capacities, limit=limit, notes=notes, summary=summary)

    async def _resolve_node(self, node: str) -> str:
        """A node id (hex) or IP -> the node id; NotFound says how to list the nodes."""
        node = node.strip()
        result = await self.list_state(
            "nodes", what="the node list (/api/v0/nodes)", limit=STATE_API_MAX_ROWS
        )
        nodes = result.get("result") or []
        for wanted_key in ("node_id", "node_ip"):
            hits = [n for n in nodes if str(n.get(wanted_key)) == node]
            hits.sort(key=lambda n: n.get("state") != "ALIVE")
            if hits:
                return str(hits[0]["node_id"])
        raise NotFound(
            f"No node {node!r} in the cluster at {self.dashboard_url} (give a node id or IP). "
            "Call cluster_status to see the nodes, with their ids and IPs."
        )
