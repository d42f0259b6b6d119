"""Issue 41: the KubeRay fleet, changes as a plan first, specs checked before they fail.

The real Kubernetes client (kubernetes_asyncio, a kubeconfig whose user authenticates with an exec plugin)
against the loopback API server (tests/kube_apiserver.py: lists across namespaces with continue tokens, RBAC by
namespaced Roles, server-side apply with field managers and dryRun=All, resourceVersion conflicts), whose
service proxy reaches the session's real Ray head. Every KubeRay object here is one of KubeRay's samples with a
status, validated against the vendored CRD schemas (pods against Kubernetes' own) before use."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests import history_server
from tests.kube_apiserver import KubeState, serve, write_kubeconfig
from tests.kuberay_objects import (
    GPU_MESSAGE,
    head_pod,
    head_service,
    pod,
    raycluster,
    running,
    sample,
    validate,
)
from tests.support import call_ok, mcp_client, text_of

from ray_mcp.settings import Settings

pytestmark = pytest.mark.live  # the kubeconfig's exec plugin is a process; the proxy reaches a Ray head

HEALTHY = (
    "raycluster-kuberay"  # in default: ready, head and worker ready, the session head behind its service
)
GPU = "gpu-train"  # in ml: a GPU worker the scheduler cannot place
SERVICE = "rayservice-sample"  # in ml: an upgrade whose pending cluster never gets ready
JOB = "rayjob-sample"  # in ml: failed after its submitter ran out of retries


def in_ns(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    obj["metadata"]["namespace"] = ns
    for ref in obj["metadata"].get("ownerReferences") or []:
        ref["uid"] = f"uid-rayclusters-{ref['name']}"
    return obj


def gpu_worker(cluster: str, ns: str, *, pending: bool) -> dict[str, Any]:
    status: dict[str, Any] = (
        {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_MESSAGE}
            ],
        }
        if pending
        else running("ray-worker")
    )
    worker = pod(
        f"{cluster}-gpu-worker-{'p' if pending else 'r'}1",
        cluster,
        "worker",
        group="gpu-group",
        status=status,
    )
    worker["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    return validate(in_ns(worker, ns))


def gpu_cluster(name: str, ns: str) -> dict[str, Any]:
    rc = raycluster(name, state="ready")
    rc["metadata"]["namespace"] = ns
    group = copy.deepcopy(rc["spec"]["workerGroupSpecs"][0])
    group["groupName"] = "gpu-group"
    group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    rc["spec"]["workerGroupSpecs"].append(group)
    return validate(rc)


def rayservice_upgrading(ns: str) -> list[dict[str, Any]]:
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["metadata"]["namespace"] = ns
    rs["status"] = {
        "serviceStatus": "Running",
        "numServeEndpoints": 1,
        "activeServiceStatus": {
            "rayClusterName": f"{SERVICE}-a",
            "applicationStatuses": {"fruit_app": {"status": "RUNNING"}},
        },
        "pendingServiceStatus": {"rayClusterName": f"{SERVICE}-b"},
        "conditions": [
            {
                "type": "UpgradeInProgress",
                "status": "True",
                "reason": "BothActivePendingClustersExist",
                "message": "",
                "lastTransitionTime": "2026-12-01T09:00:00Z",
            }
        ],
    }
    active = in_ns(raycluster(f"{SERVICE}-a"), ns)
    pending = in_ns(raycluster(f"{SERVICE}-b", state="suspended"), ns)
    for rc in (active, pending):
        rc["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayService",
                "name": SERVICE,
                "uid": "uid-rayservices-x",
                "controller": True,
            }
        ]
    return [validate(rs), validate(active), validate(pending), in_ns(head_pod(f"{SERVICE}-a"), ns)]


def rayjob_failed(ns: str) -> dict[str, Any]:
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["metadata"]["namespace"] = ns
    rj["status"] = {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "",
        "reason": "SubmissionFailed",
        "message": "Job submission has failed. Reason: BackoffLimitExceeded.",
        "failed": 3,
    }
    return validate(rj)


def raycronjob(ns: str) -> dict[str, Any]:
    cj = sample("ray-cronjob.sample.yaml", "RayCronJob")
    cj["metadata"]["namespace"] = ns
    cj["status"] = {"lastScheduleTime": "2026-12-01T11:59:00Z"}
    return validate(cj)


def fleet_state(dashboard: str) -> KubeState:
    state = KubeState()
    healthy = raycluster(HEALTHY)
    objects = [healthy, head_service(), head_pod(), gpu_worker(HEALTHY, "default", pending=False)]
    objects += [gpu_cluster(GPU, "ml"), in_ns(head_pod(GPU), "ml"), gpu_worker(GPU, "ml", pending=True)]
    objects += [*rayservice_upgrading("ml"), rayjob_failed("ml"), raycronjob("team-b")]
    for obj in objects:
        state.put(obj)
    state.dashboards[f"{HEALTHY}-head-svc"] = dashboard
    return state


@contextlib.contextmanager
def serving(state: KubeState, tmp_path: Path) -> Iterator[tuple[KubeState, Path]]:
    with serve(state) as url:
        yield state, write_kubeconfig(tmp_path / "kubeconfig", url)
    from tests.kuberay_objects import granted

    assert state.used <= granted(), f"deploy/kubernetes/kuberay/role.yaml lacks {state.used - granted()}"


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[KubeState, Path]]:
    """The fleet with no Ray head behind any service (the tests that ask no dashboard: no Ray slot needed)."""
    with serving(fleet_state("http://127.0.0.1:9"), tmp_path) as served:
        yield served


@pytest.fixture
def fleet_head(ray_cluster: Any, tmp_path: Path) -> Iterator[tuple[KubeState, Path]]:
    """The fleet whose healthy cluster's head service leads to the session's real Ray head."""
    with serving(fleet_state(ray_cluster.dashboard_url), tmp_path) as served:
        yield served


def tools_only(kubeconfig: Path, **kw: Any) -> Settings:
    """A server with no k8s:// address: the Kubernetes tools by flag, the kubeconfig's current context."""
    return Settings(
        address="http://127.0.0.1:9", embedded="never", kubernetes_tools=True, kubeconfig=kubeconfig, **kw
    )


async def fleet_call(client: Client, **args: Any) -> tuple[str, dict[str, Any]]:
    result = await call_ok(client, "kuberay_fleet", args)
    assert result.structured_content is not None
    return text_of(result), result.structured_content


# -- the fleet view ---------------------------------------------------------------------------------------------


async def test_the_fleet_lists_every_namespace_with_the_roll_ups_first(fleet_head: Any) -> None:
    _state, kubeconfig = fleet_head
    async with mcp_client(tools_only(kubeconfig)) as client:
        text, data = await fleet_call(client, ray_health_s=60)  # time enough on a busy machine
    assert text.startswith("7 KubeRay object(s): 4 unhealthy, 2 GPU(s) idle of 4 asked for"), text[:300]
    assert "1 upgrade(s) stuck" in text.splitlines()[0]
    rows = {(r["kind"], r["namespace"], r["name"]): r for r in data["rows"]}
    assert set(rows) >= {
        ("RayCluster", "default", HEALTHY),
        ("RayCluster", "ml", GPU),
        ("RayService", "ml", SERVICE),
        ("RayJob", "ml", JOB),
        ("RayCronJob", "team-b", "raycronjob-sample"),
    }
    assert rows[("RayCluster", "ml", GPU)]["verdict"] == "unschedulable"
    assert rows[("RayService", "ml", SERVICE)]["verdict"] == "upgrade stuck"
    assert rows[("RayJob", "ml", JOB)]["verdict"] == "RayJob failed"
    assert rows[("RayCronJob", "team-b", "raycronjob-sample")]["state"].startswith("schedule '* * * * *'")
    healthy = rows[("RayCluster", "default", HEALTHY)]
    assert healthy["verdict"] == "healthy" and healthy["address"] == f"k8s://default/{HEALTHY}"
    assert (
        healthy["gpus_requested"] == 2
        and {"name": "gpu-group", "ready": 0, "desired": 1} not in healthy["groups"]
    )
    gpu = rows[("RayCluster", "ml", GPU)]
    assert gpu["gpus_requested"] == 2 and {"name": "gpu-group", "ready": 0, "desired": 1} in gpu["groups"]
    # its head is ready but nothing answers behind its service: cluster_health's own word for that
    assert gpu["ray_verdict"].startswith("Unknown: could not check") and gpu.get("gpus_used") is None
    # unhealthy rows first
    assert [r.get("finding") is None for r in data["rows"]][:4] == [False] * 4


async def test_each_rows_verdict_is_kuberay_status_s_verdict_for_its_address(fleet: Any) -> None:
    _state, kubeconfig = fleet
    async with mcp_client(tools_only(kubeconfig)) as client:
        _text, data = await fleet_call(client, ray_health_s=0)
        for row in data["rows"]:
            if row["kind"] == "RayCronJob":
                continue  # kuberay_status reads RayClusters, RayJobs and RayServices
            status = await call_ok(client, "kuberay_status", {"name": row["address"], "events": False})
            assert status.structured_content is not None
            assert status.structured_content["verdict"] == row["verdict"], (row, text_of(status)[:300])


async def test_the_ray_verdict_is_cluster_health_s_where_the_dashboard_answers(
    fleet_head: Any, ray_cluster: Any
) -> None:
    _state, kubeconfig = fleet_head
    async with mcp_client(tools_only(kubeconfig)) as client:
        _text, data = await fleet_call(client, namespaces=["default"], ray_health_s=60)
    async with mcp_client(Settings(address=ray_cluster.dashboard_url)) as direct:
        health = await call_ok(direct, "cluster_health", {})
    (row,) = [r for r in data["rows"] if r["name"] == HEALTHY]
    verdict = health.structured_content["verdict"]  # type: ignore[index]
    assert row["ray_verdict"].split(":")[0] == verdict.split(":")[0], (row["ray_verdict"], verdict)
    assert row["gpus_used"] == 0  # the session head has no GPU: Ray uses none of the 2 asked for


async def test_the_fleet_pages_with_kubernetes_continue_tokens_and_says_when_one_expired(fleet: Any) -> None:
    state, kubeconfig = fleet
    seen: list[tuple[str, str, str]] = []
    async with mcp_client(tools_only(kubeconfig)) as client:
        page = None
        for _ in range(10):
            _text, data = await fleet_call(
                client, limit=2, ray_health_s=0, **({"page": page} if page else {})
            )
            assert len(data["rows"]) <= 2
            seen += [(r["kind"], r["namespace"], r["name"]) for r in data["rows"]]
            page = data.get("next_page")
            if not page:
                break
        assert len(seen) == len(set(seen)) == 7  # 4 RayClusters, a RayService, a RayJob, a RayCronJob
        _text, first = await fleet_call(client, limit=2, ray_health_s=0)
        other = await client.call_tool(
            "kuberay_fleet", {"namespaces": ["ml"], "page": first["next_page"], "ray_health_s": 0}
        )
        state.expire_continue = True
        expired = await client.call_tool(
            "kuberay_fleet", {"limit": 2, "page": first["next_page"], "ray_health_s": 0}
        )
    assert expired.is_error and "without page" in text_of(expired) and "410" in text_of(expired)
    assert other.is_error and "same contexts, namespaces and kinds" in text_of(other)
    assert any("continue=" in path for _, path in state.requests)


async def test_a_namespaced_role_lists_its_own_namespace_and_says_why_not_the_others(fleet: Any) -> None:
    state, kubeconfig = fleet
    state.rbac_namespaces = {"default", "ml"}
    async with mcp_client(tools_only(kubeconfig)) as client:
        _text, data = await fleet_call(client, ray_health_s=0)
        _both, named = await fleet_call(client, namespaces=["default", "ml"], ray_health_s=0)
        refused = await client.call_tool("kuberay_fleet", {"namespaces": ["team-b"], "ray_health_s": 0})
    assert {r["namespace"] for r in data["rows"]} == {"default"}
    assert any("may not list" in n and "pass namespaces" in n for n in data["notes"]), data["notes"]
    assert {r["namespace"] for r in named["rows"]} == {"default", "ml"}
    assert refused.is_error and "list on rayclusters.ray.io" in text_of(refused)


async def test_the_fleet_lists_other_kube_contexts_when_asked(fleet: Any, tmp_path: Path) -> None:
    _state, _kubeconfig = fleet
    other = KubeState()
    other.put(in_ns(raycluster("prod-cluster"), "prod"))
    with serve(other) as prod_url:
        kubeconfig = write_kubeconfig(
            tmp_path / "two-contexts", _server_of(_kubeconfig), others={"prod-eu": (prod_url, "prod")}
        )
        async with mcp_client(tools_only(kubeconfig)) as client:
            _text, current = await fleet_call(client, ray_health_s=0)
            _text, both = await fleet_call(client, all_contexts=True, ray_health_s=0)
    assert "prod-cluster" not in {r["name"] for r in current["rows"]}
    (prod,) = [r for r in both["rows"] if r["name"] == "prod-cluster"]
    assert prod["context"] == "prod-eu" and prod["address"] == "k8s://prod-eu/prod/prod-cluster"
    assert {r["context"] for r in both["rows"]} == {"test", "prod-eu"}


def _server_of(kubeconfig: Path) -> str:
    import yaml

    return str(yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"])


async def test_clusters_kept_by_a_history_server_are_listed_as_records(fleet: Any) -> None:
    _state, kubeconfig = fleet
    with history_server.serve(history_server.Record()) as hs:
        async with mcp_client(tools_only(kubeconfig)) as client:
            text, data = await fleet_call(client, history_server=hs, ray_health_s=0)
    (record,) = [r for r in data["rows"] if r["kind"] == "record"]
    assert record["address"] == f"history+{hs}/ml/rayjob/train-lr/{history_server.SESSION}"
    assert record["verdict"] == "terminated" and "1 terminated cluster(s) kept by the History Server" in text
    from ray_mcp.addresses import form_of

    form = form_of(record["address"])
    assert form is not None and form.record  # the row's address reads the record


async def test_every_fixture_is_valid_against_kuberays_crd_schemas(fleet: Any) -> None:
    state, _kubeconfig = fleet
    for obj in state.objects.values():
        validate(
            {k: v for k, v in obj.items()}
            | {"metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}
        )
    assert json.dumps(sorted({o["kind"] for o in state.objects.values()})) == json.dumps(
        sorted({"RayCluster", "RayJob", "RayService", "RayCronJob", "Pod", "Service"})
    )


# -- changes as a plan first ----------------------------------------------------------------------------------


def address_settings(kubeconfig: Path, name: str = HEALTHY, ns: str = "default", **kw: Any) -> Settings:
    return Settings(address=f"k8s://{ns}/{name}", kubeconfig=kubeconfig, embedded="never", **kw)


def group_of(state: KubeState, ns: str, name: str, group: str = "workergroup") -> dict[str, Any]:
    rc = state.get("rayclusters", ns, name)
    assert rc is not None
    return next(g for g in rc["spec"]["workerGroupSpecs"] if g["groupName"] == group)


async def test_a_change_is_a_dry_run_plan_first_and_the_token_applies_exactly_it(fleet: Any) -> None:
    state, kubeconfig = fleet
    before = copy.deepcopy(state.get("rayclusters", "default", HEALTHY))
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(
            client, "kuberay_apply", {"name": HEALTHY, "group": "workergroup", "max_replicas": 8}
        )
        data = plan.structured_content
        assert data is not None and data["done"] is False and data["confirm_token"]
        assert state.get("rayclusters", "default", HEALTHY) == before  # a dry run changed nothing
        assert ("PATCH", f"/apis/ray.io/v1/namespaces/default/rayclusters/{HEALTHY}") in [
            (m, p.split("?")[0]) for m, p in state.requests
        ] and any("dryRun=All" in p for _, p in state.requests)
        assert [c["path"] for c in data["diff"]] == [
            "spec.workerGroupSpecs[groupName=workergroup].maxReplicas"
        ]
        assert (data["diff"][0]["before"], data["diff"][0]["after"]) == ("5", "8")
        assert data["takes_over"] == [".spec.workerGroupSpecs (from kubectl-client-side-apply)"]
        assert data["lint"]["checked"] and "Lint:" in text_of(plan)
        other = await client.call_tool(
            "kuberay_apply",
            {"name": HEALTHY, "group": "workergroup", "max_replicas": 9, "confirm": data["confirm_token"]},
        )
        assert other.is_error and "exact change" in text_of(other)
        done = await call_ok(
            client,
            "kuberay_apply",
            {"name": HEALTHY, "group": "workergroup", "max_replicas": 8, "confirm": data["confirm_token"]},
        )
        assert done.structured_content["done"] is True  # type: ignore[index]
        assert group_of(state, "default", HEALTHY)["maxReplicas"] == 8
        # a second change keeps the first: ray-mcp applies the fields it owns with the new one
        image = "rayproject/ray:2.60.0"
        second = await call_ok(
            client, "kuberay_apply", {"name": HEALTHY, "image": image, "ray_version": "2.60.0"}
        )
        token = second.structured_content["confirm_token"]  # type: ignore[index]
        await call_ok(
            client,
            "kuberay_apply",
            {"name": HEALTHY, "image": image, "ray_version": "2.60.0", "confirm": token},
        )
    rc = state.get("rayclusters", "default", HEALTHY)
    assert rc is not None and group_of(state, "default", HEALTHY)["maxReplicas"] == 8
    assert rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == image
    assert rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["image"] == image
    managers = {(m["manager"], m["operation"]) for m in rc["metadata"]["managedFields"]}
    assert ("ray-mcp", "Apply") in managers


async def test_a_token_is_refused_once_the_object_changed_after_the_plan(fleet: Any) -> None:
    state, kubeconfig = fleet
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(
            client, "kuberay_apply", {"name": HEALTHY, "group": "workergroup", "max_replicas": 7}
        )
        rc = copy.deepcopy(state.get("rayclusters", "default", HEALTHY))
        assert rc is not None
        rc["metadata"]["resourceVersion"] = "999"  # KubeRay, or a person, wrote it meanwhile
        state.put(rc)
        late = await client.call_tool(
            "kuberay_apply",
            {
                "name": HEALTHY,
                "group": "workergroup",
                "max_replicas": 7,
                "confirm": plan.structured_content["confirm_token"],
            },  # type: ignore[index]
        )
    assert late.is_error and "resourceVersion" in text_of(late)
    assert group_of(state, "default", HEALTHY)["maxReplicas"] == 5


async def test_scaling_to_zero_or_dropping_a_group_by_apply_needs_allow_destructive(fleet: Any) -> None:
    _state, kubeconfig = fleet
    async with mcp_client(address_settings(kubeconfig)) as client:
        refused = await client.call_tool(
            "kuberay_apply", {"name": HEALTHY, "group": "workergroup", "max_replicas": 0}
        )
    assert refused.is_error and "--allow-destructive" in text_of(refused)
    async with mcp_client(address_settings(kubeconfig, allow_destructive=True)) as client:
        plan = await call_ok(
            client, "kuberay_apply", {"name": HEALTHY, "group": "workergroup", "max_replicas": 0}
        )
    assert plan.structured_content["done"] is False  # type: ignore[index]


async def test_a_new_raycluster_from_a_manifest_is_created_after_its_plan(fleet: Any) -> None:
    state, kubeconfig = fleet
    manifest = sample("ray-cluster.sample.yaml", "RayCluster")
    manifest["metadata"]["name"] = "fresh"
    validate(manifest)
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(client, "kuberay_apply", {"manifest": manifest})
        data = plan.structured_content
        assert (
            data is not None
            and data["action"] == "create"
            and state.get("rayclusters", "default", "fresh") is None
        )
        assert any(c["path"] == "spec.rayVersion" and c.get("before") is None for c in data["diff"])
        import yaml

        await call_ok(
            client, "kuberay_apply", {"manifest": yaml.safe_dump(manifest), "confirm": data["confirm_token"]}
        )
        broken = copy.deepcopy(manifest) | {"metadata": {"name": "broken"}}
        broken["spec"]["workerGroupSpecs"][0]["replicas"] = "one"
        invalid = await client.call_tool("kuberay_apply", {"manifest": broken})
    assert state.get("rayclusters", "default", "fresh") is not None
    assert invalid.is_error and "invalid" in text_of(invalid) and "replicas" in text_of(invalid)


def rayservice(ns: str = "default", **spec: Any) -> dict[str, Any]:
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["metadata"]["namespace"] = ns
    rs["spec"].update(spec)
    rs["status"] = {
        "serviceStatus": "Running",
        "numServeEndpoints": 2,
        "activeServiceStatus": {"rayClusterName": "rayservice-sample-x", "applicationStatuses": {}},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "NonZeroServeEndpoints",
                "message": "",
                "lastTransitionTime": "2026-12-01T10:00:00Z",
            }
        ],
    }
    return validate(rs)


@pytest.mark.parametrize(
    ("change", "strategy", "kinds"),
    [
        ({"serve_config_v2": "applications: []\n"}, None, ["serve_in_place"]),
        ({"image": "rayproject/ray:2.60.0"}, None, ["new_cluster"]),
        ({"image": "rayproject/ray:2.60.0"}, "NewClusterWithIncrementalUpgrade", ["incremental_upgrade"]),
        ({"image": "rayproject/ray:2.60.0"}, "None", ["held"]),
        ({"group": "small-group", "max_replicas": 9}, None, ["replicas_only"]),
        (
            {"image": "rayproject/ray:2.60.0", "serve_config_v2": "applications: []\n"},
            None,
            ["new_cluster", "serve_in_place"],
        ),
    ],
    ids=["serve-config", "new-cluster", "incremental", "strategy-none", "replicas", "both"],
)
async def test_a_rayservice_plan_says_what_the_operator_will_do(
    fleet: Any, change: dict[str, Any], strategy: str | None, kinds: list[str]
) -> None:
    state, kubeconfig = fleet
    spec = {"upgradeStrategy": {"type": strategy}} if strategy else {}
    state.put(rayservice(**spec))
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(client, "kuberay_apply", {"kind": "RayService", "name": SERVICE, **change})
    data = plan.structured_content
    assert data is not None and [o["kind"] for o in data["outcome"]] == kinds, data["outcome"]
    assert "KubeRay will:" in text_of(plan)


async def test_a_worker_group_added_at_the_end_updates_the_running_cluster_in_place(fleet: Any) -> None:
    state, kubeconfig = fleet
    rs = rayservice()
    state.put(rs)
    manifest = copy.deepcopy(rs)
    del manifest["status"]
    group = copy.deepcopy(manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]) | {
        "groupName": "extra"
    }
    manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"].append(group)
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(client, "kuberay_apply", {"manifest": manifest})
    assert [o["kind"] for o in plan.structured_content["outcome"]] == ["cluster_in_place"]  # type: ignore[index]


async def test_a_protected_object_is_never_changed_or_deleted(fleet: Any) -> None:
    state, kubeconfig = fleet
    rc = copy.deepcopy(state.get("rayclusters", "default", HEALTHY))
    assert rc is not None
    rc["metadata"]["annotations"] = {"ray-mcp.io/protected": "true"}
    state.put(rc)
    async with mcp_client(address_settings(kubeconfig, allow_destructive=True)) as client:
        change = await client.call_tool(
            "kuberay_apply", {"name": HEALTHY, "group": "workergroup", "max_replicas": 6}
        )
        delete = await client.call_tool("kuberay_delete", {"kind": "RayCluster", "name": HEALTHY})
    for refused in (change, delete):
        assert refused.is_error and "ray-mcp.io/protected=true" in text_of(refused)
    assert not any(m in ("PATCH", "DELETE") and HEALTHY in p for m, p in state.requests)


async def test_deleting_a_raycluster_is_confirmed_audited_and_bound_to_its_version(
    fleet: Any, tmp_path: Path
) -> None:
    state, kubeconfig = fleet
    audit = tmp_path / "audit.jsonl"
    settings = address_settings(kubeconfig, allow_destructive=True, audit_log=audit)
    async with mcp_client(settings) as client:
        first = await call_ok(client, "kuberay_delete", {"kind": "RayCluster", "name": "ml/gpu-train"})
        token = first.structured_content["confirm_token"]  # type: ignore[index]
        assert state.get("rayclusters", "ml", GPU) is not None
        owned = await client.call_tool("kuberay_delete", {"kind": "RayCluster", "name": f"ml/{SERVICE}-a"})
        await call_ok(
            client, "kuberay_delete", {"kind": "RayCluster", "name": "ml/gpu-train", "confirm": token}
        )
    assert state.get("rayclusters", "ml", GPU) is None
    assert owned.is_error and "belongs to RayService" in text_of(owned)
    done = [json.loads(line) for line in audit.read_text().splitlines() if '"kuberay_delete"' in line]
    assert any(
        r.get("targets", {}).get("raycluster") == f"ml/{GPU}" and r["targets"].get("diff") for r in done
    )


async def test_deleting_a_serving_rayservice_needs_the_users_word(fleet: Any) -> None:
    state, kubeconfig = fleet
    state.put(rayservice())
    async with mcp_client(address_settings(kubeconfig, allow_destructive=True)) as client:
        refused = await client.call_tool("kuberay_delete", {"kind": "RayService", "name": SERVICE})
        wrong = await client.call_tool(
            "kuberay_delete", {"kind": "RayService", "name": SERVICE, "stop_serving": "yes"}
        )
        plan = await call_ok(
            client, "kuberay_delete", {"kind": "RayService", "name": SERVICE, "stop_serving": SERVICE}
        )
        token = plan.structured_content["confirm_token"]  # type: ignore[index]
        await call_ok(
            client,
            "kuberay_delete",
            {"kind": "RayService", "name": SERVICE, "stop_serving": SERVICE, "confirm": token},
        )
    assert refused.is_error and "serves traffic" in text_of(refused) and "stop_serving" in text_of(refused)
    assert wrong.is_error
    assert state.get("rayservices", "default", SERVICE) is None
    assert any(
        m == "DELETE" and "resourceVersion" not in p for m, p in state.requests
    )  # preconditions in the body


async def test_every_change_is_audited_with_object_namespace_and_diff_digest(
    fleet: Any, tmp_path: Path
) -> None:
    _state, kubeconfig = fleet
    audit = tmp_path / "audit.jsonl"
    async with mcp_client(address_settings(kubeconfig, audit_log=audit)) as client:
        plan = await call_ok(client, "kuberay_apply", {"name": HEALTHY, "autoscaling": True})
        digest = plan.structured_content["diff_digest"]  # type: ignore[index]
        await call_ok(
            client,
            "kuberay_apply",
            {"name": HEALTHY, "autoscaling": True, "confirm": plan.structured_content["confirm_token"]},
        )  # type: ignore[index]
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    outcomes = [(r.get("outcome"), r.get("targets") or {}) for r in records]
    assert ("dry_run", {"name": HEALTHY}) in outcomes, outcomes  # the plan changed nothing, and says so
    assert any(
        o == "ok" and t.get("raycluster") == f"default/{HEALTHY}" and t.get("diff") == digest
        for o, t in outcomes
    ), outcomes


# -- specs checked before they fail ---------------------------------------------------------------------------

DENY_EGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "NetworkPolicy",
    "metadata": {"name": "ray-no-egress", "namespace": "default"},
    "spec": {
        "podSelector": {},
        "policyTypes": ["Egress"],
        "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}],
    },
}


async def test_kuberay_lint_checks_a_manifest_an_object_and_a_runtime_env_with_the_namespaces_facts(
    fleet: Any, tmp_path: Path
) -> None:
    state, kubeconfig = fleet
    state.put(validate(copy.deepcopy(DENY_EGRESS)))
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["spec"]["runtimeEnvYAML"] = "pip:\n  - requests==2.26.0\n"
    code = tmp_path / "code"
    code.mkdir()
    (code / "main.py").write_text("print(1)\n")
    async with mcp_client(address_settings(kubeconfig, upload_roots=[tmp_path])) as client:
        job = await call_ok(client, "kuberay_lint", {"manifest": validate(rj)})
        existing = await call_ok(client, "kuberay_lint", {"name": HEALTHY})
        env = await call_ok(client, "kuberay_lint", {"runtime_env": {"working_dir": str(code), "pip": ["x"]}})
        outside = await client.call_tool("kuberay_lint", {"runtime_env": {"working_dir": "/etc"}})
    found = {(f["rule"], f["field"]) for f in job.structured_content["findings"]}  # type: ignore[index]
    assert ("pip_without_egress", "spec.runtimeEnvYAML.pip") in found, found
    assert "ray-no-egress" in text_of(job) and text_of(job).startswith("Lint: 1 error(s)")
    assert not [f for f in existing.structured_content["findings"] if f["severity"] == "error"]  # type: ignore[index]
    env_data = env.structured_content
    assert env_data is not None and "working_dir_size" in env_data["checked"]
    assert [f["rule"] for f in env_data["findings"]] == ["pip_without_egress"]
    assert outside.is_error and "upload root" in text_of(outside)


async def test_every_plan_carries_the_lint_with_the_namespaces_objects(fleet: Any) -> None:
    state, kubeconfig = fleet
    state.put(rayservice())
    manifest = sample("ray-cluster.sample.yaml", "RayCluster")
    manifest["metadata"]["name"] = "clash"
    manifest["spec"]["headGroupSpec"]["headService"] = {"metadata": {"name": f"{SERVICE}-head-svc"}}
    async with mcp_client(address_settings(kubeconfig)) as client:
        plan = await call_ok(client, "kuberay_apply", {"manifest": validate(manifest)})
    lint_report = plan.structured_content["lint"]  # type: ignore[index]
    assert any(f["rule"] == "head_service_names" and SERVICE in f["why"] for f in lint_report["findings"])
    assert "Lint: 1 error(s)" in text_of(plan)


async def test_the_fleet_sends_the_addresss_ray_token_to_its_own_cluster_only(fleet: Any) -> None:
    state, kubeconfig = fleet
    for rc, ns in ((GPU, "ml"), (HEALTHY, "default")):
        svc = head_service(f"{rc}-head-svc", rc)
        svc["metadata"]["namespace"] = ns
        state.put(svc)
    settings = address_settings(kubeconfig, ray_auth_token="the-default-clusters-ray-token")
    async with mcp_client(settings) as client:
        await fleet_call(client, ray_health_s=5)
    asked = {(ns, svc) for ns, svc, _token in state.proxied}
    assert ("ml", f"{GPU}-head-svc") in asked and ("default", f"{HEALTHY}-head-svc") in asked
    tokens = {(ns, svc): token for ns, svc, token in state.proxied}
    assert tokens[("default", f"{HEALTHY}-head-svc")] == "Bearer the-default-clusters-ray-token"
    assert tokens[("ml", f"{GPU}-head-svc")] is None  # another cluster is asked without it
