"""KubeRay: the Kubernetes API around one Ray cluster (its RayCluster, RayJob or RayService, pods, events, logs).

kubernetes_asyncio (the ``ray-mcp[kubernetes]`` extra) reads kubeconfig, contexts, exec-plugin and OIDC auth and
the in-cluster service account; we never parse credentials ourselves. Objects are read as the API server's own
JSON (camelCase, as in ``kubectl get -o json``). The dashboard of a cluster outside this one is reached through
the API server's service proxy (``proxy_transport``), never a port-forward.

Every API failure becomes one of our ``ToolError`` subclasses (``kube_errors``), naming the verb RBAC must grant.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ray_mcp.errors import ClusterUnavailable, InvalidArgument, NotFound, RayMCPError, RayRequestFailed

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

GROUP, VERSION = "ray.io", "v1"
# KubeRay's kinds, in the order a k8s:// name is looked up: plural, kind.
RAY_KINDS = (("rayclusters", "RayCluster"), ("rayjobs", "RayJob"), ("rayservices", "RayService"))
CLUSTER_LABEL = "ray.io/cluster"  # KubeRay labels every pod (and the head service) with its RayCluster
NODE_TYPE_LABEL = "ray.io/node-type"  # head | worker
GROUP_LABEL = "ray.io/group"  # the worker group (headgroup for the head)
JOB_NAME_LABEL = "job-name"  # what Kubernetes labels a Job's pods with: a RayJob's submitter Job has its name
DASHBOARD_PORT_NAME = "dashboard"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
EXTRA_HINT = "Install the Kubernetes client with: pip install 'ray-mcp[kubernetes]'."
RAY_PROXIED_AUTH_HEADER = "X-Ray-Authorization"  # Ray's token behind a proxy (ray authentication_constants)
# Why the GCS's own facts are unknown through the service proxy (Gcs.out_of_reach; ``what`` is the fact).
PROXY_NO_GCS = (
    "Unknown from outside the Kubernetes cluster: {what} needs the GCS (gRPC), which the API server's service "
    "proxy (HTTP only) does not reach; run ray-mcp in a pod of the cluster, where the k8s:// address reaches "
    "the head service by its DNS name, GCS included (docs/kubernetes.md)."
)
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


@dataclass(frozen=True)
class KubeAddress:
    """``k8s://[context/]namespace/name``: a RayCluster, RayJob or RayService."""

    context: str | None
    namespace: str | None
    name: str

    @property
    def text(self) -> str:
        return "k8s://" + "/".join(p for p in (self.context, self.namespace, self.name) if p)


def parse_kube_address(text: str, *, context: str | None = None, namespace: str | None = None) -> KubeAddress:
    """Read ``k8s://[context/]namespace/name``; a context may hold slashes (an EKS ARN), so it is the rest.
    ``k8s://name`` takes the namespace of --namespace, else of the context."""
    parts = text.removeprefix("k8s://").strip("/").split("/")
    if not parts or not all(parts):
        raise InvalidArgument(
            f"Cannot read {text!r} as a Kubernetes address: expected k8s://[context/]namespace/name, "
            "for example k8s://default/raycluster-kuberay."
        )
    name = parts[-1]
    ns = parts[-2] if len(parts) >= 2 else namespace
    ctx = "/".join(parts[:-2]) if len(parts) > 2 else context
    return KubeAddress(ctx, ns, name)


@contextlib.contextmanager
def kube_errors(what: str, verb: str) -> Iterator[None]:
    """Map the client's failures to our errors: what failed, and what to grant or check next."""
    from aiohttp import ClientError
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        yield
    except ApiException as exc:
        reason = _api_reason(exc)
        if exc.status == 404:
            raise NotFound(f"Kubernetes has no {what} ({reason}).") from None
        if exc.status in (401, 403):
            raise RayRequestFailed(
                f"Kubernetes refused {what}: HTTP {exc.status} ({reason}). The account needs RBAC verb {verb} "
                "(deploy/kubernetes/role.yaml grants exactly what ray-mcp uses); check "
                "`kubectl auth can-i` for it."
            ) from None
        raise RayRequestFailed(f"Kubernetes failed {what}: HTTP {exc.status} ({reason}).") from None
    except (ClientError, OSError, TimeoutError) as exc:
        raise ClusterUnavailable(
            f"Cannot reach the Kubernetes API server for {what}: {type(exc).__name__}: {exc}. Check the "
            "kubeconfig context (--kube-context) and that `kubectl get rayclusters` works."
        ) from None


def _api_reason(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


class Kube:
    """One Kubernetes API connection, bound to a namespace. Reads return the API server's JSON."""

    def __init__(
        self, client: ApiClient, namespace: str, *, in_cluster: bool, context: str | None, timeout_s: float
    ) -> None:
        from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi

        self.client = client
        self.namespace = namespace
        self.in_cluster = in_cluster
        self.context = context
        self.timeout_s = timeout_s  # of each request (the client's default is none)
        self.core = CoreV1Api(client)
        self.custom = CustomObjectsApi(client)

    @classmethod
    async def connect(
        cls, *, kubeconfig: str | None, context: str | None, namespace: str | None, timeout_s: float
    ) -> Kube:
        """Through kubeconfig (KUBECONFIG, ~/.kube/config, or ``kubeconfig``), else the in-cluster account."""
        try:
            from kubernetes_asyncio import config
            from kubernetes_asyncio.client import ApiClient, Configuration
        except ImportError:
            raise ClusterUnavailable(f"A k8s:// address needs the Kubernetes client. {EXTRA_HINT}") from None
        configuration = Configuration()
        in_cluster = kubeconfig is None and context is None and bool(os.environ.get(IN_CLUSTER_ENV))
        try:
            if in_cluster:
                config.load_incluster_config(client_configuration=configuration)
                default_ns = _incluster_namespace()
            else:
                loader = await config.load_kube_config(
                    config_file=kubeconfig,
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
                default_ns = (loader.current_context or {}).get("context", {}).get("namespace") or "default"
                context = context or (loader.current_context or {}).get("name")
        except (config.ConfigException, OSError) as exc:
            raise ClusterUnavailable(
                f"Cannot load the Kubernetes configuration ({exc}). Set KUBECONFIG or --kubeconfig, pick a "
                "context with --kube-context, or run ray-mcp in a pod with a service account."
            ) from None
        return cls(
            ApiClient(configuration),
            namespace or default_ns,
            in_cluster=in_cluster,
            context=context,
            timeout_s=timeout_s,
        )

    async def aclose(self) -> None:
        await self.client.close()

    @property
    def host(self) -> str:
        return str(self.client.configuration.host).rstrip("/")

    # -- reads ----------------------------------------------------------------------------------------------

    async def get_ray(self, plural: str, name: str) -> dict[str, Any]:
        kind = dict(RAY_KINDS)[plural]
        with kube_errors(f"{kind} {name!r} in namespace {self.namespace!r}", f"get on {plural}.ray.io"):
            return dict(
                await self.custom.get_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, plural, name, _request_timeout=self.timeout_s
                )
            )

    async def find_ray(self, name: str) -> dict[str, Any]:
        """The RayCluster, RayJob or RayService of this name (looked up in that order)."""
        for plural, _kind in RAY_KINDS:
            with contextlib.suppress(NotFound):
                return await self.get_ray(plural, name)
        raise NotFound(
            f"No RayCluster, RayJob or RayService {name!r} in namespace {self.namespace!r} (context "
            f"{self.context or 'in-cluster'}). List them with `kubectl get rayclusters,rayjobs,rayservices "
            f"-n {self.namespace}`. If it was deleted (a RayJob's cluster is, once its job ends), its pods' logs "
            "and its head's state went with it; a KubeRay History Server that collected it keeps its record: "
            f"--address history+http://<history-server>:<port>/{self.namespace}/<kind>/{name}."
        )

    async def list_ray(self, plural: str) -> list[dict[str, Any]]:
        with kube_errors(f"the {plural} of namespace {self.namespace!r}", f"list on {plural}.ray.io"):
            body = await self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, _request_timeout=self.timeout_s
            )
        return list(body.get("items") or [])

    async def _raw(self, call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response = await call(*args, _preload_content=False, _request_timeout=self.timeout_s, **kwargs)
        async with response:
            return dict(json.loads(await _body(response)))

    async def pods(self, cluster: str) -> list[dict[str, Any]]:
        """Every pod of a RayCluster (KubeRay labels them ray.io/cluster=<name>)."""
        return await self.pods_labelled(f"{CLUSTER_LABEL}={cluster}", f"the pods of RayCluster {cluster!r}")

    async def pods_labelled(self, selector: str, what: str) -> list[dict[str, Any]]:
        with kube_errors(what, "list on pods"):
            body = await self._raw(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        return list(body.get("items") or [])

    async def pod(self, name: str) -> dict[str, Any]:
        with kube_errors(f"pod {name!r} in namespace {self.namespace!r}", "get on pods"):
            return await self._raw(self.core.read_namespaced_pod, name, self.namespace)

    async def service(self, name: str) -> dict[str, Any]:
        with kube_errors(f"service {name!r} in namespace {self.namespace!r}", "get on services"):
            return await self._raw(self.core.read_namespaced_service, name, self.namespace)

    async def events(self) -> list[dict[str, Any]]:
        """The namespace's events (one list, filtered by the caller to the objects it cares about)."""
        with kube_errors(f"the events of namespace {self.namespace!r}", "list on events"):
            body = await self._raw(self.core.list_namespaced_event, self.namespace)
        return list(body.get("items") or [])

    async def log(
        self, pod: str, *, container: str | None, previous: bool, lines: int, max_bytes: int
    ) -> str:
        what = f"the log of pod {pod!r}" + (f" container {container!r}" if container else "")
        with kube_errors(what + (" (previous)" if previous else ""), "get on pods/log"):
            kwargs: dict[str, Any] = {
                "tail_lines": lines,
                "limit_bytes": max_bytes,
                "previous": previous,
                "_request_timeout": self.timeout_s,
            }
            if container:
                kwargs["container"] = container
            response: Any = await self.core.read_namespaced_pod_log(
                pod, self.namespace, _preload_content=False, **kwargs
            )
            async with response:
                return (await _body(response)).decode(errors="replace")

    # -- writes ---------------------------------------------------------------------------------------------

    async def patch_ray(self, plural: str, name: str, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON patch (its ``test`` ops make it fail, not clobber, if the object changed meanwhile)."""
        with kube_errors(f"patching {dict(RAY_KINDS)[plural]} {name!r}", f"patch on {plural}.ray.io"):
            return dict(
                await self.custom.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    plural,
                    name,
                    patch,
                    _content_type="application/json-patch+json",
                    _request_timeout=self.timeout_s,  # type: ignore[call-arg]
                )
            )

    async def delete_ray(self, plural: str, name: str, uid: str) -> None:
        """Delete exactly the object confirmed (precondition on its uid: a recreated namesake is kept)."""
        with kube_errors(f"deleting {dict(RAY_KINDS)[plural]} {name!r}", f"delete on {plural}.ray.io"):
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                plural,
                name,
                body={"preconditions": {"uid": uid}},  # type: ignore[arg-type]
                _request_timeout=self.timeout_s,
            )

    # -- the dashboard --------------------------------------------------------------------------------------

    def dashboard_url(self, service: str, port: int) -> str:
        """The head's dashboard: the service's DNS name inside the cluster, else the API server's proxy."""
        if self.in_cluster:
            return f"http://{service}.{self.namespace}.svc:{port}"
        return (
            f"{self.host}/api/v1/namespaces/{self.namespace}/services/{service}:{DASHBOARD_PORT_NAME}/proxy"
        )

    def proxy_transport(self) -> httpx.AsyncBaseTransport | None:
        """An httpx transport that speaks to the API server as the kubeconfig says (TLS, client certificate,
        a bearer token refreshed by the client's exec plugin or token file); None inside the cluster."""
        if self.in_cluster:
            return None
        return ProxyTransport(self.client.configuration)


class ProxyTransport(httpx.AsyncBaseTransport):
    """Requests to the API server with the kubeconfig's credentials, fetched from the client for each request,
    so a rotating token (EKS, GKE exec plugins, a projected service-account token) stays current."""

    def __init__(self, configuration: Any) -> None:
        self.configuration = configuration
        self.inner = httpx.AsyncHTTPTransport(verify=_ssl_context(configuration), proxy=configuration.proxy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
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


async def _body(response: Any) -> bytes:
    """A raw response's body; unread raw responses are not checked by the client, so a failure is raised here
    as the client would (kube_errors maps it)."""
    from kubernetes_asyncio.client.exceptions import ApiException

    body = bytes(await response.read())
    if response.status >= 400:
        exc = ApiException(status=response.status, reason=response.reason)
        exc.body = body
        raise exc
    return body


def _ssl_context(configuration: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _incluster_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    try:
        with open(path) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


@dataclass
class RayTarget:
    """What a k8s:// address names, resolved: the object, the RayCluster serving it, and its head service."""

    kube: Kube
    kind: str  # RayCluster | RayJob | RayService
    name: str
    cluster: str  # the RayCluster (a RayJob's or a RayService's active one)
    service: str  # the head service the dashboard is reached through
    dashboard_url: str

    @property
    def namespace(self) -> str:
        return self.kube.namespace


def head_service_of(raycluster: dict[str, Any]) -> str:
    """KubeRay names the head service in status.head.serviceName (KubeRay >= 1.1), else <cluster>-head-svc."""
    status = raycluster.get("status") or {}
    return str((status.get("head") or {}).get("serviceName") or f"{raycluster['metadata']['name']}-head-svc")


def cluster_of(obj: dict[str, Any]) -> str | None:
    """The RayCluster a RayCluster, RayJob or RayService runs on (None: none yet)."""
    status = obj.get("status") or {}
    if obj["kind"] == "RayCluster":
        return str(obj["metadata"]["name"])
    if obj["kind"] == "RayJob":
        return status.get("rayClusterName") or (obj.get("spec") or {}).get("clusterSelector", {}).get(
            CLUSTER_LABEL
        )
    active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
    return active or (status.get("pendingServiceStatus") or {}).get("rayClusterName")


async def resolve_target(kube: Kube, name: str) -> RayTarget:
    """Find the object and the head service its dashboard answers on (the port named ``dashboard``)."""
    obj = await kube.find_ray(name)
    kind = str(obj["kind"])
    cluster = cluster_of(obj)
    if cluster is None:
        raise ClusterUnavailable(
            f"{kind} {name!r} in namespace {kube.namespace!r} has no RayCluster yet (status "
            f"{_state_word(obj)}). Wait for KubeRay to create it, or describe it with kuberay_status."
        )
    if kind == "RayService":
        service = f"{name}-head-svc"  # KubeRay keeps it pointed at the active cluster across upgrades
    else:
        service = head_service_of(await kube.get_ray("rayclusters", cluster))
    ports = ((await kube.service(service)).get("spec") or {}).get("ports") or []
    port = next((int(p["port"]) for p in ports if p.get("name") == DASHBOARD_PORT_NAME), 8265)
    return RayTarget(kube, kind, name, cluster, service, kube.dashboard_url(service, port))


def _state_word(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    for key in ("state", "jobDeploymentStatus", "serviceStatus"):
        if status.get(key):
            return str(status[key])
    return "unknown"
