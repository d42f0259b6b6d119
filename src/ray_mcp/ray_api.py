"""The only module that talks to Ray: the dashboard REST API (httpx), and Ray's own clients.

Ray is imported lazily, inside the functions that need it, so that the server answers ``initialize``
without paying for ``import ray``. Every call is wrapped in ``errors.dashboard_errors`` so that an HTTP
failure becomes one of our ``ToolError`` subclasses with an actionable message.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ray_mcp import models
from ray_mcp.errors import RayRequestFailed, dashboard_errors
from ray_mcp.shaping import demand_is_feasible, node_resources, uncamel_resources

USER_AGENT = "ray-mcp"

Params = Any  # what httpx accepts as query params


class RayAPI:
    """A connection to one Ray cluster through its dashboard. One instance per cluster, reused by every call."""

    def __init__(
        self,
        dashboard_url: str,
        *,
        timeout_s: float,
        source: str = "external",
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.timeout_s = timeout_s
        self.source = source
        # Ray's own credentials (token auth header, proxy headers) and TLS settings, for Ray's clients too.
        self.headers = dict(headers or {})
        self.verify = verify
        self._http = httpx.AsyncClient(
            base_url=self.dashboard_url,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": USER_AGENT, **self.headers},
            verify=verify,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- raw dashboard access ---------------------------------------------------------------------------

    async def get_json(self, path: str, *, what: str, params: Params = None) -> Any:
        """GET a dashboard endpoint and return its decoded JSON body."""
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            response = await self._http.get(path, params=params)
            response.raise_for_status()
            return response.json()

    async def get_data(self, path: str, *, what: str, params: Params = None) -> Any:
        """GET an endpoint that answers in the dashboard's ``{"result", "msg", "data"}`` envelope."""
        body = await self.get_json(path, what=what, params=params)
        if not isinstance(body, dict) or "data" not in body:
            raise RayRequestFailed(f"The Ray dashboard at {self.dashboard_url} answered {what} without data.")
        if body.get("result") is False:
            raise RayRequestFailed(
                f"The Ray dashboard at {self.dashboard_url} failed {what}: {body.get('msg') or 'no message'}."
            )
        return body["data"]

    async def list_state(
        self,
        resource: str,
        *,
        what: str,
        filters: Sequence[tuple[str, str, str]] = (),
        limit: int = 100,
        detail: bool = False,
    ) -> dict[str, Any]:
        """One State API list call (``/api/v0/<resource>``): returns Ray's result with totals."""
        params: list[tuple[str, str]] = [("limit", str(limit)), ("detail", "1" if detail else "0")]
        params += [("timeout", str(max(1, int(self.timeout_s))))]
        for key, predicate, value in filters:
            params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
        data = await self.get_data(f"/api/v0/{resource}", what=what, params=params)
        return data["result"]

    # -- cluster -----------------------------------------------------------------------------------------

    async def version(self) -> dict[str, Any]:
        return await self.get_json("/api/version", what="the version request (/api/version)")

    async def cluster_status(self, *, max_nodes: int) -> models.ClusterStatus:
        """Nodes, resource use, pending demands and autoscaler state: what ``ray status`` shows."""
        version = await self.version()
        nodes_result = await self.list_state(
            "nodes", what="the node list (/api/v0/nodes)", limit=10_000, detail=True
        )
        status = await self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)")
        pending_pgs = await self.list_state(
            "placement_groups",
            what="the placement group list (/api/v0/placement_groups)",
            filters=[("state", "=", "PENDING")],
            limit=1,
        )
        return build_cluster_status(
            dashboard_url=self.dashboard_url,
            source=self.source,
            version=version,
            nodes=nodes_result.get("result") or [],
            status=status,
            pending_placement_groups=int(pending_pgs.get("num_filtered") or 0),
            max_nodes=max_nodes,
        )


def build_cluster_status(
    *,
    dashboard_url: str,
    source: str,
    version: Mapping[str, Any],
    nodes: list[Mapping[str, Any]],
    status: Mapping[str, Any],
    pending_placement_groups: int,
    max_nodes: int,
) -> models.ClusterStatus:
    """Join the node list and the autoscaler report into one ClusterStatus (pure, tested without Ray)."""
    cluster_status = status.get("clusterStatus") or {}
    load = cluster_status.get("loadMetricsReport") or {}
    known = {name for node in nodes for name in (node.get("resources_total") or {})}
    usage_by_node = {
        node_id: uncamel_resources(usage, known) for node_id, usage in (load.get("usageByNode") or {}).items()
    }

    node_models: list[models.NodeStatus] = []
    totals: dict[str, list[float]] = {}
    for node in nodes:
        alive = node.get("state") == "ALIVE"
        node_id = str(node.get("node_id", ""))
        used_total = usage_by_node.get(node_id, {})
        resources = node_resources(node.get("resources_total") or {}, used_total) if alive else {}
        if alive:
            for name, use in resources.items():
                acc = totals.setdefault(name, [0.0, 0.0])
                acc[0] += use.used
                acc[1] += use.total
        node_models.append(
            models.NodeStatus(
                node_id=node_id,
                ip=str(node.get("node_ip", "")),
                state="ALIVE" if alive else "DEAD",
                is_head=bool(node.get("is_head_node")),
                resources=resources,
                death_reason=None if alive else (node.get("state_message") or "no reason recorded"),
            )
        )
    node_models.sort(key=lambda n: (not n.is_head, n.state != "ALIVE", n.ip, n.node_id))

    alive_totals = [n.resources for n in node_models if n.state == "ALIVE"]
    node_types = [shape for shape, _count in (load.get("nodeTypes") or [])]
    demands = _demands(load, alive_totals, node_types)

    autoscaler = _autoscaler(cluster_status.get("autoscalerReport"), status.get("autoscalingError"))
    shown = node_models[:max_nodes]
    alive_count = sum(1 for n in node_models if n.state == "ALIVE")
    hints: list[str] = []
    if len(shown) < len(node_models):
        hints.append(
            f"{len(node_models) - len(shown)} more nodes not shown; call cluster_status with a larger max_nodes."
        )
    if pending_placement_groups:
        hints.append(
            f"{pending_placement_groups} placement groups are PENDING; pg_status explains why each waits."
        )
    if any(d.infeasible for d in demands):
        hints.append(
            "Some demands fit on no node: lower the request, or add a node with those resources "
            "(an autoscaler adds one only if a node type can hold it)."
        )
    return models.ClusterStatus(
        dashboard_url=dashboard_url,
        source=source,
        ray_version=str(version.get("ray_version", "unknown")),
        session_name=version.get("session_name"),
        nodes_alive=alive_count,
        nodes_dead=len(node_models) - alive_count,
        resources={name: models.ResourceUse(used=u, total=t) for name, (u, t) in sorted(totals.items())},
        nodes=shown,
        nodes_shown=len(shown),
        pending_demands=demands,
        pending_placement_groups=pending_placement_groups,
        autoscaler=autoscaler,
        hints=hints,
    )


def _demands(
    load: Mapping[str, Any],
    node_resources_list: list[dict[str, models.ResourceUse]],
    node_types: list[Mapping[str, float]],
) -> list[models.Demand]:
    shapes = [{k: v.total for k, v in res.items()} for res in node_resources_list] + [
        dict(t) for t in node_types
    ]
    out: list[models.Demand] = []
    for shape, count in load.get("resourceDemand") or []:
        out.append(
            models.Demand(
                kind="task_or_actor",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    for pg, count in load.get("pgDemand") or []:
        bundles = [_clean_shape(b) for b, n in pg.get("bundles") or [] for _ in range(int(n))]
        strategy = pg.get("strategy")
        out.append(
            models.Demand(
                kind="placement_group",
                bundles=bundles,
                strategy=strategy,
                count=int(count),
                infeasible=not demand_is_feasible(bundles, shapes, strategy=strategy),
            )
        )
    for shape, count in load.get("requestDemand") or []:
        out.append(
            models.Demand(
                kind="request_resources",
                bundles=[_clean_shape(shape)],
                count=int(count),
                infeasible=not demand_is_feasible([shape], shapes, strategy=None),
            )
        )
    return out


def _clean_shape(shape: Mapping[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in shape.items() if not str(k).startswith("node:")}


def _autoscaler(report: Mapping[str, Any] | None, error: str | None) -> models.AutoscalerStatus | None:
    if not report and not error:
        return None
    report = report or {}
    pending_nodes = [
        " ".join(str(x) for x in (p if isinstance(p, list | tuple) else [p]))
        for p in report.get("pendingNodes") or []
    ]
    failed_nodes = [
        " ".join(str(x) for x in (f if isinstance(f, list | tuple) else [f]))
        for f in report.get("failedNodes") or []
    ]
    launches = {str(k): int(v) for k, v in (report.get("pendingLaunches") or {}).items()}
    return models.AutoscalerStatus(
        # A "legacy" report with no launches and no node types is what a fixed-size cluster (ray start) shows.
        kind="legacy" if report.get("legacy") else "v2",
        active_nodes=sum(int(v) for v in (report.get("activeNodes") or {}).values()),
        pending_nodes=pending_nodes,
        pending_launches=launches,
        failed_nodes=failed_nodes,
        error=error or None,
    )


async def dashboard_answers(url: str, timeout_s: float) -> bool:
    """Is there a Ray dashboard at this URL? (Never raises.)"""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            r = await http.get(f"{url}/api/version")
            return r.status_code == 200 and "ray_version" in r.json()
    except (httpx.HTTPError, ValueError):
        return False


async def head_node_alive(url: str, timeout_s: float) -> bool:
    """Does the dashboard at this URL answer the State API with at least one ALIVE node? (Never raises.)"""
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as http:
            r = await http.get(f"{url}/api/v0/nodes", params={"limit": 10})
            nodes = r.json()["data"]["result"]["result"]
            return r.status_code == 200 and any(n.get("state") == "ALIVE" for n in nodes)
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return False


def dashboard_url_from_gcs(gcs_address: str, timeout_s: float) -> str | None:
    """Ask the GCS where the dashboard listens (Ray records it in its internal KV). Imports Ray: slow."""
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    client = GcsClient(address=gcs_address)
    value = client.internal_kv_get(b"dashboard", b"dashboard", timeout=timeout_s)
    if not value:
        return None
    address = value.decode()
    return address if re.match(r"^https?://", address) else f"http://{address}"


# -- the live API reference (imports the installed Ray on demand) -----------------------------------------

API_DOC_MAX_CHARS = 12_000
API_MEMBERS_MAX = 60


def describe_symbol(qualified_name: str) -> str:
    """Markdown with the signature and docstring of a public Ray symbol, read from the installed Ray.

    Raises LookupError, whose message lists close matches, for a name that does not exist.
    """
    import importlib
    import inspect

    name = qualified_name.strip()
    parts = name.split(".")
    if parts[0] != "ray" or not all(p.isidentifier() for p in parts):
        raise LookupError(f"{qualified_name!r} is not a Ray name. Ask for a dotted name such as ray.remote.")
    if any(p.startswith("_") for p in parts[1:]):
        raise LookupError(f"{qualified_name!r} is private; only public Ray names are described.")

    try:
        obj: Any = importlib.import_module("ray")
    except ImportError as exc:
        raise LookupError(f"Ray cannot be imported here: {exc}") from exc
    obj = _resolve(obj, parts, 1)
    if obj is _MISSING:
        parent, i = _deepest_parent(parts)
        public = [m for m in dir(parent) if not m.startswith("_")]
        close = difflib.get_close_matches(parts[i], public, n=5, cutoff=0.5)
        prefix = ".".join(parts[:i])
        hint = (
            ", ".join(f"{prefix}.{c}" for c in close) or f"none; read ray-docs://api/{prefix} for its members"
        )
        raise LookupError(f"{name} does not exist in Ray {_ray_version()}. Close matches: {hint}.")

    kind = "module" if inspect.ismodule(obj) else "class" if inspect.isclass(obj) else "function"
    if not inspect.ismodule(obj) and not inspect.isclass(obj) and not callable(obj):
        kind = type(obj).__name__
    lines = [f"# {name}", "", f"{kind} in Ray {_ray_version()} (read from the installed package)", ""]
    target = getattr(obj, "__wrapped__", obj)
    with contextlib.suppress(TypeError, ValueError):
        if callable(obj) and not inspect.ismodule(obj):
            lines += ["```python", f"{parts[-1]}{inspect.signature(target)}", "```", ""]
    with contextlib.suppress(TypeError, OSError):
        source = inspect.getsourcefile(target)
        if source:
            _, line = inspect.getsourcelines(target)
            lines += [f"Defined in `{source.split('site-packages/')[-1]}` line {line}.", ""]
    doc = inspect.getdoc(obj) or "(no docstring)"
    if len(doc) > API_DOC_MAX_CHARS:
        doc = doc[:API_DOC_MAX_CHARS] + f"\n\n[docstring cut at {API_DOC_MAX_CHARS} characters]"
    lines += [doc, ""]
    if inspect.ismodule(obj) or inspect.isclass(obj):
        members = getattr(obj, "__all__", None) if inspect.ismodule(obj) else None
        members = sorted(members or (m for m in vars(obj) if not m.startswith("_")))
        if members:
            shown = members[:API_MEMBERS_MAX]
            lines.append(f"## Public members ({len(members)})")
            lines += [f"- `{name}.{m}`" for m in shown]
            if len(members) > len(shown):
                lines.append(f"- … {len(members) - len(shown)} more")
    return "\n".join(lines).rstrip() + "\n"


_MISSING = object()


def _resolve(obj: Any, parts: list[str], i: int) -> Any:
    """Walk ``parts[i:]`` from ``obj``. The package namespace wins over a submodule of the same name
    (``ray.serve.deployment`` is the decorator), with a fall back to the submodule when the rest of the
    name only exists there (``ray.util.placement_group.placement_group``)."""
    import importlib

    if i == len(parts):
        return obj
    candidates = []
    if hasattr(obj, parts[i]):
        candidates.append(getattr(obj, parts[i]))
    try:
        module = importlib.import_module(".".join(parts[: i + 1]))
        if all(module is not c for c in candidates):
            candidates.append(module)
    except ImportError:
        pass
    for candidate in candidates:
        found = _resolve(candidate, parts, i + 1)
        if found is not _MISSING:
            return found
    return _MISSING


def _deepest_parent(parts: list[str]) -> tuple[Any, int]:
    """The object of the longest prefix of ``parts`` that resolves, and the index of the first part that does not."""
    import importlib

    obj: Any = importlib.import_module("ray")
    for i in range(1, len(parts)):
        found = _resolve(obj, parts[: i + 1], i)
        if found is _MISSING:
            return obj, i
        obj = found
    return obj, len(parts) - 1


def _ray_version() -> str:
    from importlib.metadata import version

    return version("ray")
