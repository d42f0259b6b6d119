"""A Kubernetes API server on loopback, for the KubeRay tests: no real kube-apiserver can run here.

It speaks the API's own paths and JSON (the ones ray-mcp uses: custom objects of ray.io/v1, pods, pod logs,
events, services and the service proxy), checks the bearer token a kubeconfig's exec plugin hands the real
client (kubernetes_asyncio), answers 401/403/404 as the API server does (a Status object), and records every
(verb, resource) it served so the RBAC Role can be checked against what was used. Its service-proxy route
forwards to a real Ray head's dashboard. The objects it holds are the tests' (KubeRay samples with statuses,
validated against the vendored CRD schemas).
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
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


class KubeState:
    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (resource, namespace, name) -> object
        self.logs: dict[tuple[str, str, bool], str] = {}  # (pod, container, previous) -> text
        self.used: set[tuple[str, str]] = set()  # (verb, resource) served
        self.forbidden: set[tuple[str, str]] = set()  # (verb, resource) answered 403
        self.dashboards: dict[str, str] = {}  # head service name -> the real dashboard URL behind it
        self.lock = threading.Lock()

    def put(self, obj: dict[str, Any]) -> None:
        resource = {
            "RayCluster": "rayclusters",
            "RayJob": "rayjobs",
            "RayService": "rayservices",
            "Pod": "pods",
            "Event": "events",
            "Service": "services",
        }[obj["kind"]]
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        meta.setdefault("uid", f"uid-{resource}-{meta['name']}")
        meta.setdefault("resourceVersion", "1")
        meta.setdefault("creationTimestamp", "2026-12-01T10:00:00Z")
        with self.lock:
            self.objects[(resource, meta["namespace"], meta["name"])] = obj

    def get(self, resource: str, ns: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, ns, name))

    def items(self, resource: str, ns: str) -> list[dict[str, Any]]:
        return [o for (r, n, _), o in sorted(self.objects.items()) if r == resource and n == ns]


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def make_app(state: KubeState) -> Starlette:
    def check(request: Request, verb: str, resource: str) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return status(401, "Unauthorized", "Unauthorized")
        if (verb, resource) in state.forbidden:
            return status(
                403,
                "Forbidden",
                f'{resource} is forbidden: User "ray-mcp" cannot {verb} resource "{resource}"',
            )
        state.used.add((verb, resource))
        return None

    async def custom(request: Request) -> Response:
        ns, plural = request.path_params["ns"], request.path_params["plural"]
        name = request.path_params.get("name")
        verb = {"GET": "get" if name else "list", "PATCH": "patch", "DELETE": "delete"}[request.method]
        if (denied := check(request, verb, f"{plural}.ray.io")) is not None:
            return denied
        if name is None:
            return JSONResponse({"kind": "List", "apiVersion": "ray.io/v1", "items": state.items(plural, ns)})
        obj = state.get(plural, ns, name)
        if obj is None:
            return status(404, "NotFound", f'{plural}.ray.io "{name}" not found')
        if request.method == "PATCH":
            if request.headers.get("content-type") != "application/json-patch+json":
                return status(415, "UnsupportedMediaType", "expected a JSON patch")
            try:
                patched = jsonpatch.apply_patch(obj, json.loads(await request.body()))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                return status(422, "Invalid", str(exc))
            patched["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
            state.put(patched)
            return JSONResponse(patched)
        if request.method == "DELETE":
            body = json.loads(await request.body() or b"{}")
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != obj["metadata"]["uid"]:
                return status(409, "Conflict", "Precondition failed: UID in precondition does not match")
            with state.lock:
                del state.objects[(plural, ns, name)]
            return JSONResponse({"kind": "Status", "status": "Success"})
        return JSONResponse(obj)

    async def core_list(request: Request) -> Response:
        ns, resource = request.path_params["ns"], request.path_params["resource"]
        if (denied := check(request, "list", resource)) is not None:
            return denied
        selector = request.query_params.get("labelSelector")
        items = [o for o in state.items(resource, ns) if _matches(o, selector)]
        return JSONResponse({"kind": "List", "apiVersion": "v1", "items": items})

    async def core_get(request: Request) -> Response:
        ns, resource, name = (request.path_params[k] for k in ("ns", "resource", "name"))
        if (denied := check(request, "get", resource)) is not None:
            return denied
        obj = state.get(resource, ns, name)
        return JSONResponse(obj) if obj else status(404, "NotFound", f'{resource} "{name}" not found')

    async def pod_log(request: Request) -> Response:
        ns, name = request.path_params["ns"], request.path_params["name"]
        if (denied := check(request, "get", "pods/log")) is not None:
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
        if (denied := check(request, verb, "services/proxy")) is not None:
            return denied
        service, _, port = target.partition(":")
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
            Route(base, custom, methods=["GET"]),
            Route(base + "/{name}", custom, methods=["GET", "PATCH", "DELETE"]),
            Route("/api/v1/namespaces/{ns}/pods/{name}/log", pod_log),
            Route("/api/v1/namespaces/{ns}/services/{target}/proxy/{path:path}", proxy, methods=methods),
            Route("/api/v1/namespaces/{ns}/{resource}", core_list),
            Route("/api/v1/namespaces/{ns}/{resource}/{name}", core_get),
        ]
    )


def serve(state: KubeState) -> contextlib.AbstractContextManager[str]:
    """Run the API server on a free loopback port in a thread; yields its URL."""
    return serve_asgi(make_app(state))


def write_kubeconfig(path: Path, server: str, *, namespace: str = "default") -> Path:
    """A kubeconfig whose user gets its token from an exec plugin (as EKS and GKE do): a real process the
    client runs, printing an ExecCredential."""
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": TOKEN},
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "test",
        "clusters": [{"name": "loopback", "cluster": {"server": server}}],
        "contexts": [
            {"name": "test", "context": {"cluster": "loopback", "user": "exec", "namespace": namespace}}
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
    path.write_text(yaml.safe_dump(config))
    return path
