"""Which Ray libraries run on a cluster, found by the actors they keep: Serve's controller, Train's state actor,
Ray Data's stats actor. Each is found as Ray finds it, by name in its namespace and alive (an actor of the same
name in another namespace is not it). The toolsets (server/toolsets.py) and Ray Data's reads ask here."""

from __future__ import annotations

import asyncio

from ray_mcp.sources.cluster_sources import ClusterSources

# (name, namespace) of each library's actor, as Ray names them.
SERVE_CONTROLLER = ("SERVE_CONTROLLER_ACTOR", "serve")  # ray.serve._private.constants
TRAIN_STATE = ("train_v2_state_actor", "_train_state_actor")  # ray.train.v2._internal.state.state_actor
DATA_STATS = ("datasets_stats_actor", "_dataset_stats_actor")  # ray.data._internal.stats


async def actor_alive(sources: ClusterSources, actor: tuple[str, str]) -> bool:
    """Is the named actor alive in its namespace (one State API read of at most one row)?"""
    name, namespace = actor
    found = await sources.state.actors(
        filters=[("name", "=", name), ("ray_namespace", "=", namespace), ("state", "=", "ALIVE")],
        limit=1,
        detail=False,
    )
    return bool(found["result"])


async def serve_and_train(sources: ClusterSources) -> tuple[bool, bool]:
    """Whether Serve runs (its controller is alive) and whether Train keeps its runs (its state actor is)."""
    serve, train = await asyncio.gather(
        actor_alive(sources, SERVE_CONTROLLER), actor_alive(sources, TRAIN_STATE)
    )
    return serve, train
