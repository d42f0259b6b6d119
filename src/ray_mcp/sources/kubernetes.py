"""KubeRay: the Kubernetes API around one Ray cluster (its RayCluster, RayJob or RayService, pods, events, logs).

kubernetes_asyncio (the ``ray-mcp[kubernetes]`` extra) reads kubeconfig, contexts, exec-plugin and OIDC auth and
the in-cluster service account; we never parse credentials ourselves. Objects are read as the API server's own
JSON (camelCase, as in ``kubectl get -o json``). The dashboard of a cluster outside this one is reached through
the API server's service proxy (``proxy_transport``, kube_proxy.py), never a port-forward; kube_target.py reads a
k8s:// address and resolves it to its RayCluster and head service.

Every API failure becomes one of our ``ToolError`` subclasses (``kube_errors``), naming the verb RBAC must grant.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx

from ray_mcp.errors import ClusterUnavailable, InvalidArgument, NotFound, RayRequestFailed
from ray_mcp.sources.ids import KUBE_FIELDS, plain_names
from ray_mcp.sources.kube_names import NameKind, checked
from ray_mcp.sources.kube_proxy import ProxyTransport

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient

GROUP, VERSION = "ray.io", "v1"
# KubeRay's kinds, in the order a k8s:// name is looked up: plural, kind.
RAY_KINDS = (("rayclusters", "RayCluster"), ("rayjobs", "RayJob"), ("rayservices", "RayService"))
# Every kind the fleet lists (RayCronJob: KubeRay 1.6+; a cluster without its CRD answers 404, said as such).
FLEET_KINDS = (*RAY_KINDS, ("raycronjobs", "RayCronJob"))
KIND_PLURAL = {kind: plural for plural, kind in FLEET_KINDS}
FIELD_MANAGER = "ray-mcp"  # server-side apply: the fields ray-mcp sets are owned by this manager
ORIGIN_CRD_LABEL = (
    "ray.io/originated-from-crd"  # KubeRay labels what a RayJob made (its submitter's pods too)
)
ORIGIN_NAME_LABEL = "ray.io/originated-from-cr-name"
# The name rule of each plural (kube_names): checked before a path is built from a name.
NAME_KIND: dict[str, NameKind] = {
    "rayclusters": "raycluster",
    "rayjobs": "rayjob",
    "rayservices": "rayservice",
    "raycronjobs": "raycronjob",
}
CLUSTER_LABEL = "ray.io/cluster"  # KubeRay labels every pod (and the head service) with its RayCluster
NODE_TYPE_LABEL = "ray.io/node-type"  # head | worker
GROUP_LABEL = "ray.io/group"  # the worker group (headgroup for the head)
JOB_NAME_LABEL = "job-name"  # what Kubernetes labels a Job's pods with: a RayJob's submitter Job has its name
DASHBOARD_PORT_NAME = "dashboard"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
EXTRA_HINT = "Install the Kubernetes client with: pip install 'ray-mcp[kubernetes]'."


class Forbidden(RayRequestFailed):
    """The API server refused the account (HTTP 401/403): RBAC lacks the verb named."""


class ListExpired(RayRequestFailed):
    """A continue token the API server no longer honours (HTTP 410 Expired)."""


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
        if exc.status == 410:
            raise ListExpired(
                f"Kubernetes expired the listing of {what} (HTTP 410: {reason}): the objects changed too much since "
                "its first page. Start over: call again without page."
            ) from None
        if exc.status in (401, 403):
            raise Forbidden(
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


class ApplyConflict(RayRequestFailed):
    """A server-side apply refused because other field managers own fields it would change (HTTP 409)."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        self.conflicts = conflicts  # (field, manager)
        listed = "; ".join(f"{field} (managed by {manager})" for field, manager in conflicts[:8])
        super().__init__(f"Kubernetes refused the apply: other field managers own {listed}.")


def _field_conflicts(exc: Any) -> list[tuple[str, str]]:
    """The (field, manager) of each FieldManagerConflict cause of a 409 Status."""
    try:
        causes = (json.loads(exc.body).get("details") or {}).get("causes") or []
    except (TypeError, ValueError, AttributeError):
        return []
    found = []
    for cause in causes:
        if cause.get("reason") == "FieldManagerConflict":
            manager = str(cause.get("message") or "").split('"')
            found.append(
                (str(cause.get("field") or "?"), manager[1] if len(manager) > 2 else "another manager")
            )
    return found


def _invalid_fields(exc: Any) -> str:
    """The fields a 422 Status names, with why (", spec.x: must be ...")."""
    try:
        causes = (json.loads(exc.body).get("details") or {}).get("causes") or []
    except (TypeError, ValueError, AttributeError):
        return ""
    return "".join(f"; {c.get('field') or '?'}: {c.get('message') or c.get('reason')}" for c in causes[:5])


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
        from kubernetes_asyncio.client import CoreV1Api, CustomObjectsApi, NetworkingV1Api

        self.client = client
        self.namespace = checked(namespace, "namespace")
        self.in_cluster = in_cluster
        self.context = context
        self.timeout_s = timeout_s  # of each request (the client's default is none)
        self.core = CoreV1Api(client)
        self.custom = CustomObjectsApi(client)
        self.networking = NetworkingV1Api(client)

    def at(self, namespace: str) -> Kube:
        """The same connection, bound to another namespace (checked as Kubernetes checks a namespace)."""
        other = copy.copy(self)
        other.namespace = checked(namespace, "namespace")
        return other

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
        checked(name, NAME_KIND[plural])
        with kube_errors(f"{kind} {name!r} in namespace {self.namespace!r}", f"get on {plural}.ray.io"):
            return plain_kube(
                dict(
                    await self.custom.get_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, plural, name, _request_timeout=self.timeout_s
                    )
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
        return list(plain_kube(body).get("items") or [])

    async def list_page(
        self, plural: str, *, everywhere: bool, limit: int, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None, int | None]:
        """One page of a list of KubeRay objects, in this namespace or in every one the account may list:
        (items, Kubernetes' continue token for the next page, the count left after it when the server says)."""
        where = "every namespace" if everywhere else f"namespace {self.namespace!r}"
        cont: dict[str, Any] = {"_continue": token} if token else {}
        with kube_errors(f"the {plural} of {where}", f"list on {plural}.ray.io"):
            if everywhere:
                body = await self.custom.list_cluster_custom_object(
                    GROUP, VERSION, plural, limit=limit, _request_timeout=self.timeout_s, **cont
                )
            else:
                body = await self.custom.list_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    self.namespace,
                    plural,
                    limit=limit,
                    _request_timeout=self.timeout_s,
                    **cont,
                )
        meta = body.get("metadata") or {}
        items = list(plain_kube({"items": body.get("items") or []})["items"])
        return items, meta.get("continue") or None, meta.get("remainingItemCount")

    async def pods_selected(self, selector: str, *, everywhere: bool, limit: int) -> list[dict[str, Any]]:
        """The pods a label selector of our own making selects (``key``, ``key=value`` terms of checked
        values), in this namespace or every one; at most ``limit``."""
        what = f"the Ray pods of {'every namespace' if everywhere else f'namespace {self.namespace!r}'}"
        with kube_errors(what, "list on pods"):
            if everywhere:
                body = await self._raw(
                    self.core.list_pod_for_all_namespaces, label_selector=selector, limit=limit
                )
            else:
                body = await self._raw(
                    self.core.list_namespaced_pod, self.namespace, label_selector=selector, limit=limit
                )
        return list(body.get("items") or [])

    async def network_policies(self) -> list[dict[str, Any]]:
        """The namespace's NetworkPolicies (what a pod may reach: the lint's egress check)."""
        what = f"the NetworkPolicies of namespace {self.namespace!r}"
        with kube_errors(what, "list on networkpolicies.networking.k8s.io"):
            body = await self._raw(self.networking.list_namespaced_network_policy, self.namespace)
        return list(body.get("items") or [])

    async def _raw(self, call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        response = await call(*args, _preload_content=False, _request_timeout=self.timeout_s, **kwargs)
        async with response:
            return plain_kube(dict(json.loads(await _body(response))))

    async def pods(self, cluster: str) -> list[dict[str, Any]]:
        """Every pod of a RayCluster (KubeRay labels them ray.io/cluster=<name>)."""
        return await self.pods_labelled({CLUSTER_LABEL: cluster}, f"the pods of RayCluster {cluster!r}")

    async def pods_labelled(self, labels: dict[str, str], what: str) -> list[dict[str, Any]]:
        """The pods with every one of ``labels`` (each value checked as a label value: none adds a term)."""
        selector = ",".join(f"{key}={checked(value, 'label')}" for key, value in labels.items())
        with kube_errors(what, "list on pods"):
            body = await self._raw(self.core.list_namespaced_pod, self.namespace, label_selector=selector)
        return list(body.get("items") or [])

    async def pod(self, name: str) -> dict[str, Any]:
        checked(name, "pod")
        with kube_errors(f"pod {name!r} in namespace {self.namespace!r}", "get on pods"):
            return await self._raw(self.core.read_namespaced_pod, name, self.namespace)

    async def service(self, name: str) -> dict[str, Any]:
        checked(name, "service")
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
        checked(pod, "pod")
        if container is not None:
            checked(container, "container")
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
        checked(name, NAME_KIND[plural])
        with kube_errors(f"patching {dict(RAY_KINDS)[plural]} {name!r}", f"patch on {plural}.ray.io"):
            return plain_kube(
                dict(
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
            )

    async def delete_ray(self, plural: str, name: str, uid: str, version: str | None = None) -> None:
        """Delete exactly the object confirmed: preconditions on its uid (a recreated namesake is kept) and,
        when given, its resourceVersion (an object changed since is kept)."""
        checked(name, NAME_KIND[plural])
        preconditions = {"uid": uid} | ({"resourceVersion": version} if version else {})
        kind = dict(FLEET_KINDS)[plural]
        with kube_errors(f"deleting {kind} {name!r}", f"delete on {plural}.ray.io"):
            await self.custom.delete_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespace,
                plural,
                name,
                body={"preconditions": preconditions},  # type: ignore[arg-type]
                _request_timeout=self.timeout_s,
            )

    async def apply_ray(
        self, plural: str, name: str, config: dict[str, Any], *, dry_run: bool, force: bool
    ) -> dict[str, Any]:
        """Server-side apply of ``config`` under our field manager (``dryRun=All``: the object as it would be,
        nothing stored). Conflicting field managers raise ApplyConflict (each field and its manager); an
        object changed since ``config``'s resourceVersion, or one the schema refuses, says so."""
        from kubernetes_asyncio.client.exceptions import ApiException

        checked(name, NAME_KIND[plural])
        kind = dict(FLEET_KINDS)[plural]
        options: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
        with kube_errors(f"applying {kind} {name!r}", f"patch on {plural}.ray.io"):
            try:  # read raw: the client maps no model to a create's 201
                return await self._raw(
                    self.custom.patch_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    plural,
                    name,
                    config,
                    field_manager=FIELD_MANAGER,
                    force=force,
                    _content_type="application/apply-patch+yaml",
                    **options,
                )
            except ApiException as exc:
                if exc.status == 409 and (conflicts := _field_conflicts(exc)):
                    raise ApplyConflict(conflicts) from None
                if exc.status == 409:
                    raise RayRequestFailed(
                        f"Kubernetes refused applying {kind} {name!r}: HTTP 409 ({_api_reason(exc)}). Nothing was "
                        "changed: the object changed since the plan read it (a new resourceVersion). Ask for the "
                        "plan again and confirm that one."
                    ) from None
                if exc.status == 422:
                    raise InvalidArgument(
                        f"Kubernetes refused {kind} {name!r} as invalid: {_api_reason(exc)}"
                        f"{_invalid_fields(exc)}. Nothing was changed: fix the field it names."
                    ) from None
                raise

    # -- the dashboard --------------------------------------------------------------------------------------

    def dashboard_url(self, service: str, port: int) -> str:
        """The head's dashboard: the service's DNS name inside the cluster, else the API server's proxy."""
        checked(service, "service")
        if self.in_cluster:
            return f"http://{service}.{self.namespace}.svc:{port}"
        return (
            f"{self.host}/api/v1/namespaces/{self.namespace}/services/{service}:{DASHBOARD_PORT_NAME}/proxy"
        )

    def proxy_transport(self, under: str) -> httpx.AsyncBaseTransport | None:
        """An httpx transport that speaks to the API server as the kubeconfig says (TLS, client certificate,
        a bearer token refreshed by the client's exec plugin or token file), for paths under ``under`` (one
        service's proxy) only; None inside the cluster."""
        if self.in_cluster:
            return None
        return ProxyTransport(self.client.configuration, under)


class KubeContexts:
    """Kubernetes connections by kubeconfig context, each made on first use and all closed together: the fleet
    reads other contexts than the address's when asked, and needs none of it when the address is not k8s://."""

    def __init__(
        self, *, kubeconfig: str | None, context: str | None, namespace: str | None, timeout_s: float
    ) -> None:
        self.kubeconfig, self.context, self.namespace, self.timeout_s = (
            kubeconfig,
            context,
            namespace,
            timeout_s,
        )
        self._made: dict[str | None, Kube] = {}
        self._adopted: set[int] = set()
        self._lock = asyncio.Lock()

    def adopt(self, kube: Kube) -> None:
        """Reuse the connection a k8s:// address made (for its context, and as the default one)."""
        self._adopted.add(id(kube))
        self._made.setdefault(kube.context, kube)
        self._made.setdefault(None, kube)

    async def get(self, context: str | None) -> Kube:
        async with self._lock:
            if context not in self._made:
                self._made[context] = await Kube.connect(
                    kubeconfig=self.kubeconfig,
                    context=context or self.context,
                    namespace=self.namespace,
                    timeout_s=self.timeout_s,
                )
            return self._made[context]

    def names(self) -> list[str]:
        """The contexts of the kubeconfig (none in a pod that uses its service account)."""
        try:
            from kubernetes_asyncio import config
        except ImportError:
            raise ClusterUnavailable(f"The fleet view needs the Kubernetes client. {EXTRA_HINT}") from None
        try:
            contexts, _active = config.list_kube_config_contexts(config_file=self.kubeconfig)
        except (config.ConfigException, OSError) as exc:
            raise ClusterUnavailable(f"Cannot read the kubeconfig's contexts ({exc}).") from None
        return [str(c["name"]) for c in contexts or []]

    async def aclose(self) -> None:
        """Close the connections this made (an adopted one is closed by the manager that made it)."""
        made, self._made = self._made, {}
        for kube in {id(k): k for k in made.values() if id(k) not in self._adopted}.values():
            await kube.aclose()


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


def _incluster_namespace() -> str:
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    try:
        with open(path) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def plain_kube(body: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes object (or list) with its names, ids and one-word reasons checked, in place (ids.plain_names):
    the API server validates an object's own name, not what its status, events or references say."""
    return dict(plain_names(body, KUBE_FIELDS))
