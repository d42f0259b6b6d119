"""A Ray dashboard outside this Kubernetes cluster, reached through the API server's service proxy: the httpx
transport that carries the kubeconfig's credentials (refreshed per request) for one service's proxy path only,
and the API server's own refusals of a proxied request mapped to our errors.
"""

from __future__ import annotations

import json
import ssl
from typing import Any
from urllib.parse import unquote

import httpx

from ray_mcp.errors import ClusterUnavailable, InvalidArgument, RayMCPError, RayRequestFailed

RAY_PROXIED_AUTH_HEADER = "X-Ray-Authorization"  # Ray's token behind a proxy (ray authentication_constants)
# What the API server answers for itself on a proxied request (else the proxy passes the dashboard's answer).
API_SERVER_FAILURES = (401, 403, 503)
# The RBAC verb Kubernetes checks for each HTTP method of a services/proxy request.
PROXY_VERBS = {
    "GET": "get",
    "HEAD": "get",
    "POST": "create",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
# Why the GCS's own facts are unknown through the service proxy (Gcs.out_of_reach; ``what`` is the fact).
PROXY_NO_GCS = (
    "Unknown from outside the Kubernetes cluster: {what} needs the GCS (gRPC), which the API server's service "
    "proxy (HTTP only) does not reach; run ray-mcp in a pod of the cluster, where the k8s:// address reaches "
    "the head service by its DNS name, GCS included (docs/kubernetes.md)."
)


class ProxyTransport(httpx.AsyncBaseTransport):
    """Requests to the API server with the kubeconfig's credentials, fetched from the client for each request,
    so a rotating token (EKS, GKE exec plugins, a projected service-account token) stays current.

    Only under one service's proxy path: httpx resolves ``..`` before a request gets here, so a dashboard path
    built from an odd id could otherwise climb out of the proxy to any API path these credentials reach. A
    path outside it, or with an encoded dot segment or slash (the API server decodes them), is refused."""

    def __init__(self, configuration: Any, under: str) -> None:
        self.configuration = configuration
        self.under = under.rstrip("/")
        self.inner = httpx.AsyncHTTPTransport(verify=_ssl_context(configuration), proxy=configuration.proxy)

    def _refuse_outside(self, request: httpx.Request) -> None:
        path = request.url.raw_path.decode("ascii", "replace").partition("?")[0]
        inside = path == self.under or path.startswith(self.under + "/")
        odd = any(unquote(s) in (".", "..") or "/" in unquote(s) for s in path.split("/"))
        if not inside or odd:
            raise InvalidArgument(
                f"Refused to send {request.method} {path[:200]!r} through the Kubernetes API server: ray-mcp "
                f"sends only requests for the Ray dashboard under {self.under}, and this path leaves it or "
                "holds a dot segment or an encoded slash (an id or name that is not what it seems). Nothing "
                "was sent."
            )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self._refuse_outside(request)
        # The API server takes Authorization for itself and strips it; Ray's dashboard reads its own token from
        # X-Ray-Authorization too ("for proxies and KubeRay"), which the proxy passes on.
        ray_token = request.headers.pop("Authorization", None)
        if ray_token:
            request.headers[RAY_PROXIED_AUTH_HEADER] = ray_token
        token = await self.configuration.get_api_key_with_prefix("BearerToken")
        if token:
            request.headers["Authorization"] = token
        response = await self.inner.handle_async_request(request)
        if response.status_code in API_SERVER_FAILURES:
            await response.aread()
            refusal = api_server_refusal(request, response)
            if refusal is not None:
                await response.aclose()
                raise refusal
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def api_server_refusal(request: httpx.Request, response: httpx.Response) -> RayMCPError | None:
    """The API server's own failure of a proxied request (a Status object: RBAC, authentication, a service with
    no ready endpoint), as our error naming the verb or the cause; None for the dashboard's own answers, which
    the proxy passes through as they are."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return None
    if not (isinstance(body, dict) and body.get("kind") == "Status" and body.get("apiVersion") == "v1"):
        return None
    status, message = response.status_code, str(body.get("message") or body.get("reason") or "")
    path = request.url.path
    if status in (401, 403):
        verb = PROXY_VERBS.get(request.method, request.method.lower())
        return RayRequestFailed(
            f"Kubernetes refused the service proxy request {request.method} {path}: HTTP {status} "
            f"({message[:200]}). The account needs RBAC verb {verb} on services/proxy "
            "(deploy/kubernetes/kuberay/role.yaml); check `kubectl auth can-i "
            f"{verb} services/proxy`. Nothing was changed."
        )
    return ClusterUnavailable(
        f"The Kubernetes API server could not proxy {request.method} {path} to the Ray head: HTTP {status} "
        f"({message[:200]}). The head pod may not be Ready: call kuberay_status to see why."
    )


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context
