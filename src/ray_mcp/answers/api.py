"""RayAPI: one object per area over one cluster's sources (one HTTP client, one GCS connection)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ray_mcp.answers.actors import Actors
from ray_mcp.answers.compare import Comparisons
from ray_mcp.answers.data import Data
from ray_mcp.answers.events import Events
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.logs import Logs
from ray_mcp.answers.memory import MemoryProfiles
from ray_mcp.answers.metrics import Metrics
from ray_mcp.answers.nodes import Nodes
from ray_mcp.answers.objects import Objects
from ray_mcp.answers.pages import Pages
from ray_mcp.answers.placement_groups import PlacementGroups
from ray_mcp.answers.secrets import JobSecrets
from ray_mcp.answers.serve import Serve
from ray_mcp.answers.stacks import Stacks
from ray_mcp.answers.tasks import Tasks
from ray_mcp.answers.topology import Topology
from ray_mcp.answers.train import Train
from ray_mcp.limits import MEMORY_USAGE_THRESHOLD
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.gcs import GCS_LOOKUP, GcsLookup
from ray_mcp.sources.prometheus import Configured

if TYPE_CHECKING:
    import httpx


class RayAPI:
    """A connection to one Ray cluster: ``api.jobs``, ``api.actors``, ``api.placement_groups``, ``api.logs``...
    One instance per cluster, reused by every call. ``sources`` are its dashboard's APIs (the source of every
    answer they can give) and its GCS (only for what the dashboard does not serve); ``secrets`` teaches the
    redactor the env_vars of the jobs whose text an answer shows."""

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
        prometheus: Configured | None = None,
        memory_threshold: float = MEMORY_USAGE_THRESHOLD,
    ) -> None:
        self.sources = src = ClusterSources(
            dashboard_url,
            timeout_s=timeout_s,
            source=source,
            headers=headers,
            verify=verify,
            transport=transport,
            gcs_address=gcs_address,
            gcs_lookup=gcs_lookup,
            gcs_out_of_reach=gcs_out_of_reach,
            prometheus=prometheus,
        )
        self.dashboard_url = src.dashboard_url
        self.gcs = src.gcs
        self.secrets = secrets = JobSecrets(src.jobs)
        self.nodes = nodes = Nodes(src)
        self.jobs = jobs = Jobs(src, secrets)
        self.pages = Pages(src.routes)
        self.actors = Actors(src, secrets)
        self.tasks = Tasks(src, secrets)
        self.placement_groups = placement_groups = PlacementGroups(src, nodes)
        self.logs = logs = Logs(src, jobs, nodes, secrets, local_logs=local_logs)
        self.serve = serve = Serve(src, logs, secrets)
        self.stacks = stacks = Stacks(src, jobs, nodes, source=stack_source, py_spy=py_spy)
        self.profiles = MemoryProfiles(stacks)
        self.topology = Topology(src, jobs, placement_groups, serve)
        self.train = Train(src.routes)
        self.objects = Objects(src, secrets)
        self.events = Events(src, jobs, nodes)
        self.data = Data(src, logs)
        self.metrics = metrics = Metrics(src, jobs)
        self.comparisons = Comparisons(src, jobs, metrics)
        self.memory_threshold = (
            memory_threshold  # the memory monitor's, as configured (Ray does not report it)
        )

    async def aclose(self) -> None:
        await self.sources.aclose()
