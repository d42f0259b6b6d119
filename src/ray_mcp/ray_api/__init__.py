"""The only package that talks to Ray: the dashboard's REST API (httpx), the GCS (gRPC), Ray's Jobs client.

One module per area, each a layer of ``RayAPI`` (api.py):

    client.py            RayClient: HTTP (JSON, envelopes, State API lists, streams), threads, concurrency
    gcs.py               gRPC to the GCS: the dashboard's address, killing an actor, the actor, placement group
                         and task tables as State API rows
    ray_import.py        the one gate through which Ray itself is imported (once, by one thread)
    ids.py               what a well-formed Ray id looks like
    nodes.py             nodes and the cluster's status
    jobs.py              Ray Jobs (runtime_env.py checks a job's runtime_env before it is submitted)
    logs.py              every log: a job's driver, an actor, a task, a worker pid, a node's files
    actors.py, placement_groups.py, tasks.py, serve.py
    stacks.py            Python stacks and CPU profiles: the dashboard's profiling routes, or py-spy here

Every method returns our models (``ray_mcp.models``) and raises our errors (``ray_mcp.errors``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray_mcp.ray_api.api import RayAPI


def __getattr__(name: str) -> Any:
    """``RayAPI`` is imported on first use (every area, the models under them: ~40 ms), not with the package:
    the server starts, and reaches the GCS helpers in gcs.py, without it."""
    if name == "RayAPI":
        from ray_mcp.ray_api.api import RayAPI

        return RayAPI
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RayAPI"]
