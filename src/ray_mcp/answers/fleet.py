"""The KubeRay fleet: RayClusters, RayJobs, RayServices and RayCronJobs across namespaces (and kube contexts),
one row each with kuberay_status's verdict, and cluster_health's where the dashboard answers in time.

A page lists up to ``limit`` objects, kind after kind and scope after scope, with Kubernetes' own ``limit`` and
``continue``; the page token carries where to go on (scope, kind, continue token) and the arguments it was
made for. The reads a row's verdict needs are shared by the page: one list of Ray pods per namespace (by
``ray.io/cluster in (...)``), one of submitter pods (``job-name in (...)``), a RayCluster read for each cluster a
RayJob or RayService runs on that the page does not hold.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError
from ray_mcp.limits import (
    FLEET_FINDING_CHARS,
    FLEET_PODS_READ,
    FLEET_RAY_CHECKS,
    HISTORY_RECORDS_SHOWN,
    LIST_FIELD_CHARS,
)
from ray_mcp.models.kuberay import Fleet, FleetGroup, FleetRow, PodState
from ray_mcp.shaping.fleet import fleet_answer
from ray_mcp.shaping.kube_lint import GPU_KEYS, quantity
from ray_mcp.shaping.kuberay import object_findings, pod_state, verdict_of
from ray_mcp.sources.kube_names import violation
from ray_mcp.sources.kube_target import RayTarget, cluster_of, head_service_of
from ray_mcp.sources.kubernetes import CLUSTER_LABEL, FLEET_KINDS, JOB_NAME_LABEL, Forbidden, Kube
from ray_mcp.sources.scope import read_scope
from ray_mcp.text import single_line, truncate_text


def one_line(text: str, chars: int) -> str:
    return truncate_text(single_line(text), chars)


KubeAt = Callable[[str | None], Awaitable[Kube]]
RayHealth = Callable[[RayTarget], Awaitable[tuple[str, float | None]]]  # cluster_health's verdict, GPUs used


@dataclass(frozen=True)
class Scope:
    context: str | None
    namespace: str | None  # None: every namespace the account may list


@dataclass
class Listed:
    """One object of the page, with the connection it was read through."""

    kube: Kube  # bound to the object's namespace
    context: str | None
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass
class Page:
    listed: list[Listed] = field(default_factory=list)
    cursor: str | None = None
    scopes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _fingerprint(scopes: list[Scope], kinds: list[str]) -> str:
    text = json.dumps([[s.context, s.namespace] for s in scopes] + [kinds])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def encode_cursor(scopes: list[Scope], kinds: list[str], scope: int, kind: int, token: str | None) -> str:
    raw = json.dumps({"f": _fingerprint(scopes, kinds), "s": scope, "k": kind, "c": token})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(text: str | None, scopes: list[Scope], kinds: list[str]) -> tuple[int, int, str | None]:
    if not text:
        return 0, 0, None
    try:
        data = json.loads(base64.urlsafe_b64decode(text.encode()))
        if data["f"] != _fingerprint(scopes, kinds):
            raise ValueError
        return int(data["s"]), int(data["k"]), data.get("c")
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise InvalidArgument(
            "page is not a token kuberay_fleet gave for these arguments: pass the next_page of the previous "
            "answer with the same contexts, namespaces and kinds, or leave page out to start over."
        ) from None


async def list_page(
    kube_at: KubeAt, scopes: list[Scope], kinds: list[str], limit: int, cursor: str | None
) -> Page:
    """Up to ``limit`` objects, from where ``cursor`` says; a scope the RBAC refuses at cluster scope falls back
    to the context's own namespace, said in a note."""
    plurals = dict((kind, plural) for plural, kind in FLEET_KINDS)
    scope_i, kind_i, token = decode_cursor(cursor, scopes, kinds)
    page = Page()
    while scope_i < len(scopes) and len(page.listed) < limit:
        scope = scopes[scope_i]
        kube = await kube_at(scope.context)
        where = kube if scope.namespace is None else kube.at(scope.namespace)
        label = f"{scope.context or 'current context'}: " + (scope.namespace or "every namespace")
        if label not in page.scopes:
            page.scopes.append(label)
        while kind_i < len(kinds) and len(page.listed) < limit:
            plural = plurals[kinds[kind_i]]
            try:
                items, token, _left = await where.list_page(
                    plural, everywhere=scope.namespace is None, limit=limit - len(page.listed), token=token
                )
            except Forbidden:
                if scope.namespace is not None:
                    raise
                page.notes.append(
                    f"{scope.context or 'The current context'}: the account may not list {plural} in every namespace "
                    f"(RBAC list at cluster scope), so only namespace {kube.namespace} was listed; pass namespaces "
                    "to list others."
                )
                scopes[scope_i] = scope = Scope(scope.context, kube.namespace)
                where = kube.at(kube.namespace)
                continue
            except NotFound:
                page.notes.append(
                    f"{kinds[kind_i]}: not served in {label} (its CRD is not installed; RayCronJob needs KubeRay 1.6+)."
                )
                items, token = [], None
            for obj in items:
                namespace = str(obj["metadata"].get("namespace") or where.namespace)
                page.listed.append(Listed(kube.at(namespace), scope.context, obj))
            if token:
                page.cursor = encode_cursor(scopes, kinds, scope_i, kind_i, token)
                return page
            kind_i += 1
        if kind_i >= len(kinds):
            scope_i, kind_i = scope_i + 1, 0
    if scope_i < len(scopes):
        page.cursor = encode_cursor(scopes, kinds, scope_i, kind_i, None)
    return page


@dataclass
class Reads:
    """What the page's rows share: RayClusters by (namespace, name), Ray pods by cluster, submitters by RayJob."""

    clusters: dict[tuple[str, str], dict[str, Any] | None] = field(default_factory=dict)
    pods: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    submitters: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _clusters_of(item: Listed) -> list[str]:
    """The RayClusters whose pods a row's verdict reads (a RayService's active and pending ones)."""
    if item.kind == "RayService":
        status = item.obj.get("status") or {}
        names = [
            (status.get(k) or {}).get("rayClusterName")
            for k in ("activeServiceStatus", "pendingServiceStatus")
        ]
        return [str(n) for n in names if n]
    if item.kind == "RayCronJob":
        return []
    name = cluster_of(item.obj)
    return [str(name)] if name else []


def _selector(key: str, values: set[str]) -> str | None:
    """``key in (a,b)`` of the values that are valid label values (a name that is not cannot label a pod)."""
    ok = sorted(v for v in values if violation(v, "label") is None)
    return f"{key} in ({','.join(ok)})" if ok else None


async def shared_reads(listed: list[Listed]) -> Reads:
    reads = Reads()
    by_ns: dict[tuple[str | None, str], list[Listed]] = {}
    for item in listed:
        by_ns.setdefault((item.context, item.kube.namespace), []).append(item)
        if item.kind == "RayCluster":
            reads.clusters[(item.kube.namespace, item.name)] = item.obj

    async def one_namespace(items: list[Listed]) -> None:
        kube, ns = items[0].kube, items[0].kube.namespace
        wanted = {c for i in items for c in _clusters_of(i)}
        missing = [c for c in wanted if (ns, c) not in reads.clusters]
        got = await asyncio.gather(*(_cluster_or_none(kube, c) for c in missing))
        reads.clusters.update({(ns, c): rc for c, rc in zip(missing, got, strict=True)})
        for key, values, into in (
            (CLUSTER_LABEL, wanted, reads.pods),
            (JOB_NAME_LABEL, {i.name for i in items if i.kind == "RayJob"}, reads.submitters),
        ):
            selector = _selector(key, values)
            if selector is None:
                continue
            try:
                pods = await kube.pods_selected(selector, everywhere=False, limit=FLEET_PODS_READ)
            except RayMCPError as exc:
                reads.notes.append(
                    f"The pods of namespace {ns} could not be read: {one_line(str(exc), LIST_FIELD_CHARS)}"
                )
                continue
            for p in pods:
                label = ((p.get("metadata") or {}).get("labels") or {}).get(key)
                into.setdefault((ns, str(label)), []).append(p)

    await asyncio.gather(*(one_namespace(items) for items in by_ns.values()))
    return reads


async def _cluster_or_none(kube: Kube, name: str) -> dict[str, Any] | None:
    try:
        return await kube.get_ray("rayclusters", name)
    except RayMCPError:
        return None


def _gpus(pods: list[dict[str, Any]]) -> float:
    """GPUs the live pods' containers ask for (their limits)."""
    total = 0.0
    for p in pods:
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in (p.get("spec") or {}).get("containers") or []:
            limits = (c.get("resources") or {}).get("limits") or {}
            total += sum(quantity(limits.get(k)) or 0 for k in GPU_KEYS)
    return total


def _state(obj: dict[str, Any]) -> str:
    status, kind = obj.get("status") or {}, obj.get("kind")
    if kind == "RayCluster":
        return str(status.get("state") or "unknown")
    if kind == "RayJob":
        return f"deployment {status.get('jobDeploymentStatus') or 'unknown'}, job {status.get('jobStatus') or 'unknown'}"
    if kind == "RayService":
        upgrading = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        return f"service {status.get('serviceStatus') or 'unknown'}" + (
            f", upgrading to {upgrading}" if upgrading else ""
        )
    spec = obj.get("spec") or {}
    last = status.get("lastScheduleTime") or "never"
    return (
        "suspended" if spec.get("suspend") else f"schedule {spec.get('schedule')!r}"
    ) + f", last run {last}"


def _age(obj: dict[str, Any], now_s: float) -> float | None:
    from datetime import datetime

    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    try:
        return (
            now_s - datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp() if stamp else None
        )
    except ValueError:
        return None


def address_of(context: str | None, namespace: str, name: str) -> str:
    return "k8s://" + "/".join(p for p in (context, namespace, name) if p)


def row_of(item: Listed, reads: Reads, now_s: float) -> tuple[FleetRow, RayTarget | None]:
    """The row, with kuberay_status's verdict (the same function over the same reads), and the target whose
    dashboard cluster_health would read (None: no cluster, or its head pod is not ready)."""
    ns, obj = item.kube.namespace, item.obj
    if item.kind == "RayCronJob":
        row = FleetRow(
            kind="RayCronJob",
            namespace=ns,
            name=item.name,
            context=item.context,
            state=_state(obj),
            verdict=verdict_of(obj, []),
            age_s=_age(obj, now_s),
        )
        return row, None
    names = _clusters_of(item)
    cluster = cluster_of(obj)
    rc = reads.clusters.get((ns, cluster)) if cluster else None
    pod_objs = reads.pods.get((ns, cluster), []) if cluster else []
    pods = [pod_state(p) for p in pod_objs]
    submitters = [
        pod_state(p).model_copy(update={"node_type": "submitter"})
        for p in reads.submitters.get((ns, item.name), [])
    ]
    pending = None
    if item.kind == "RayService" and len(names) > 1:
        pending_name = ((obj.get("status") or {}).get("pendingServiceStatus") or {}).get("rayClusterName")
        if pending_name:
            pending = (
                reads.clusters.get((ns, pending_name)),
                [pod_state(p) for p in reads.pods.get((ns, pending_name), [])],
            )
    findings = object_findings(
        obj, rc, pods, submitters=submitters, pending=pending, ray_status=None, now_s=now_s
    )
    every_pod = [p for n in names for p in reads.pods.get((ns, n), [])]
    row = FleetRow(
        kind=item.kind,  # type: ignore[arg-type]
        namespace=ns,
        name=item.name,
        context=item.context,
        address=address_of(item.context, ns, item.name),
        verdict=verdict_of(obj, findings),
        state=_state(obj),
        cluster=cluster,
        groups=_groups(rc, pods),
        gpus_requested=_gpus(every_pod),
        age_s=_age(obj, now_s),
        finding=one_line(findings[0].text, FLEET_FINDING_CHARS) if findings else None,
    )
    head_ready = any(p.node_type == "head" and p.ready for p in pods)
    if not cluster or rc is None or not head_ready:
        row.ray_verdict = "unknown: " + (
            "no RayCluster yet" if not cluster or rc is None else "its head pod is not ready"
        )
        return row, None
    service = f"{item.name}-head-svc" if item.kind == "RayService" else head_service_of(rc)
    port = 8265  # the dashboard's: by its port name through the proxy, this number in the cluster
    target = RayTarget(
        item.kube, item.kind, item.name, cluster, service, item.kube.dashboard_url(service, port)
    )
    return row, target


def _groups(rc: dict[str, Any] | None, pods: list[PodState]) -> list[FleetGroup]:
    if rc is None:
        return []
    out = []
    for g in (rc.get("spec") or {}).get("workerGroupSpecs") or []:
        name = str(g.get("groupName"))
        ready = sum(1 for p in pods if p.group == name and p.node_type == "worker" and p.ready)
        out.append(FleetGroup(name=name, ready=ready, desired=g.get("replicas")))
    return out


async def ask_ray(
    rows: list[tuple[FleetRow, RayTarget | None]], ray_health: RayHealth | None, budget_s: float
) -> None:
    """cluster_health's verdict for the first FLEET_RAY_CHECKS rows with a ready head, all within
    ``budget_s``; the rest say why they are unknown."""
    asked = [(row, t) for row, t in rows if t is not None][:FLEET_RAY_CHECKS] if ray_health else []
    asked_ids = {id(row) for row, _ in asked}
    for row, target in rows:
        if target is not None and row.ray_verdict is None and id(row) not in asked_ids:
            row.ray_verdict = (
                f"unknown: not asked (the fleet asks the first {FLEET_RAY_CHECKS} clusters of a page); call "
                f"cluster_health with --address {row.address}"
                if ray_health
                else "unknown: not asked (ray_health_s=0)"
            )
    if not asked or ray_health is None:
        return
    tasks = {asyncio.ensure_future(ray_health(t)): row for row, t in asked}
    done, pending = await asyncio.wait(tasks, timeout=budget_s)
    for task in pending:
        task.cancel()
        tasks[
            task
        ].ray_verdict = (
            f"unknown: its dashboard did not answer within {budget_s:g} s (ray_health_s gives it longer)"
        )
    for task in done:
        row = tasks[task]
        try:
            row.ray_verdict, row.gpus_used = task.result()
        except RayMCPError as exc:
            row.ray_verdict = "unknown: " + one_line(str(exc), FLEET_FINDING_CHARS)


def records(kept: list[dict[str, Any]], base: str) -> list[FleetRow]:
    """Clusters a History Server keeps, as rows whose address reads the record."""
    rows = []
    for c in kept[:HISTORY_RECORDS_SHOWN]:
        ns, session = str(c.get("namespace") or ""), str(c.get("sessionName") or "")
        kind = str(c.get("ownerKind") or "raycluster").lower()
        name = str(c.get("ownerName") or c.get("name") or "")
        if violation(ns, "namespace") or violation(name, "rayobject") or not session.startswith("session_"):
            continue  # not names a record address can carry
        rows.append(
            FleetRow(
                kind="record",
                namespace=ns,
                name=name,
                address=f"history+{base.rstrip('/')}/{ns}/{kind}/{name}/{session}",
                verdict="terminated",
                ray_verdict="unknown: a record, not a live cluster (diagnose it with its address)",
                state=f"kept by the History Server: {kind} {name}, session {session}, created {c.get('createTime') or '?'}",
            )
        )
    return rows


def now() -> float:
    return time.time()


async def fleet(
    kube_at: KubeAt,
    scopes: list[Scope],
    kinds: list[str],
    *,
    limit: int,
    cursor: str | None,
    ray_health: RayHealth | None,
    ray_budget_s: float,
    history: tuple[str, list[dict[str, Any]]] | None,
) -> Fleet:
    """One page of the fleet, roll-ups first (shaping/fleet.py)."""

    page = await list_page(kube_at, scopes, kinds, limit, cursor)
    reads = await shared_reads(page.listed)
    at = now()
    rows = [row_of(item, reads, at) for item in page.listed]
    await ask_ray(rows, ray_health, ray_budget_s)
    kept = records(history[1], history[0]) if history is not None and not cursor else []
    return fleet_answer(
        [r for r, _ in rows] + kept,
        total_listed=len(page.listed),
        next_page=page.cursor,
        scopes=page.scopes,
        notes=page.notes + reads.notes,
    )


def ray_health_with(settings: Any, headers_for: Callable[[RayTarget], dict[str, str]]) -> RayHealth:
    """cluster_health's verdict of one cluster, and the GPUs Ray has in use there, through its head service.
    ``headers_for``: the dashboard headers a cluster may get (a cluster's Ray token goes to that cluster only)."""

    async def check(target: RayTarget) -> tuple[str, float | None]:
        from ray_mcp.answers import RayAPI
        from ray_mcp.diagnosis import evidence, report
        from ray_mcp.limits import DIAGNOSIS_BYTES
        from ray_mcp.sources.kube_proxy import PROXY_NO_GCS

        api = RayAPI(
            target.dashboard_url,
            timeout_s=settings.request_timeout_s,
            headers=headers_for(target),
            verify=str(settings.dashboard_ca_file)
            if settings.dashboard_ca_file
            else settings.dashboard_verify_tls,
            transport=target.proxy_transport(),
            gcs_lookup=None,
            gcs_out_of_reach=None if target.kube.in_cluster else PROXY_NO_GCS,
            local_logs=False,
        )
        try:
            with read_scope():  # this cluster's reads, shared within it only (the call's scope keys by path)
                ev = await evidence.gather_cluster(api)
            model, _text = report.health_report(api.dashboard_url, ev, max_bytes=DIAGNOSIS_BYTES.default)
        finally:
            await api.aclose()
        if ev.status is None:
            return model.verdict, None
        gpu = (ev.status.get("resources") or {}).get("GPU") or {}
        return model.verdict, float(gpu.get("used") or 0)

    return check
