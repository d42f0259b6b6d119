"""RayAPI: one object per area of ray_api, all sharing one HTTP client and one GCS connection per cluster."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from ray_mcp.answers.actors import Actors
from ray_mcp.answers.data import Data
from ray_mcp.answers.events import Events
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.logs import Logs
from ray_mcp.answers.nodes import Nodes
from ray_mcp.answers.objects import Objects
from ray_mcp.answers.pages import Pages
from ray_mcp.answers.placement_groups import PlacementGroups
from ray_mcp.answers.serve import Serve
from ray_mcp.answers.stacks import Stacks
from ray_mcp.answers.tasks import Tasks
from ray_mcp.answers.topology import Topology
from ray_mcp.answers.train import Train
from ray_mcp.sources.dashboard import Dashboard
from ray_mcp.sources.gcs import GCS_LOOKUP, Gcs, GcsLookup


class RayAPI:
    """A connection to one Ray cluster: ``api.jobs``, ``api.actors``, ``api.placement_groups``, ``api.logs``...
    One instance per cluster, reused by every call. ``client`` is its dashboard (the source of every answer
    it can give), ``gcs`` its GCS (only for what the dashboard does not serve)."""

    def __init__(
        self,
        dashboard_url: str,
        *,
        timeout_s: float,
        source: str = "external",
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
        gcs_address: str | None = None,
        gcs_lookup: GcsLookup | None = GCS_LOOKUP,
        gcs_out_of_reach: str | None = None,
        stack_source: str = "auto",
        py_spy: str | None = None,
        local_logs: bool = True,
    ) -> None:
        self.client = client = Dashboard(
            dashboard_url,
            timeout_s=timeout_s,
            source=source,
            headers=headers,
            verify=verify,
            transport=transport,
        )
        self.dashboard_url = client.dashboard_url
        self.gcs = gcs = Gcs(
            client.dashboard_url,
            address=gcs_address,
            lookup=gcs_lookup,
            authorization=client.authorization(),
            timeout_s=timeout_s,
            out_of_reach=gcs_out_of_reach,
        )
        self.nodes = nodes = Nodes(client)
        self.jobs = jobs = Jobs(client)
        self.pages = Pages(client)
        self.actors = Actors(client, gcs)
        self.tasks = Tasks(client, gcs)
        self.placement_groups = placement_groups = PlacementGroups(client, gcs, nodes)
        self.logs = logs = Logs(client, jobs, nodes, local_logs=local_logs)
        self.serve = serve = Serve(client, logs)
        self.stacks = Stacks(client, jobs, nodes, source=stack_source, py_spy=py_spy)
        self.topology = Topology(client, gcs, jobs, placement_groups, serve)
        self.train = Train(client)
        self.objects = Objects(client, nodes)
        self.events = Events(client, jobs, nodes)
        self.data = Data(client, logs)

    async def aclose(self) -> None:
        await self.client.aclose()
        self.gcs.close()
