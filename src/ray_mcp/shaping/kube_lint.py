"""Specs checked before they fail (pure): a RayCluster, RayJob, RayService or RayCronJob, or a job's runtime_env,
against the failure classes KubeRay users hit. Each finding names the field, says why it fails, and the fix.

The rules read KubeRay's own behaviour where it decides (ray-operator at the commit of tests/schemas/kuberay/
SOURCE): the ray container is each pod template's first (RayContainerIndex); KubeRay mounts an in-memory
``/dev/shm`` sized to that container's memory request or limit unless one is mounted or ``plasma-directory``
is set (common/pod.go); a RayCluster's name is at most 53 characters, a RayJob's or RayService's 47, each a
DNS-1035 label (utils/validation.go); the head service is ``<name>-head-svc`` unless headService names one; a
RayJob's submitter Job retries ``submitterConfig.backoffLimit`` times (default 2, rayjob_controller.go).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ray_mcp.amounts import byte_size
from ray_mcp.models.kuberay import LintFinding, LintReport
from ray_mcp.sources.kube_names import violation
from ray_mcp.text import quoted

GPU_KEYS = ("nvidia.com/gpu", "amd.com/gpu")
NAME_LIMITS = {"RayCluster": 53, "RayJob": 47, "RayService": 47, "RayCronJob": 36}
SHM = "/dev/shm"
# A quantity as Kubernetes writes it: a number and a suffix (binary, decimal, milli).
QUANTITY = re.compile(r"^([0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E|m)?$")
SUFFIX: dict[str, float] = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
SUFFIX |= {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "m": 1e-3}
RAY_IMAGE_VERSION = re.compile(r"(\d+\.\d+\.\d+)")
INSTALLERS = ("pip", "uv", "conda")
RULES = (
    "resources",
    "object_store_shm",
    "gcs_fault_tolerance",
    "autoscaler_v1_labels",
    "submitter_backoff",
    "head_service_names",
    "pip_without_egress",
    "working_dir_size",
    "ray_version",
)


@dataclass
class LintContext:
    """What the rules know beyond the spec; None: not read (the rule that needs it says it is unknown)."""

    neighbours: list[dict[str, Any]] | None = None  # the namespace's RayClusters, RayJobs and RayServices
    policies: list[dict[str, Any]] | None = None  # the namespace's NetworkPolicies
    runtime_env: dict[str, Any] | None = None  # a job's runtime_env given on its own
    working_dir_bytes: int | None = None  # the size of a local working_dir, measured
    upload_limit: int = 512 * 2**20  # Ray's GCS_STORAGE_MAX_SIZE, told by the caller
    unknown: list[str] = field(default_factory=list)


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity (``5Gi``, ``500m``, ``2``) as a number (bytes, cores); None if unreadable."""
    m = QUANTITY.match(str(value).strip()) if value is not None else None
    if m is None:
        return None
    try:
        return float(m[1]) * SUFFIX.get(m[2] or "", 1)
    except ValueError:
        return None


@dataclass(frozen=True)
class Group:
    """A node group of a Ray cluster spec: where it is (for the field names), and its spec."""

    where: str
    spec: dict[str, Any]

    @property
    def container(self) -> dict[str, Any]:
        containers = ((self.spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
        return dict(containers[0])

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.spec.get("rayStartParams") or {})


def cluster_spec(obj: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Where a kind keeps its Ray cluster's spec, and that spec (None: a RayJob on an existing cluster)."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "RayJob":
        return "spec.rayClusterSpec", spec.get("rayClusterSpec")
    if kind == "RayService":
        return "spec.rayClusterConfig", spec.get("rayClusterConfig")
    if kind == "RayCronJob":
        return "spec.jobTemplate.rayClusterSpec", (spec.get("jobTemplate") or {}).get("rayClusterSpec")
    return "spec", spec


def groups(obj: dict[str, Any]) -> list[Group]:
    where, spec = cluster_spec(obj)
    if not spec:
        return []
    found = [Group(f"{where}.headGroupSpec", dict(spec.get("headGroupSpec") or {}))]
    for g in spec.get("workerGroupSpecs") or []:
        found.append(Group(f"{where}.workerGroupSpecs[groupName={g.get('groupName')}]", dict(g)))
    return found


Rule = Callable[[dict[str, Any], LintContext], Iterator[LintFinding]]


def _resources(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    for g in groups(obj):
        res = g.container.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        gpus = max((quantity(limits.get(k)) or 0 for k in GPU_KEYS), default=0)
        num_gpus = quantity(g.params.get("num-gpus"))
        field_ = f"{g.where}.rayStartParams.num-gpus"
        if num_gpus and num_gpus > gpus:
            yield LintFinding(
                rule="resources",
                severity="error",
                field=field_,
                why=f"num-gpus {num_gpus:g} tells Ray the pod has {num_gpus:g} GPU(s), but its container's limits give "
                f"it {gpus:g}: Ray schedules GPU tasks there and they fail at their first CUDA call.",
                fix=f"Set {g.where}.template.spec.containers[0].resources.limits['nvidia.com/gpu'] to {num_gpus:g}, "
                "or lower num-gpus to what the limits give.",
            )
        elif gpus and num_gpus == 0 and "num-gpus" in g.params:
            yield LintFinding(
                rule="resources",
                severity="warning",
                field=field_,
                why=f"The container's limits take {gpus:g} GPU(s) from the node, but num-gpus 0 hides them from Ray: "
                "they stay idle while GPU tasks wait.",
                fix="Remove num-gpus (KubeRay then passes the GPU limit to Ray) or drop the GPU limit.",
            )
        cpu_limit, cpu_request = quantity(limits.get("cpu")), quantity(requests.get("cpu"))
        num_cpus = quantity(g.params.get("num-cpus"))
        if num_cpus and cpu_limit and num_cpus > cpu_limit:
            yield LintFinding(
                rule="resources",
                severity="warning",
                field=f"{g.where}.rayStartParams.num-cpus",
                why=f"num-cpus {num_cpus:g} is above the container's CPU limit {cpu_limit:g}: Ray runs that many tasks "
                "at once on fewer cores, and the kernel throttles them all.",
                fix=f"Lower num-cpus to {cpu_limit:g} or raise the CPU limit.",
            )
        if not cpu_limit and not cpu_request and not num_cpus:
            yield LintFinding(
                rule="resources",
                severity="warning",
                field=f"{g.where}.template.spec.containers[0].resources",
                why="No CPU limit, request or num-cpus: Ray counts every core of the node it lands on, and runs that "
                "many tasks in a pod the scheduler reserved nothing for.",
                fix="Set resources.requests and resources.limits for cpu and memory (equal), or num-cpus.",
            )
        for res_name, limit, request in (
            ("cpu", cpu_limit, cpu_request),
            ("memory", quantity(limits.get("memory")), quantity(requests.get("memory"))),
        ):
            if limit and request and limit != request:
                yield LintFinding(
                    rule="resources",
                    severity="warning",
                    field=f"{g.where}.template.spec.containers[0].resources.requests.{res_name}",
                    why=f"The {res_name} request is below its limit: KubeRay tells Ray the limit, while the scheduler "
                    "reserves only the request, so on a busy node the pod gets less than Ray plans with.",
                    fix=f"Set requests.{res_name} equal to limits.{res_name}.",
                )


def _shm_size(g: Group) -> tuple[float | None, str]:
    """The /dev/shm the ray container gets, and what sized it (KubeRay's own is the memory request or limit)."""
    pod = (g.spec.get("template") or {}).get("spec") or {}
    mount = next((m for m in g.container.get("volumeMounts") or [] if m.get("mountPath") == SHM), None)
    res = g.container.get("resources") or {}
    memory = quantity((res.get("requests") or {}).get("memory")) or quantity(
        (res.get("limits") or {}).get("memory")
    )
    if mount is None:
        return memory, "the container's memory (KubeRay sizes its /dev/shm so)"
    volume: dict[str, Any] = next(
        (v for v in pod.get("volumes") or [] if v.get("name") == mount.get("name")), {}
    )
    size = quantity((volume.get("emptyDir") or {}).get("sizeLimit"))
    return (size, f"volume {mount.get('name')}'s sizeLimit") if size else (memory, "the container's memory")


def _object_store(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    for g in groups(obj):
        store = quantity(g.params.get("object-store-memory"))
        if not store or "plasma-directory" in g.params:
            continue
        shm, sized_by = _shm_size(g)
        if shm and store > shm:
            yield LintFinding(
                rule="object_store_shm",
                severity="error",
                field=f"{g.where}.rayStartParams.object-store-memory",
                why=f"The object store ({byte_size(store)}) is larger than /dev/shm ({byte_size(shm)}, "
                f"{sized_by}): Ray falls back to disk for it, far slower, or the pod is OOM-killed as it fills.",
                fix="Lower object-store-memory below /dev/shm (Ray's default is 30% of the container's memory), or "
                "raise the container's memory (and any /dev/shm sizeLimit) above it.",
            )


def _gcs_ft(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    where, spec = cluster_spec(obj)
    if not spec:
        return
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    options = spec.get("gcsFaultToleranceOptions")
    head_env = {e.get("name") for e in groups(obj)[0].container.get("env") or []}
    old_style = str(annotations.get("ray.io/ft-enabled", "")).lower() == "true"
    if old_style and "RAY_REDIS_ADDRESS" not in head_env and not options:
        yield LintFinding(
            rule="gcs_fault_tolerance",
            severity="error",
            field="metadata.annotations['ray.io/ft-enabled']",
            why="GCS fault tolerance is on but names no external Redis: the head has nowhere to keep the GCS, so a "
            "head restart still loses every job, actor and Serve app.",
            fix=f"Set {where}.gcsFaultToleranceOptions.redisAddress (and drop the annotation, which KubeRay replaces "
            "with gcsFaultToleranceOptions).",
        )
    elif options is not None and not options.get("redisAddress") and options.get("backend") != "rocksdb":
        yield LintFinding(
            rule="gcs_fault_tolerance",
            severity="error",
            field=f"{where}.gcsFaultToleranceOptions.redisAddress",
            why="gcsFaultToleranceOptions is set without a Redis address: fault tolerance needs external storage.",
            fix="Set redisAddress to an external Redis (redis:6379), with redisPassword from a Secret.",
        )
    elif "RAY_REDIS_ADDRESS" in head_env and not options:
        yield LintFinding(
            rule="gcs_fault_tolerance",
            severity="error",
            field=f"{where}.headGroupSpec.template.spec.containers[0].env[name=RAY_REDIS_ADDRESS]",
            why="RAY_REDIS_ADDRESS turns fault tolerance on implicitly; KubeRay refuses it without "
            "gcsFaultToleranceOptions.",
            fix=f"Move it to {where}.gcsFaultToleranceOptions.redisAddress.",
        )
    elif obj.get("kind") == "RayService" and not old_style and not options:
        yield LintFinding(
            rule="gcs_fault_tolerance",
            severity="warning",
            field=f"{where}.gcsFaultToleranceOptions",
            why="A RayService without GCS fault tolerance: when its head pod restarts, the Serve applications are "
            "gone until KubeRay notices and deploys them again, so traffic fails meanwhile.",
            fix="Set gcsFaultToleranceOptions with an external Redis (redisAddress).",
        )


def _autoscaler_v1_labels(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    where, spec = cluster_spec(obj)
    if not spec or not spec.get("enableInTreeAutoscaling"):
        return
    version = str((spec.get("autoscalerOptions") or {}).get("version") or "")
    head_env = {str(e.get("name")): str(e.get("value")) for e in groups(obj)[0].container.get("env") or []}
    if version == "v2" or head_env.get("RAY_enable_autoscaler_v2", "").lower() in ("1", "true"):
        return
    for g in groups(obj)[1:]:
        if g.spec.get("labels") or g.params.get("labels"):
            yield LintFinding(
                rule="autoscaler_v1_labels",
                severity="warning",
                field=f"{g.where}.labels",
                why="The autoscaler here is v1, which does not read node labels: a task or actor with a label "
                "selector for this group never makes it scale up, and waits.",
                fix=f"Set {where}.autoscalerOptions.version: v2 (Ray 2.47+), or schedule by custom resources.",
            )


def _submitter(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    if obj.get("kind") not in ("RayJob", "RayCronJob"):
        return
    spec = obj.get("spec") or {}
    job = (spec.get("jobTemplate") or {}) if obj.get("kind") == "RayCronJob" else spec
    prefix = "spec.jobTemplate" if obj.get("kind") == "RayCronJob" else "spec"
    if job.get("submissionMode") not in (None, "K8sJobMode"):
        return
    limit = (job.get("submitterConfig") or {}).get("backoffLimit")
    if limit is not None and int(limit) < 2:
        yield LintFinding(
            rule="submitter_backoff",
            severity="warning",
            field=f"{prefix}.submitterConfig.backoffLimit",
            why=f"The submitter Job retries {limit} time(s): it can start before the head's dashboard answers, "
            "fail every try, and mark the RayJob Failed (BackoffLimitExceeded) although Ray never saw the job.",
            fix="Leave backoffLimit at KubeRay's default 2 or raise it; or use submissionMode HTTPMode, which KubeRay "
            "sends once the cluster is ready.",
        )


def head_services(obj: dict[str, Any]) -> list[str]:
    """The head Service names an object makes KubeRay create in its namespace."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    _where, spec = cluster_spec(obj)
    named = ((((spec or {}).get("headGroupSpec") or {}).get("headService") or {}).get("metadata") or {}).get(
        "name"
    )
    if obj.get("kind") == "RayService":
        return [f"{name}-head-svc"]
    if obj.get("kind") == "RayCluster":
        return [str(named or f"{name}-head-svc")]
    return [str(named)] if named else []


def _names(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    kind, name = str(obj.get("kind")), str((obj.get("metadata") or {}).get("name") or "")
    limit = NAME_LIMITS.get(kind)
    if limit and (len(name) > limit or violation(name, "service") is not None):
        yield LintFinding(
            rule="head_service_names",
            severity="error",
            field="metadata.name",
            why=f"KubeRay refuses a {kind} named {quoted(name)}: it must be a DNS-1035 label of at most {limit} "
            "characters (KubeRay builds its head Service and pod names from it).",
            fix=f"Rename it: lowercase letters, digits and '-', starting with a letter, at most {limit} characters.",
        )
    if ctx.neighbours is None:
        return
    mine = set(head_services(obj))
    for other in ctx.neighbours:
        meta = other.get("metadata") or {}
        if (other.get("kind"), meta.get("name")) == (kind, name):
            continue
        clash = mine & set(head_services(other))
        if clash:
            yield LintFinding(
                rule="head_service_names",
                severity="error",
                field="metadata.name",
                why=f"Its head Service {', '.join(sorted(clash))} is the one {other.get('kind')} {meta.get('name')} "
                "of the namespace already has: KubeRay cannot create it, or points it at the wrong head.",
                fix="Rename one of them, or give the RayCluster's headGroupSpec.headService a name of its own.",
            )


def runtime_envs(obj: dict[str, Any], ctx: LintContext) -> list[tuple[str, dict[str, Any]]]:
    """Every runtime_env of the object (a RayJob's runtimeEnvYAML, a RayService's Serve apps) and the one
    given, with where each is."""
    import yaml

    found: list[tuple[str, dict[str, Any]]] = []
    if ctx.runtime_env is not None:
        found.append(("runtime_env", ctx.runtime_env))
    spec = obj.get("spec") or {}
    job = (spec.get("jobTemplate") or {}) if obj.get("kind") == "RayCronJob" else spec
    for where, text in (
        ("spec.runtimeEnvYAML", job.get("runtimeEnvYAML")),
        ("spec.serveConfigV2", spec.get("serveConfigV2")),
    ):
        if not isinstance(text, str) or not text.strip():
            continue
        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if where.endswith("runtimeEnvYAML") and isinstance(parsed, dict):
            found.append((where, parsed))
        elif isinstance(parsed, dict):
            for app in parsed.get("applications") or []:
                if isinstance(app, dict) and isinstance(app.get("runtime_env"), dict):
                    found.append((f"{where} application {app.get('name')} runtime_env", app["runtime_env"]))
    return found


def egress_closed(policies: list[dict[str, Any]]) -> str | None:
    """The NetworkPolicy that leaves Ray pods no way out to the internet on 443 (None: egress is open)."""
    restricting = [
        p
        for p in policies
        if "Egress" in ((p.get("spec") or {}).get("policyTypes") or [])
        and not ((p.get("spec") or {}).get("podSelector") or {}).get("matchExpressions")
    ]
    for policy in restricting:
        for rule in (policy.get("spec") or {}).get("egress") or []:
            anywhere = not rule.get("to") or any(
                (t.get("ipBlock") or {}).get("cidr") in ("0.0.0.0/0", "::/0") for t in rule.get("to") or []
            )
            https = not rule.get("ports") or any(
                str(p.get("port")) in ("443", "https") for p in rule["ports"]
            )
            if anywhere and https:
                return None
    return str(restricting[0]["metadata"]["name"]) if restricting else None


def _pip(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    installs = [(w, env) for w, env in runtime_envs(obj, ctx) if any(env.get(k) for k in INSTALLERS)]
    if not installs:
        return
    if ctx.policies is None:
        ctx.unknown.append("pip_without_egress: the namespace's NetworkPolicies could not be read")
        return
    closed = egress_closed(ctx.policies)
    if closed is None:
        return
    for where, env in installs:
        tool = next(k for k in INSTALLERS if env.get(k))
        yield LintFinding(
            rule="pip_without_egress",
            severity="error",
            field=f"{where}.{tool}",
            why=f"NetworkPolicy {closed} leaves the pods no way out to a package index: the {tool} install times "
            "out and the job (or Serve app) never starts (RuntimeEnvSetupError).",
            fix="Bake the packages into the image, point pip at an index inside the cluster (pip_install_options "
            "with --index-url), or allow egress on 443 to the index.",
        )


def _working_dir(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    size, limit = ctx.working_dir_bytes, ctx.upload_limit
    if size is None or size < limit // 2:
        return
    over = size >= limit
    yield LintFinding(
        rule="working_dir_size",
        severity="error" if over else "warning",
        field="runtime_env.working_dir",
        why=f"The working_dir holds {byte_size(size)}; Ray uploads it zipped through the GCS, whose limit is "
        f"{byte_size(limit)}: "
        + ("the upload is refused." if over else "near the limit (Ray warns at half)."),
        fix="Leave data and build outputs out (runtime_env.excludes, a .rayignore file), or put them in remote "
        "storage and pass a URI.",
    )


def _ray_version(obj: dict[str, Any], ctx: LintContext) -> Iterator[LintFinding]:
    where, spec = cluster_spec(obj)
    version = str((spec or {}).get("rayVersion") or "")
    if not spec or not version:
        return
    for g in groups(obj):
        image = str(g.container.get("image") or "")
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        found = RAY_IMAGE_VERSION.search(tag)
        if found and found[1] != version:
            yield LintFinding(
                rule="ray_version",
                severity="error",
                field=f"{g.where}.template.spec.containers[0].image",
                why=f"The image runs Ray {found[1]} but {where}.rayVersion says {version}: KubeRay sets up the "
                "autoscaler and its commands for rayVersion, and nodes on different Ray versions cannot join.",
                fix=f"Make the image tag and rayVersion the same version ({found[1]} or {version}).",
            )


CHECKS: dict[str, Rule] = {
    "resources": _resources,
    "object_store_shm": _object_store,
    "gcs_fault_tolerance": _gcs_ft,
    "autoscaler_v1_labels": _autoscaler_v1_labels,
    "submitter_backoff": _submitter,
    "head_service_names": _names,
    "pip_without_egress": _pip,
    "working_dir_size": _working_dir,
    "ray_version": _ray_version,
}


def lint(obj: dict[str, Any], ctx: LintContext) -> LintReport:
    """Every rule over the object, errors first; a rule that could not run says why (never counts as passed)."""
    findings = [f for rule in CHECKS.values() for f in rule(obj, ctx)]
    findings.sort(key=lambda f: f.severity != "error")
    errors = sum(1 for f in findings if f.severity == "error")
    if findings:
        first = findings[0]
        verdict = f"{errors} error(s), {len(findings) - errors} warning(s); first: {first.field}: {first.why}"
    else:
        verdict = "No problem found by the rules that ran" + (
            f" ({len(ctx.unknown)} could not run)" if ctx.unknown else ""
        )
    unknown_rules = {u.split(":")[0] for u in ctx.unknown}
    return LintReport(
        verdict=verdict,
        findings=findings,
        checked=[r for r in CHECKS if r not in unknown_rules],
        unknown=list(ctx.unknown),
    )


def render_lint(report: LintReport, limit: int) -> list[str]:
    lines = [f"Lint: {report.verdict}"]
    for f in report.findings[:limit]:
        lines.append(f"- [{f.severity}] {f.field}: {f.why} Fix: {f.fix}")
    if len(report.findings) > limit:
        lines.append(f"({len(report.findings) - limit} more finding(s) left out: call kuberay_lint for all.)")
    lines += [f"- unknown: {u}" for u in report.unknown]
    return lines
