"""The only package that talks to Ray: the dashboard's REST API (httpx), the GCS (gRPC), Ray's Jobs client.

One module per area, each a layer of ``RayAPI``:

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

from ray_mcp.ray_api.actors import ActorsAPI
from ray_mcp.ray_api.placement_groups import PlacementGroupsAPI
from ray_mcp.ray_api.serve import ServeAPI
from ray_mcp.ray_api.stacks import StacksAPI
from ray_mcp.ray_api.tasks import TasksAPI


class RayAPI(ServeAPI, ActorsAPI, PlacementGroupsAPI, TasksAPI, StacksAPI):
    """A connection to one Ray cluster, every area in one object. One instance per cluster, reused by every call."""


__all__ = ["RayAPI"]
