"""Pydantic output models: what each tool returns as structured content (and so its outputSchema)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ResourceUse(BaseModel):
    used: float = Field(description="Amount in use (bytes for memory and object_store_memory).")
    total: float = Field(description="Amount the node or cluster has.")


class NodeStatus(BaseModel):
    node_id: str
    ip: str
    state: Literal["ALIVE", "DEAD"]
    is_head: bool
    resources: dict[str, ResourceUse] = Field(
        default_factory=dict, description="Per resource, used and total."
    )
    death_reason: str | None = Field(default=None, description="Why a DEAD node died, as Ray recorded it.")


class Demand(BaseModel):
    kind: Literal["task_or_actor", "placement_group", "request_resources"]
    bundles: list[dict[str, float]] = Field(description="The resource shape(s) asked for.")
    strategy: str | None = Field(default=None, description="Placement strategy, for placement groups.")
    count: int = Field(description="How many such requests wait.")
    infeasible: bool = Field(description="True if no node of the cluster (or node type) could ever hold it.")


class AutoscalerStatus(BaseModel):
    kind: Literal["legacy", "v2"]
    active_nodes: int
    pending_nodes: list[str] = Field(default_factory=list)
    pending_launches: dict[str, int] = Field(default_factory=dict)
    failed_nodes: list[str] = Field(default_factory=list)
    error: str | None = None


class ClusterStatus(BaseModel):
    dashboard_url: str
    source: str = Field(
        description="embedded (started by ray-mcp), local (found on this machine) or external."
    )
    ray_version: str
    session_name: str | None = None
    nodes_alive: int
    nodes_dead: int
    resources: dict[str, ResourceUse] = Field(description="Cluster-wide use over alive nodes.")
    nodes: list[NodeStatus]
    nodes_shown: int
    pending_demands: list[Demand] = Field(default_factory=list)
    pending_placement_groups: int = 0
    autoscaler: AutoscalerStatus | None = None
    hints: list[str] = Field(default_factory=list)
