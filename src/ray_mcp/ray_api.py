"""The only module that talks to Ray: the dashboard REST API (httpx), and Ray's own clients.

Ray is imported lazily, inside the functions that need it, so that the server answers ``initialize``
without paying for ``import ray``. Every call is wrapped in ``errors.dashboard_errors`` so that an HTTP
failure becomes one of our ``ToolError`` subclasses with an actionable message.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import httpx

from ray_mcp import models, shaping
from ray_mcp.errors import ClusterUnavailable, InvalidArgument, NotFound, RayRequestFailed, dashboard_errors
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
        transport: httpx.AsyncBaseTransport | None = None,
        gcs_address: str | None = None,
    ) -> None:
        self.dashboard_url = dashboard_url.rstrip("/")
        self.gcs_address = gcs_address  # known for embedded clusters and GCS addresses; else discovered
        self._gcs_channel: Any = None
        self.timeout_s = timeout_s
        self.source = source
        self._http = httpx.AsyncClient(
            base_url=self.dashboard_url,
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": USER_AGENT},
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()
        if self._gcs_channel is not None:
            self._gcs_channel.close()
            self._gcs_channel = None

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

    # -- cluster state: actors, placement groups, nodes, tasks, serve (issue 4) -------------------------------

    async def _state_page(
        self, resource: str, *, filters: list[tuple[str, str, str]], limit: int, detail: bool
    ) -> tuple[int, int, list[dict[str, Any]], list[str]]:
        """One State API list call: (total, matched, rows, notes). ``matched`` is exact: Ray filters every row."""
        result = await self.list_state(
            resource, what=f"the {resource} list (/api/v0/{resource})", filters=filters, limit=max(1, limit),
            detail=detail,
        )  # fmt: skip
        notes = [w for w in [result.get("partial_failure_warning"), *list(result.get("warnings") or [])] if w]
        rows = list(result.get("result") or [])[:limit]
        return int(result.get("total") or 0), int(result.get("num_filtered") or 0), rows, notes

    async def _summary(
        self, resource: str, *, filters: list[tuple[str, str, str]], **extra: str
    ) -> dict[str, Any]:
        params: list[tuple[str, str]] = [("timeout", str(max(1, int(self.timeout_s))))]
        params += list(extra.items())
        for key, predicate, value in filters:
            params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
        data = await self.get_data(
            f"/api/v0/{resource}/summarize", what=f"the {resource} summary (/api/v0/{resource}/summarize)",
            params=params,
        )  # fmt: skip
        return dict(data.get("result") or {})

    async def list_actors(
        self, *, filters: list[tuple[str, str, str]], limit: int, detail: bool, notes: list[str]
    ) -> models.ActorList:
        # detail=1 always: restarts and the death cause are detail columns in Ray's schema. Only `limit` rows come.
        page, summary = await _gather(
            self._state_page("actors", filters=filters, limit=limit, detail=True),
            self._summary("actors", filters=filters),
        )
        total, matched, rows, ray_notes = page
        cluster = ((summary.get("result") or {}).get("node_id_to_summary") or {}).get("cluster")
        return shaping.build_actor_list(
            total=total, matched=matched, rows=rows, summary=cluster, limit=limit, detail=detail,
            notes=notes + ray_notes,
        )  # fmt: skip

    async def get_actor(self, actor_id: str) -> models.Actor:
        check_id("actor", actor_id)
        _total, _matched, rows, _notes = await self._state_page(
            "actors", filters=[("actor_id", "=", actor_id)], limit=1, detail=True
        )
        if not rows:
            raise NotFound(
                f"No actor {actor_id!r} in the cluster at {self.dashboard_url}. "
                "Call list_actors to see the actor ids that exist."
            )
        return shaping.actor_from_state(rows[0], detail=True)

    async def node_capacities(self) -> tuple[list[dict[str, Any]], list[shaping.NodeCapacity]]:
        """Every node (State API) and, for the alive ones, total and available resources."""
        nodes_result, status = await _gather(
            self.list_state("nodes", what="the node list (/api/v0/nodes)", limit=10_000, detail=True),
            self.get_data("/api/cluster_status", what="the cluster status (/api/cluster_status)"),
        )
        nodes = list(nodes_result.get("result") or [])
        load = ((status or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
        known = {name for node in nodes for name in (node.get("resources_total") or {})}
        usage = {nid: uncamel_resources(u, known) for nid, u in (load.get("usageByNode") or {}).items()}
        return nodes, shaping.node_capacities(nodes, usage)

    async def list_nodes(self, *, state: str | None, limit: int, notes: list[str]) -> models.NodeList:
        nodes, capacities = await self.node_capacities()
        if state:
            nodes = [n for n in nodes if n.get("state") == state]
        return shaping.build_node_list(rows=nodes, capacities=capacities, limit=limit, notes=notes)

    async def pg_status(
        self, *, pg: str | None, state: str | None, job_id: str | None, limit: int, notes: list[str]
    ) -> models.PlacementGroupList:
        filters: list[tuple[str, str, str]] = []
        if pg is not None:
            is_id = re.fullmatch(r"[0-9a-fA-F]{36}", pg) is not None
            filters.append(("placement_group_id" if is_id else "name", "=", pg.lower() if is_id else pg))
        if state:
            filters.append(("state", "=", state))
        if job_id:
            check_id("job", job_id)
            filters.append(("creator_job_id", "=", job_id))
        page, by_state, (_nodes, capacities), strategies = await _gather(
            self._state_page("placement_groups", filters=filters, limit=limit, detail=True),
            self._pg_counts(filters),
            self.node_capacities(),
            self._pg_strategies(),
        )
        total, matched, rows, ray_notes = page
        if pg is not None and not rows:
            raise NotFound(
                f"No placement group with id or name {pg!r} in the cluster at {self.dashboard_url}. "
                "Call pg_status without pg to list them."
            )
        if strategies is None:
            ray_notes.append(
                "Strategies unknown: the GCS did not answer, so STRICT_* constraints are not checked."
            )
        groups = [
            shaping.placement_group_from_state(
                row, strategy=(strategies or {}).get(row.get("placement_group_id", "")), nodes=capacities
            )
            for row in rows
        ]
        return shaping.build_pg_list(
            total=total,
            matched=matched,
            groups=groups,
            by_state=by_state,
            limit=limit,
            notes=notes + ray_notes,
        )

    async def _pg_counts(self, filters: list[tuple[str, str, str]]) -> dict[str, int]:
        """Exact count per state: Ray has no PG summary, so one limit=1 call per state (each returns a total)."""
        if any(key == "state" for key, _p, _v in filters):
            return {}
        states = ("PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING")
        pages = await _gather(
            *(self._state_page("placement_groups", filters=[*filters, ("state", "=", s)], limit=1, detail=False)
              for s in states)
        )  # fmt: skip
        return {s: p[1] for s, p in zip(states, pages, strict=True) if p[1]}

    async def _pg_strategies(self) -> dict[str, str] | None:
        """Placement strategy per group id. The State API omits it; the GCS has it. None if unreachable."""
        try:
            return await anyio.to_thread.run_sync(self._pg_strategies_sync)
        except Exception:  # the GCS may be unreachable from here; the answer says so
            return None

    def _pg_strategies_sync(self) -> dict[str, str]:
        from ray.core.generated import common_pb2, gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.PlacementGroupInfoGcsServiceStub(self._gcs())
        request = gcs_service_pb2.GetAllPlacementGroupRequest()  # type: ignore[attr-defined]
        reply = stub.GetAllPlacementGroup(request, timeout=self.timeout_s)
        return {
            d.placement_group_id.hex(): common_pb2.PlacementStrategy.Name(d.strategy)  # type: ignore[attr-defined]
            for d in reply.placement_group_table_data
        }

    def _gcs(self) -> Any:
        """A gRPC channel to the GCS (created once). Finds the GCS if we were only given the dashboard."""
        if self._gcs_channel is None:
            from ray._private.grpc_utils import init_grpc_channel

            address = self.gcs_address or find_gcs_for_dashboard(self.dashboard_url, min(self.timeout_s, 3.0))
            if address is None:
                raise ClusterUnavailable(
                    f"Cannot find the GCS of the cluster whose dashboard is {self.dashboard_url}: this call needs it. "
                    "Start ray-mcp with the GCS address (--address host:6379)."
                )
            self.gcs_address = address
            self._gcs_channel = init_grpc_channel(address, asynchronous=False)
        return self._gcs_channel

    async def list_tasks(
        self, *, filters: list[tuple[str, str, str]], limit: int, detail: bool, notes: list[str]
    ) -> models.TaskList:
        total, matched, rows, ray_notes = await self._state_page(
            "tasks", filters=filters, limit=limit, detail=detail
        )
        return shaping.build_task_list(
            total=total, matched=matched, rows=rows, limit=limit, notes=notes + ray_notes
        )

    async def summarize_tasks(self, *, filters: list[tuple[str, str, str]]) -> models.TaskSummary:
        summary = await self._summary("tasks", filters=filters, summary_by="func_name")
        notes = [
            w for w in [summary.get("partial_failure_warning"), *list(summary.get("warnings") or [])] if w
        ]
        failed_counts: dict[str, int] = {}
        samples: dict[str, dict[str, Any]] = {}
        if not any(k == "state" and v != "FAILED" for k, _p, v in filters):
            failed_filters = [f for f in filters if f[0] != "state"] + [("state", "=", "FAILED")]
            # Basic columns only (error_type is one): small rows, up to Ray's 10,000 cap.
            _t, matched, rows, _n = await self._state_page(
                "tasks", filters=failed_filters, limit=10_000, detail=False
            )
            for row in rows:
                key = str(row.get("error_type") or "UNKNOWN")
                failed_counts[key] = failed_counts.get(key, 0) + 1
            if matched > len(rows):
                notes.append(f"Error types counted over the first {len(rows):,} of {matched:,} failed tasks.")
            pages = await _gather(
                *(self._state_page("tasks", filters=[*failed_filters, ("error_type", "=", et)], limit=1, detail=True)
                  for et in list(failed_counts)[:10] if et != "UNKNOWN")
            )  # fmt: skip
            for page in pages:
                if page[2]:
                    samples[str(page[2][0].get("error_type"))] = page[2][0]
        return shaping.build_task_summary(
            summary=summary, failed_counts=failed_counts, samples=samples, notes=notes
        )

    # -- serve --

    async def serve_details(self) -> dict[str, Any]:
        body = await self.get_json(
            "/api/serve/applications/", what="the Serve status (/api/serve/applications/)",
        )  # fmt: skip
        if not isinstance(body, dict):
            raise RayRequestFailed(
                f"The Ray dashboard at {self.dashboard_url} answered the Serve status oddly."
            )
        return body

    async def serve_status(self, *, app: str | None, log_lines: int) -> models.ServeStatus:
        details = await self.serve_details()
        status = shaping.build_serve_status(details, app=app)
        if app is not None and not status.apps:
            names = ", ".join(sorted(details.get("applications") or {})) or "none"
            where = "applications" if status.running else "Serve is not running, so none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.dashboard_url} ({where}: {names}). "
                "Call serve_status without app to see them all."
            )
        if log_lines > 0:
            for application, deployment in shaping.failing_deployments(status):
                await self._attach_replica_log(application.name, deployment, log_lines)
        return status

    async def _attach_replica_log(self, app: str, deployment: models.ServeDeployment, lines: int) -> None:
        """The last lines of a failing replica's Serve log (a replica that is not RUNNING, else the latest DEAD
        one), falling back to its worker's stderr."""
        replica = next((r for r in deployment.replicas if r.state != "RUNNING" and r.node_id), None)
        if replica is not None:
            replica_id, node_id, actor_id = replica.replica_id, replica.node_id, replica.actor_id
        else:
            _t, _m, rows, _n = await self._state_page(
                "actors", filters=[("class_name", "=", f"ServeReplica:{app}:{deployment.name}"), ("state", "=", "DEAD")],
                limit=100, detail=False,
            )  # fmt: skip
            if not rows:
                return
            row = rows[-1]
            replica_id, node_id, actor_id = (
                str(row.get("name", "")).rsplit("#", 1)[-1],
                row.get("node_id"),
                row.get("actor_id"),
            )
        attempts = []
        if replica_id and node_id:
            filename = f"serve/replica_{app}_{deployment.name}_{replica_id}.log"
            attempts.append(({"node_id": node_id, "filename": filename}, f"Serve log {filename}"))
        if actor_id:
            attempts.append(({"actor_id": actor_id, "suffix": "err"}, f"stderr of replica actor {actor_id}"))
        for params, source in attempts:
            try:
                text = await self.log_tail(params, lines=lines)
            except RayRequestFailed:
                continue
            tail = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(":")][-lines:]
            if tail:
                deployment.log_tail = [shaping.head_text(ln, 300) or "" for ln in tail]
                deployment.log_source = source
                return

    async def log_tail(self, selector: Mapping[str, str], *, lines: int) -> str:
        """Last ``lines`` of one log through /api/v0/logs/file (``selector``: actor_id [+ suffix], or node_id +
        filename). Small on purpose: the general tail_logs tool is built elsewhere on the same endpoint and can
        absorb this."""
        params = {**selector, "lines": str(lines), "filter_ansi_code": "true"}
        what = f"the log {dict(selector)} (/api/v0/logs/file)"
        with dashboard_errors(self.dashboard_url, what, self.timeout_s):
            response = await self._http.get("/api/v0/logs/file", params=params)
            response.raise_for_status()
            return response.text

    async def serve_put(self, config: dict[str, Any]) -> None:
        """PUT a whole Serve config. (Never DELETE /api/serve/applications/: that shuts all of Serve down.)"""
        what = "the Serve deploy (PUT /api/serve/applications/)"
        with dashboard_errors(self.dashboard_url, what, max(self.timeout_s, SERVE_PUT_TIMEOUT_S)):
            response = await self._http.put(
                "/api/serve/applications/", json=config, timeout=max(self.timeout_s, SERVE_PUT_TIMEOUT_S)
            )
            response.raise_for_status()

    async def serve_deploy(self, config: dict[str, Any], *, replace: bool) -> models.ServeChange:
        validated = await anyio.to_thread.run_sync(validate_serve_config, config)
        current = await self.serve_details()
        new_names = [a.get("name", "default") for a in validated.get("applications") or []]
        current_apps = [] if replace else shaping.declared_serve_apps(current, dropping=new_names)
        merged = shaping.merge_serve_config(current_apps, validated, replace=replace)
        await anyio.to_thread.run_sync(validate_serve_config, merged)
        await self.serve_put(merged)
        status = await self.serve_status(app=None, log_lines=0)
        names = [a.get("name", "default") for a in merged["applications"]]
        return models.ServeChange(action="deployed", applications=names, status=status)

    async def serve_delete_app(self, app: str) -> models.ServeChange:
        current = await self.serve_details()
        if app not in details_apps(current):
            names = ", ".join(sorted(details_apps(current))) or "none"
            raise NotFound(
                f"No Serve application {app!r} on the cluster at {self.dashboard_url} (applications: {names}). "
                "Call serve_status to see them."
            )
        config = shaping.config_without_app(shaping.declared_serve_apps(current, dropping=[app]), app)
        await self.serve_put(config)
        status = await self.serve_status(app=None, log_lines=0)
        return models.ServeChange(
            action=f"deleted {app}", applications=[a.get("name", "default") for a in config["applications"]],
            status=status,
        )  # fmt: skip

    # -- kill --

    async def kill_actor_and_wait(self, actor: models.Actor, *, no_restart: bool) -> models.ActorKill:
        """Kill, then watch the actor leave its state (bounded wait: the GCS updates within a second or two)."""
        await self.kill_actor(actor.actor_id, no_restart=no_restart)
        after = actor.state
        with anyio.move_on_after(KILL_WAIT_S):
            while after == actor.state:
                await anyio.sleep(0.25)
                after = (await self.get_actor(actor.actor_id)).state
        done = "is now" if after != actor.state else "was killed; Ray still reports it"
        return models.ActorKill(
            actor_id=actor.actor_id, done=True, no_restart=no_restart, state_before=actor.state, state_after=after,
            message=f"Actor {actor.actor_id} ({actor.class_name}) {done} {after}.",
        )  # fmt: skip

    async def kill_actor(self, actor_id: str, *, no_restart: bool) -> None:
        """Force-kill an actor through the GCS (KillActorViaGcs): what ray.kill does, without a driver."""
        await anyio.to_thread.run_sync(self._kill_actor_sync, actor_id, no_restart)

    def _kill_actor_sync(self, actor_id: str, no_restart: bool) -> None:
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.ActorInfoGcsServiceStub(self._gcs())
        request = gcs_service_pb2.KillActorViaGcsRequest(  # type: ignore[attr-defined]
            actor_id=bytes.fromhex(actor_id), force_kill=True, no_restart=no_restart
        )
        try:
            reply = stub.KillActorViaGcs(request, timeout=self.timeout_s)
        except Exception as exc:  # grpc.RpcError: the GCS did not take the request
            raise RayRequestFailed(
                f"The GCS at {self.gcs_address} did not kill actor {actor_id}: {exc}"
            ) from exc
        if reply.status.code != 0:
            raise RayRequestFailed(
                f"The GCS at {self.gcs_address} refused to kill actor {actor_id}: {reply.status.message}"
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


# -- cluster state helpers (issue 4) -----------------------------------------------------------------------

SERVE_PUT_TIMEOUT_S = 30.0
KILL_WAIT_S = 10.0
# Ray's ids are hex strings of fixed length: a malformed one gets a clear error before any request.
ID_HEX_LENGTHS = {"actor": 32, "placement group": 36, "node": 56, "job": 8, "task": 48}


def check_id(kind: str, value: str) -> str:
    """Reject a malformed Ray id with a message that says what a good one looks like."""
    length = ID_HEX_LENGTHS[kind]
    if not re.fullmatch(rf"[0-9a-f]{{{length}}}", value or ""):
        raise InvalidArgument(
            f"{value!r} is not {'an' if kind[0] in 'aeiou' else 'a'} {kind} id: Ray {kind} ids are {length} lowercase hex characters. "
            f"Copy one whole from the list tool's answer."
        )
    return value


async def _gather(*awaitables: Awaitable[Any]) -> list[Any]:
    """Run independent dashboard calls concurrently and return their results in order (errors propagate)."""
    results: list[Any] = [None] * len(awaitables)

    async def run(i: int, aw: Awaitable[Any]) -> None:
        results[i] = await aw

    async with anyio.create_task_group() as tg:
        for i, aw in enumerate(awaitables):
            tg.start_soon(run, i, aw)
    return results


def find_gcs_for_dashboard(dashboard_url: str, timeout_s: float) -> str | None:
    """The GCS whose dashboard is ``dashboard_url``: try host:6379, then (for a local dashboard) every GCS
    process on this machine, and keep the one that reports this dashboard. Imports Ray: slow, run in a thread."""
    from ray._private.services import find_gcs_addresses

    parts = urlsplit(dashboard_url)
    host, port = parts.hostname or "127.0.0.1", parts.port
    candidates = [f"{host}:6379"]
    if host in ("127.0.0.1", "localhost", "::1") or host == socket.gethostbyname(socket.gethostname()):
        candidates += sorted(f"127.0.0.1:{a.rsplit(':', 1)[1]}" for a in find_gcs_addresses())
    for candidate in candidates:
        reported = _gcs_reported_dashboard(candidate, timeout_s)
        if reported and urlsplit(reported if "://" in reported else f"http://{reported}").port == port:
            return candidate
    return None


def _gcs_reported_dashboard(gcs_address: str, timeout_s: float) -> str | None:
    import grpc
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    channel = init_grpc_channel(gcs_address, asynchronous=False)
    try:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        kv_get = gcs_service_pb2.InternalKVGetRequest  # type: ignore[attr-defined]
        request = kv_get(key=b"dashboard", namespace=b"dashboard")
        reply = stub.InternalKVGet(request, timeout=timeout_s)
        return reply.value.decode() if reply.value else None
    except grpc.RpcError:
        return None
    finally:
        channel.close()


def validate_serve_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check a Serve config against Ray's own schema before sending it. Imports Ray Serve: run in a thread."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    if not isinstance(config, Mapping) or not isinstance(config.get("applications"), list):
        raise InvalidArgument(
            'A Serve config is {"applications": [{"name": ..., "import_path": "module:app", "route_prefix": ..., '
            '"runtime_env": {...}, "deployments": [...]}]}; the one given has no "applications" list.'
        )
    try:
        ServeDeploySchema.model_validate(dict(config))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
        )
        raise InvalidArgument(f"The Serve config is not valid, nothing was deployed: {problems}.") from exc
    except ValueError as exc:
        raise InvalidArgument(f"The Serve config is not valid, nothing was deployed: {exc}.") from exc
    return dict(config)


def details_apps(details: Mapping[str, Any]) -> list[str]:
    return list((details.get("applications") or {}).keys())
