"""The only package that talks to Ray: the dashboard's REST API (httpx), the GCS (Ray's gRPC client), Ray's Jobs
client.

``RayAPI`` (api.py) holds one object per area, all sharing one ``RayClient``:

    client.py            RayClient: HTTP (JSON, envelopes, State API lists, streams), concurrency helpers
    gcs.py               Gcs: Ray's gRPC channel to the GCS, only for what the dashboard does not serve
                         (strategies, actor owners and resource ids, the stored task count, killing an actor)
    ids.py               what a well-formed Ray id looks like
    nodes.py             Nodes: nodes and the cluster's status
    jobs.py              Jobs: Ray Jobs (runtime_env.py checks a job's runtime_env before it is submitted)
    logs.py              Logs: every log: a job's driver, an actor, a task, a worker pid, a node's files
    actors.py, placement_groups.py, tasks.py, serve.py, train.py, topology.py
    stacks.py            Stacks: Python stacks and CPU profiles: the dashboard's profiling routes, or py-spy here

Every method returns our models (``ray_mcp.models``) and raises our errors (``ray_mcp.errors``).
"""

from ray_mcp.ray_api.api import RayAPI

__all__ = ["RayAPI"]
