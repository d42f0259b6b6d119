"""A Kubernetes API server on loopback, for the KubeRay tests: no real kube-apiserver can run here.

It speaks the API's own paths and JSON (the ones ray-mcp uses: custom objects of ray.io/v1, pods, pod logs,
events, services and the service proxy), checks the bearer token a kubeconfig's exec plugin hands the real
client (kubernetes_asyncio), answers 401/403/404/409/410/422 as the API server does (a Status object), and
records every (verb, resource) it served, so the RBAC Roles can be checked against what was used, and every
request as it arrived (method, raw path and query). Its service-proxy route forwards to a real Ray head's dashboard.

Beyond single objects, it follows the API's documented semantics (no server ran to confirm them): lists in a
namespace and across all namespaces, paged by ``limit`` and ``continue`` (a compacted token: 410 Expired);
RBAC by namespaced Roles only (``rbac_namespaces``: cluster-wide lists and other namespaces answer 403);
server-side apply with field managers, conflicts and ``force`` (tests/kube_apply.py), ``dryRun=All``
returning the object as it would be, a ``resourceVersion`` in the applied object as a precondition (409), the
CRD's schema checked on every write (422), ``generation`` bumped on a spec change; deletes with uid and
resourceVersion preconditions and ``dryRun``. The objects it holds are the tests' (KubeRay samples with
statuses, validated against the vendored CRD schemas).
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import jsonschema
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from tests import kube_apply
from tests.support import serve_asgi

TOKEN = "kube-test-token-3f9a1c"  # what the exec plugin prints and the server requires


def status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


RESOURCES = {
    "RayCluster": "rayclusters",
    "RayJob": "rayjobs",
    "RayService": "rayservices",
    "RayCronJob": "raycronjobs",
    "Pod": "pods",
    "Event": "events",
    "Service": "services",
    "NetworkPolicy": "networkpolicies",
}
SCHEMAS = Path(__file__).parent / "schemas" / "kuberay"
CREATED_BY = "kubectl-client-side-apply"  # the manager of objects the tests put (kubectl apply, client side)
EXPIRED = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter."
)


def crd_schema(plural: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMAS / f"{plural}.v1.schema.json").read_text())["openAPIV3Schema"])


class KubeState:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (resource, namespace, name) -> object
        self.logs: dict[tuple[str, str, bool], str] = {}  # (pod, container, previous) -> text
        self.used: set[tuple[str, str]] = set()  # (verb, resource) served
        self.requests: list[tuple[str, str]] = []  # (method, raw path) of every request, as it arrived
        self.forbidden: set[tuple[str, str]] = set()  # (verb, resource) answered 403
        # RBAC by namespaced Roles only: lists across all namespaces are refused, and so is every request in a
        # namespace not named here (None: a ClusterRole, every namespace).
        self.rbac_namespaces: set[str] | None = None
        self.expire_continue = False  # answer a continue token 410 Expired (the list was compacted meanwhile)
        self.dashboards: dict[str, str] = {}  # head service name -> the real dashboard URL behind it
        self.proxied: list[
            tuple[str, str, str | None]
        ] = []  # (namespace, service, Ray's token) per proxy request
        self.revision = 100  # the store's resourceVersion: every write takes the next
        self.lock = threading.Lock()

    def next_revision(self) -> str:
        self.revision += 1
        return str(self.revision)

    def put(self, obj: dict[str, Any]) -> None:
        """An object as the tests made it (KubeRay's: owned by kubectl's client-side apply, as if created so)."""
        resource = RESOURCES[obj["kind"]]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{resource}-{meta['name']}")
        meta.setdefault("resourceVersion", "1")
        meta.setdefault("creationTimestamp", "2026-12-01T10:00:00Z")
        if obj["apiVersion"] == "ray.io/v1":
            meta.setdefault("generation", 1)
            if "managedFields" not in meta:
                kube_apply.own_everything(obj, manager=CREATED_BY, schema=crd_schema(resource), now=NOW)
        with self.lock:
            self.objects[(resource, meta["namespace"], meta["name"])] = obj

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, ns, name))

    def items(self, resource: str, ns: str | None) -> list[dict[str, Any]]:
        """Sorted by namespace and name (the order of the store's keys); ``ns`` None: every namespace."""
        return [o for (r, n, _), o in sorted(self.objects.items()) if r == resource and ns in (None, n)]


NOW = "2026-12-01T12:00:00Z"
GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # what Go's strconv.ParseBool reads as true


def _terms(selector: str) -> list[str]:
    """A selector's terms: split on the commas outside parentheses (``k in (a,b)`` is one term)."""
    terms, depth, current = [], 0, ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(current.strip())
            current = ""
        else:
            current += ch
    return [t for t in [*terms, current.strip()] if t]


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    """Label selectors as Kubernetes reads them: key=value, key!=value, key, !key, key in (..), key notin (..)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in _terms(selector or ""):
        if " in (" in term or " notin (" in term:
            key, op, rest = term.partition(" notin (") if " notin (" in term else term.partition(" in (")
            values = {v.strip() for v in rest.rstrip(")").split(",")}
            if (labels.get(key.strip()) in values) != (op == " in ("):
                return False
        elif "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, _, value = term.partition("=")
            if labels.get(key) != value.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def page(state: KubeState, request: Request, items: list[dict[str, Any]], api_version: str) -> Response:
    """One page of a list, as the API pages with ``limit`` and ``continue``: the token is opaque to clients
    (here: where the next page starts, in base64); a compacted one answers 410 Expired."""
    query = request.query_params
    start = ""
    if token := query.get("continue"):
        if state.expire_continue:
            return status(410, "Expired", EXPIRED)
        try:
            start = json.loads(base64.b64decode(token))["start"]
        except (ValueError, KeyError, TypeError):
            return status(400, "BadRequest", "continue key is not valid")
    keyed = [(f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}", o) for o in items]
    rest = [(k, o) for k, o in keyed if k > start] if start else keyed
    limit = int(query.get("limit") or 0)
    shown = rest[:limit] if limit else rest
    meta: dict[str, Any] = {"resourceVersion": str(state.revision)}
    if limit and len(rest) > limit:
        meta["continue"] = base64.b64encode(json.dumps({"start": shown[-1][0]}).encode()).decode()
        meta["remainingItemCount"] = len(rest) - limit
    body = {"kind": "List", "apiVersion": api_version, "metadata": meta, "items": [o for _, o in shown]}
    return JSONResponse(body)


def make_app(state: KubeState) -> Starlette:
    def check(request: Request, verb: str, resource: str, ns: str | None = None) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return status(401, "Unauthorized", "Unauthorized")
        scoped = state.rbac_namespaces
        if (verb, resource) in state.forbidden or (scoped is not None and (ns is None or ns not in scoped)):
            where = f' in the namespace "{ns}"' if ns else " at the cluster scope"
            return status(
                403,
                "Forbidden",
                f'{resource} is forbidden: User "ray-mcp" cannot {verb} resource "{resource}"{where}',
            )
        state.used.add((verb, resource))
        return None

    async def custom_all(request: Request) -> Response:
        plural = request.path_params["plural"]
        if (denied := check(request, "list", f"{plural}.ray.io")) is not None:
            return denied
        return page(state, request, state.items(plural, None), "ray.io/v1")

    async def custom(request: Request) -> Response:
        ns, plural = request.path_params["ns"], request.path_params["plural"]
        name = request.path_params.get("name")
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "DELETE": "delete"}[request.method]
        if (denied := check(request, verb, f"{plural}.ray.io", ns)) is not None:
            return denied
        if name is None:
            return page(state, request, state.items(plural, ns), "ray.io/v1")
        obj = state.get(plural, ns, name)
        if (
            request.method == "PATCH"
            and request.headers.get("content-type") == "application/apply-patch+yaml"
        ):
            return await server_side_apply(request, plural, ns, name, obj)
        if obj is None:
            return status(404, "NotFound", f'{plural}.ray.io "{name}" not found')
        if request.method == "PATCH":
            return await json_patch(request, plural, obj)
        if request.method == "DELETE":
            return await delete(request, plural, ns, name, obj)
        return JSONResponse(obj)

    async def json_patch(request: Request, plural: str, obj: dict[str, Any]) -> Response:
        if request.headers.get("content-type") != "application/json-patch+json":
            return status(415, "UnsupportedMediaType", "expected a JSON patch or an apply patch")
        try:
            patched = jsonpatch.apply_patch(obj, json.loads(await request.body()))
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            return status(422, "Invalid", str(exc))
        manager = request.query_params.get("fieldManager") or "OpenAPI-Generator"
        kube_apply.record_update(obj, patched, manager=manager, schema=crd_schema(plural), now=NOW)
        return commit(plural, obj, patched, dry_run=False)

    def commit(
        plural: str, before: dict[str, Any] | None, after: dict[str, Any], *, dry_run: bool
    ) -> Response:
        """Validate against the CRD's schema (422 as the API server answers), bump generation on a spec change
        and resourceVersion on any, and store unless a dry run."""
        errors = list(jsonschema.Draft7Validator(crd_schema(plural)).iter_errors(after))
        if errors:
            causes = [
                {"reason": "FieldValueInvalid", "message": e.message, "field": ".".join(map(str, e.path))}
                for e in errors[:5]
            ]
            response = status(
                422, "Invalid", f'{after["kind"]}.ray.io "{after["metadata"]["name"]}" is invalid'
            )
            body = json.loads(response.body)
            body["details"] = {"causes": causes}
            return JSONResponse(body, status_code=422)
        meta = after["metadata"]
        if before is None:
            meta.update(
                uid=f"uid-{plural}-{meta['name']}-{state.revision}", generation=1, creationTimestamp=NOW
            )
        elif before.get("spec") != after.get("spec"):
            meta["generation"] = int(before["metadata"].get("generation") or 1) + 1
        if dry_run:
            return JSONResponse(after)
        meta["resourceVersion"] = state.next_revision()
        state.put(after)
        return JSONResponse(after, status_code=201 if before is None else 200)

    async def server_side_apply(
        request: Request, plural: str, ns: str, name: str, obj: dict[str, Any] | None
    ) -> Response:
        query = request.query_params
        manager = query.get("fieldManager")
        if not manager:
            return status(
                422,
                "Invalid",
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
            )
        config = yaml.safe_load(await request.body())
        meta = config.get("metadata") or {}
        if meta.get("name") != name or meta.get("namespace", ns) != ns:
            return status(400, "BadRequest", "the name of the object does not match the name on the URL")
        wanted = meta.get("resourceVersion")
        if wanted and (obj is None or obj["metadata"]["resourceVersion"] != wanted):
            return status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {plural}.ray.io "{name}": the object has been modified; please apply your changes to the latest version and try again',
            )
        try:
            after = kube_apply.apply(
                obj,
                config,
                manager=manager,
                force=query.get("force") in GO_TRUE,
                schema=crd_schema(plural),
                now=NOW,
            )
        except kube_apply.Conflict as exc:
            causes = [
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{who}" using ray.io/v1',
                    "field": kube_apply.dotted(path),
                }
                for path, who in exc.conflicts
            ]
            listed = "\n".join(f"* {c['message']}: {c['field']}" for c in causes)
            response = status(409, "Conflict", f"Apply failed with {len(causes)} conflict(s):\n{listed}")
            body = json.loads(response.body)
            body["details"] = {"name": name, "group": "ray.io", "kind": plural, "causes": causes}
            return JSONResponse(body, status_code=409)
        after["metadata"].setdefault("namespace", ns)
        return commit(plural, obj, after, dry_run=query.get("dryRun") == "All")

    async def delete(request: Request, plural: str, ns: str, name: str, obj: dict[str, Any]) -> Response:
        body = json.loads(await request.body() or b"{}") or {}
        pre = body.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            return status(409, "Conflict", "Precondition failed: UID in precondition does not match")
        if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            return status(
                409, "Conflict", "Precondition failed: ResourceVersion in precondition does not match"
            )
        if request.query_params.get("dryRun") != "All" and "All" not in (body.get("dryRun") or []):
            with state.lock:
                del state.objects[(plural, ns, name)]
        return JSONResponse(
            {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}
        )

    async def network_policies(request: Request) -> Response:
        ns = request.path_params["ns"]
        if (denied := check(request, "list", "networkpolicies.networking.k8s.io", ns)) is not None:
            return denied
        return page(state, request, state.items("networkpolicies", ns), "networking.k8s.io/v1")

    async def pods_all(request: Request) -> Response:
        if (denied := check(request, "list", "pods")) is not None:
            return denied
        selector = request.query_params.get("labelSelector")
        return page(state, request, [o for o in state.items("pods", None) if _matches(o, selector)], "v1")

    async def core_list(request: Request) -> Response:
        ns, resource = request.path_params["ns"], request.path_params["resource"]
        if (denied := check(request, "list", resource, ns)) is not None:
            return denied
        selector = request.query_params.get("labelSelector")
        items = [o for o in state.items(resource, ns) if _matches(o, selector)]
        return page(state, request, items, "v1")

    async def core_get(request: Request) -> Response:
        ns, resource, name = (request.path_params[k] for k in ("ns", "resource", "name"))
        if (denied := check(request, "get", resource, ns)) is not None:
            return denied
        obj = state.get(resource, ns, name)
        return JSONResponse(obj) if obj else status(404, "NotFound", f'{resource} "{name}" not found')

    async def pod_log(request: Request) -> Response:
        ns, name = request.path_params["ns"], request.path_params["name"]
        if (denied := check(request, "get", "pods/log", ns)) is not None:
            return denied
        pod = state.get("pods", ns, name)
        if pod is None:
            return status(404, "NotFound", f'pods "{name}" not found')
        container = request.query_params.get("container") or pod["spec"]["containers"][0]["name"]
        previous = (
            request.query_params.get("previous") or ""
        ).lower() == "true"  # Go's ParseBool: true, True
        text = state.logs.get((name, container, previous))
        if text is None:
            return status(
                400, "BadRequest", f'previous terminated container "{container}" in pod "{name}" not found'
            )
        lines = text.splitlines(keepends=True)
        tail = int(request.query_params.get("tailLines") or len(lines))
        out = "".join(lines[-tail:]).encode()
        limit = int(request.query_params.get("limitBytes") or len(out))
        return PlainTextResponse(out[:limit])

    async def proxy(request: Request) -> Response:
        ns, target = request.path_params["ns"], request.path_params["target"]
        verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[
            request.method
        ]
        if (denied := check(request, verb, "services/proxy", ns)) is not None:
            return denied
        service, _, port = target.partition(":")
        ray_token = request.headers.get("x-ray-authorization")
        state.proxied.append((ns, service, ray_token))
        svc = state.get("services", ns, service)
        named = [
            p for p in (svc or {}).get("spec", {}).get("ports", []) if port in (p.get("name"), str(p["port"]))
        ]
        if svc is None or not named or service not in state.dashboards:
            return status(503, "ServiceUnavailable", f'no endpoints available for service "{service}"')
        url = state.dashboards[service] + "/" + request.path_params["path"]
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "authorization", "content-length")
        }
        async with httpx.AsyncClient(timeout=60) as client:  # the API server strips the caller's credentials
            answer = await client.request(
                request.method,
                url,
                params=request.query_params,
                content=await request.body(),
                headers=headers,
            )
        keep = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type",)}
        return Response(answer.content, status_code=answer.status_code, headers=keep)

    base = "/apis/ray.io/v1/namespaces/{ns}/{plural}"
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    return Starlette(
        routes=[
            Route("/apis/ray.io/v1/{plural}", custom_all, methods=["GET"]),
            Route(base, custom, methods=["GET"]),
            Route(base + "/{name}", custom, methods=["GET", "PATCH", "DELETE"]),
            Route("/api/v1/pods", pods_all),
            Route("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies", network_policies),
            Route("/api/v1/namespaces/{ns}/pods/{name}/log", pod_log),
            Route("/api/v1/namespaces/{ns}/services/{target}/proxy/{path:path}", proxy, methods=methods),
            Route("/api/v1/namespaces/{ns}/{resource}", core_list),
            Route("/api/v1/namespaces/{ns}/{resource}/{name}", core_get),
        ]
    )


def serve(state: KubeState) -> contextlib.AbstractContextManager[str]:
    """Run the API server on a free loopback port in a thread; yields its URL. Every request is recorded as it
    arrived (method and raw path), routed or not."""
    app = make_app(state)

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            query = scope.get("query_string", b"").decode()
            path = scope.get("raw_path", b"").decode() + (f"?{query}" if query else "")
            state.requests.append((scope["method"], path))
        await app(scope, receive, send)

    return serve_asgi(recorded)


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    namespace: str = "default",
    others: dict[str, tuple[str, str]] | None = None,
    static_token: bool = False,
) -> Path:
    """A kubeconfig whose user gets its token from an exec plugin (as EKS and GKE do): a real process the
    client runs, printing an ExecCredential. ``others``: more contexts, name -> (server, namespace).
    ``static_token``: the token written in the file instead, so that a test that is not live starts no process."""
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": TOKEN},
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "test",
        "clusters": [{"name": "loopback", "cluster": {"server": server}}]
        + [
            {"name": f"loopback-{name}", "cluster": {"server": url}}
            for name, (url, _ns) in (others or {}).items()
        ],
        "contexts": [
            {"name": "test", "context": {"cluster": "loopback", "user": "exec", "namespace": namespace}}
        ]
        + [
            {"name": name, "context": {"cluster": f"loopback-{name}", "user": "exec", "namespace": ns}}
            for name, (_url, ns) in (others or {}).items()
        ],
        "users": [
            {
                "name": "exec",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": ["-c", f"print({json.dumps(json.dumps(credential))})"],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }
    if static_token:
        config["users"] = [{"name": "exec", "user": {"token": TOKEN}}]
    path.write_text(yaml.safe_dump(config))
    return path
