"""completion/complete: the values an argument of a resource template or a prompt can take, prefix-matched.

The argument's name says what it holds (``SOURCES``), whichever template or prompt it belongs to: job ids for
``ray://jobs/{submission_id}`` and the ``job`` of a prompt, module names for ``ray-docs://api/{qualified_name}``,
placement groups, Serve apps and deployments, actors, nodes, cluster names, reference topics. A cluster read is
made at most once per ``COMPLETION_CACHE_S`` per cluster and kind (a client asks again at every keystroke), and
a read that fails completes nothing: a completion is a convenience, never an error to act on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from mcp.server.mcpserver import MCPServer
from mcp_types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from ray_mcp.answers import RayAPI
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import COMPLETION_CACHE_S, COMPLETION_READ, COMPLETIONS_SHOWN
from ray_mcp.reference.pages import reference_pages
from ray_mcp.reference.source import submodules
from ray_mcp.server.context import CURRENT_CLUSTER, App

log = logging.getLogger("ray_mcp.server")


async def _jobs(api: RayAPI) -> list[str]:
    jobs = (await api.jobs.page(statuses=None, entrypoint_contains=None, limit=COMPLETION_READ)).jobs
    return [j.submission_id for j in jobs if j.submission_id]


async def _actors(api: RayAPI) -> list[str]:
    actors = (await api.actors.page(filters=[], limit=COMPLETION_READ, detail=False, notes=[])).actors
    return [*(a.name for a in actors if a.name), *(a.actor_id for a in actors)]


async def _placement_groups(api: RayAPI) -> list[str]:
    groups = await api.placement_groups.status(
        placement_group=None, state=None, job_id=None, limit=COMPLETION_READ, notes=[]
    )
    listed = groups.placement_groups
    return [*(g.name for g in listed if g.name), *(g.placement_group_id for g in listed)]


async def _serve_apps(api: RayAPI) -> list[str]:
    return list(await api.serve.app_instances())


async def _deployments(api: RayAPI) -> list[str]:
    status = await api.serve.status(app=None, log_lines=0)
    return [d.name for a in status.apps for d in a.deployments]


async def _nodes(api: RayAPI) -> list[str]:
    nodes, _capacities = await api.nodes.capacities()
    return [str(n["node_id"]) for n in nodes if n.get("node_id")]


# What each argument name holds, read from the cluster.
SOURCES: dict[str, Callable[[RayAPI], Awaitable[list[str]]]] = {
    "submission_id": _jobs,
    "job": _jobs,
    "actor": _actors,
    "placement_group": _placement_groups,
    "app": _serve_apps,
    "deployment": _deployments,
    "node_id": _nodes,
    "node": _nodes,
}


def api_names(value: str) -> list[str]:
    """Dotted Ray module names that continue ``value`` (the members of a module are on its page)."""
    parent = value.rpartition(".")[0] if "." in value else ""
    if not parent:
        return ["ray"]
    return [f"{parent}.{name}" for name in submodules(parent)]


class Completer:
    """The completion handler, with its short-lived cache of cluster reads."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._cache: dict[tuple[str, str], tuple[float, list[str]]] = {}

    async def complete(
        self,
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        del ref, context  # the argument's name says what it holds, in every template and prompt
        values = await self.candidates(argument.name, argument.value)
        prefix = argument.value.casefold()
        matching = list(dict.fromkeys(v for v in values if v.casefold().startswith(prefix)))
        shown = matching[:COMPLETIONS_SHOWN]
        return Completion(values=shown, total=len(matching), has_more=len(matching) > len(shown))

    async def candidates(self, name: str, value: str) -> list[str]:
        if name == "cluster":
            return list(self.app.connections)
        if name == "topic":
            return [p.topic for p in reference_pages()]
        if name == "qualified_name":
            return api_names(value)
        source = SOURCES.get(name)
        if source is None:
            return []
        cluster = CURRENT_CLUSTER.get() or self.app.default_cluster
        key = (cluster, name if source is not _jobs else "job")
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < COMPLETION_CACHE_S:
            return cached[1]
        try:
            values = await source(await self.app.api())
        except RayMCPError as exc:
            log.info("ray-mcp: no completions for %s: %s", name, exc)
            values = []
        self._cache[key] = (time.monotonic(), values)
        return values


def register(server: MCPServer, app: App) -> None:
    server.completion()(Completer(app).complete)
