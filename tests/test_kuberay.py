"""ray-mcp on a KubeRay cluster, through the real Kubernetes client (kubernetes_asyncio) and a real kubeconfig
whose user authenticates with an exec plugin, against a loopback API server (tests/kube_apiserver.py) whose
service proxy forwards to the session's real Ray head. Its objects are KubeRay's own samples with statuses,
each validated against the vendored KubeRay CRD schemas (pods against the Kubernetes schemas) before use.

One scenario per failure class of issue 28, each with its verdict in the first 300 bytes of the answer."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client
from tests.kube_apiserver import KubeState, serve, write_kubeconfig
from tests.kuberay_objects import (
    CLUSTER,
    GPU_MESSAGE,
    HEAD_SVC,
    NS,
    event,
    granted,
    head_pod,
    head_service,
    pod,
    raycluster,
    sample,
    settings_for,
    status_text,
    validate,
)
from tests.support import call_ok, mcp_client, text_of, wait_until

from ray_mcp.settings import Settings

pytestmark = pytest.mark.live  # the kubeconfig's exec plugin is a process; the proxy reaches a Ray head

# -- reaching the cluster: every Ray tool through the API server's service proxy ----------------------------


async def test_a_k8s_address_reaches_the_real_ray_head_through_the_service_proxy(kube: Any) -> None:
    state, kubeconfig = kube
    async with mcp_client(settings_for(kubeconfig)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"kuberay_status", "kuberay_logs", "scale_worker_group"} <= names
        text = text_of(await call_ok(client, "cluster_status", {}))
        assert "ALIVE" in text or "alive" in text.lower(), text[:300]
        jobs = await call_ok(client, "list_jobs", {})
        assert not jobs.is_error
        text, data = await status_text(client)
    assert text.startswith(f"HEALTHY: RayCluster {NS}/{CLUSTER}"), text[:300]
    assert data["groups"][0]["name"] == "workergroup" and data["groups"][0]["max_replicas"] == 5
    assert "autoscaler off" in text and HEAD_SVC in text
    assert (
        "get",
        "services/proxy",
    ) in state.used  # the Ray tools went through the proxy, with the exec token


async def test_submit_job_uploads_and_runs_through_the_service_proxy_with_the_kubeconfigs_credentials(
    kube: Any, tmp_path: Path
) -> None:
    """Ray's Job SDK sends with its own HTTP client: through the proxy it carried none of the kubeconfig's
    credentials (a 401 blamed on Ray's token). Its requests now ride the cluster's one HTTP client."""
    state, kubeconfig = kube
    code = tmp_path / "code"
    code.mkdir()
    (code / "answer.py").write_text(
        "import ray\nray.init()\nprint('answer', ray.get(ray.remote(lambda: 42).remote()))\n"
    )
    settings = settings_for(kubeconfig, allow_destructive=True, upload_roots=[tmp_path])
    async with mcp_client(settings) as client:
        submitted = await call_ok(
            client,
            "submit_job",
            {"entrypoint": "python answer.py", "runtime_env": {"working_dir": str(code)}},
        )
        assert submitted.structured_content is not None and submitted.structured_content["uploaded"]
        job = submitted.structured_content["submission_id"]
        info = await wait_until(client, job, {"SUCCEEDED", "FAILED", "STOPPED"})
        log = text_of(await call_ok(client, "tail_logs", {"job": job}))
        await call_ok(client, "delete_job", {"job": job, "confirm": await confirm_token(client, job)})
    assert info["status"] == "SUCCEEDED", (info, log[-500:])
    assert "answer 42" in log
    # the upload (PUT: update), the submission (POST: create) and the deletion went through the proxy
    assert {
        ("create", "services/proxy"),
        ("update", "services/proxy"),
        ("delete", "services/proxy"),
    } <= state.used


RAY_TOKEN = "a-ray-token-behind-the-kubernetes-proxy"


@pytest.fixture(scope="module")
def token_head() -> Iterator[Any]:
    """A head in Ray's token mode of its own (not the session's): run its test alone (-k) to keep one head."""
    from tests.conftest import local_head

    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": RAY_TOKEN}
    with local_head(num_cpus=1, extra_env=env, headers={"Authorization": f"Bearer {RAY_TOKEN}"}) as head:
        yield head


async def test_rays_own_token_reaches_a_token_mode_head_through_the_proxy(
    token_head: Any, tmp_path: Path
) -> None:
    """The API server takes Authorization for itself (the kubeconfig's token) and strips it; Ray's token rides
    X-Ray-Authorization, which Ray reads behind proxies."""
    state = KubeState()
    for obj in (raycluster(), head_service(), head_pod()):
        state.put(obj)
    state.dashboards[HEAD_SVC] = token_head.dashboard_url
    with serve(state) as url:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        async with mcp_client(settings_for(kubeconfig, ray_auth_token=RAY_TOKEN)) as client:
            listed = await client.call_tool("list_jobs", {})
            job = await call_ok(client, "submit_job", {"entrypoint": "python -c 'print(7 * 6)'"})
        async with mcp_client(settings_for(kubeconfig, ray_auth_token="not-the-token")) as wrong:
            refused = await wrong.call_tool("list_jobs", {})
    assert not listed.is_error, text_of(listed)
    assert job.structured_content is not None and job.structured_content["submission_id"]
    assert refused.is_error and "refused the token" in text_of(refused), text_of(refused)


async def test_the_doctor_checks_a_k8s_address_through_the_proxy(kube: Any) -> None:
    """`ray-mcp doctor --address k8s://...` probes the dashboard with the kubeconfig's credentials (it got the
    API server's 401 before) and says the GCS is out of reach through the proxy, not to pass host:6379."""
    from ray_mcp.doctor import run_checks

    _state, kubeconfig = kube
    checks = {c.name: c for c in await run_checks(settings_for(kubeconfig))}
    assert checks["address"].status == "ok" and "/proxy" in checks["address"].message
    for name in ("dashboard", "ray", "serve"):
        assert checks[name].status in ("ok", "warn") and "401" not in checks[name].message, checks[name]
    assert checks["dashboard"].status == "ok", checks["dashboard"]
    assert checks["gcs"].status == "warn" and "Kubernetes API server's service proxy" in checks["gcs"].message
    assert "pod of the cluster" in checks["gcs"].fix


async def confirm_token(client: Client, job: str) -> str:
    first = await call_ok(client, "delete_job", {"job": job})
    assert first.structured_content is not None
    return str(first.structured_content["confirm_token"])


async def test_the_api_servers_own_refusals_of_the_proxy_name_the_rbac_verb_or_the_head(kube: Any) -> None:
    """A 403 of the API server (RBAC) or its 503 (no ready endpoint behind the head service) is not the Ray
    dashboard refusing its token: each says what Kubernetes wants."""
    state, kubeconfig = kube
    state.forbidden.add(("create", "services/proxy"))
    async with mcp_client(settings_for(kubeconfig)) as client:
        refused = await client.call_tool("submit_job", {"entrypoint": "python -c 'print(1)'"})
        assert refused.is_error, text_of(refused)
        assert "RBAC verb create on services/proxy" in text_of(refused), text_of(refused)
        assert "RAY_AUTH_TOKEN" not in text_of(refused)
        del state.dashboards[HEAD_SVC]  # the head pod is not Ready: the service has no endpoint
        down = await client.call_tool("list_jobs", {})
    assert down.is_error and "no endpoints available" in text_of(down) and "kuberay_status" in text_of(down)


async def test_the_gcs_only_facts_say_they_are_unknown_from_outside_the_cluster(
    kube: Any, ray_cluster: Any
) -> None:
    """The API server proxies HTTP only: what needs the GCS (gRPC) says so and how to get it, never a crash."""
    _state, kubeconfig = kube
    driver = (
        'python -c "import ray, time; ray.init(); from ray.util.placement_group import placement_group; '
        "pg = placement_group([{'CPU': 1}], strategy='STRICT_PACK', name='h28pg'); ray.get(pg.ready()); "
        "A = ray.remote(num_cpus=0)(type('A', (), {'ping': lambda self: 1})); a = A.options(name='h28a').remote(); "
        "ray.get(a.ping.remote()); print('actor' + 'up', flush=True); time.sleep(120)\""
    )
    async with mcp_client(settings_for(kubeconfig, allow_destructive=True)) as client:
        job = (await call_ok(client, "submit_job", {"entrypoint": driver})).structured_content[
            "submission_id"
        ]  # type: ignore[index]
        try:
            await wait_until(client, job, {"RUNNING"})
            with anyio.fail_after(120):
                while "actorup" not in text_of(await call_ok(client, "tail_logs", {"job": job})):
                    await anyio.sleep(0.5)
            pgs = text_of(await call_ok(client, "pg_status", {"placement_group": "h28pg"}))
            actors = await call_ok(client, "list_actors", {"name": "h28a"})
            actor = actors.structured_content["actors"][0]["actor_id"]  # type: ignore[index]
            first = await call_ok(client, "kill_actor", {"actor_id": actor})
            token = re.search(r"confirm='([^']+)'", text_of(first))
            assert token, text_of(first)
            kill = await client.call_tool("kill_actor", {"actor_id": actor, "confirm": token.group(1)})
        finally:
            await call_ok(client, "stop_job", {"job": job})
    assert "h28pg" in pgs and "unknown from outside the kubernetes cluster" in pgs.lower(), pgs
    assert "run ray-mcp in a pod of the cluster" in pgs
    assert kill.is_error and "Unknown from outside the Kubernetes cluster" in text_of(kill), text_of(kill)
    assert "No GCS found" not in pgs + text_of(kill)  # not the hint for a bare dashboard address


async def test_the_default_tools_list_has_no_kubernetes_tools_and_a_flag_adds_them() -> None:
    async with mcp_client(Settings(address="http://127.0.0.1:9", embedded="never")) as client:
        assert not {t.name for t in (await client.list_tools()).tools} & {"kuberay_status", "kuberay_logs"}
    async with mcp_client(
        Settings(address="http://127.0.0.1:9", embedded="never", kubernetes_tools=True)
    ) as client:
        assert "kuberay_status" in {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("kuberay_status", {})
        assert result.is_error and "k8s://" in text_of(result)


# -- one scenario per failure class --------------------------------------------------------------------------


async def test_a_pending_worker_pod_names_the_schedulers_message_and_its_worker_group(kube: Any) -> None:
    state, kubeconfig = kube
    worker = pod(
        f"{CLUSTER}-workergroup-worker-x1",
        CLUSTER,
        "worker",
        group="workergroup",
        status={
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_MESSAGE}
            ],
        },
    )
    state.put(worker)
    for n in range(3):  # the scheduler repeats itself: one line, with the count
        state.put(event("Pod", worker["metadata"]["name"], "FailedScheduling", GPU_MESSAGE, count=4, n=n))
    state.put(event("RayCluster", CLUSTER, "CreatedWorkerPod", "Created worker pod", warning=False))
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, data = await status_text(client)
    assert text[:300].startswith("UNSCHEDULABLE: RayCluster"), text[:300]
    assert "Insufficient nvidia.com/gpu" in text[:300] and "worker group workergroup" in text[:300]
    warnings = [e for e in data["events"] if e["reason"] == "FailedScheduling"]
    assert len(warnings) == 1 and warnings[0]["count"] == 12
    assert data["events"][0]["type"] == "Warning"  # warnings first


async def test_an_image_that_cannot_be_pulled_is_the_verdict(kube: Any) -> None:
    state, kubeconfig = kube
    state.put(
        pod(
            f"{CLUSTER}-workergroup-worker-x2",
            CLUSTER,
            "worker",
            group="workergroup",
            status={
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "ray-worker",
                        "image": "rayproject/ray:2.99.0",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": 'Back-off pulling image "rayproject/ray:2.99.0"',
                            }
                        },
                    }
                ],
            },
        )
    )
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, _ = await status_text(client)
    assert text[:300].startswith("IMAGE PULL FAILING:") and "rayproject/ray:2.99.0" in text[:300], text[:300]


async def test_a_worker_stuck_in_wait_gcs_ready_is_the_verdict(kube: Any) -> None:
    state, kubeconfig = kube
    name = f"{CLUSTER}-workergroup-worker-x3"
    state.put(
        pod(
            name,
            CLUSTER,
            "worker",
            group="workergroup",
            status={
                "phase": "Pending",
                "initContainerStatuses": [
                    {
                        "name": "wait-gcs-ready",
                        "image": "rayproject/ray:2.46.0",
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-12-01T10:02:00Z"}},
                    }
                ],
            },
        )
    )
    state.logs[(name, "wait-gcs-ready", False)] = "".join(
        f"{i} timeout waiting for GCS\n" for i in range(200)
    )
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, _ = await status_text(client)
        log = await call_ok(client, "kuberay_logs", {"pod": name, "container": "wait-gcs-ready", "lines": 5})
    assert text[:300].startswith("STUCK IN INIT:") and "wait-gcs-ready" in text[:300], text[:300]
    assert (
        log.structured_content is not None
        and log.structured_content["lines"][-1] == "199 timeout waiting for GCS"
    )
    assert len(log.structured_content["lines"]) == 5


async def test_an_oomkilled_head_says_so_and_its_previous_log_and_autoscaler_log_are_read(kube: Any) -> None:
    state, kubeconfig = kube
    oom = {
        "reason": "OOMKilled",
        "exitCode": 137,
        "startedAt": "2026-12-01T10:00:00Z",
        "finishedAt": "2026-12-01T10:05:00Z",
    }
    head = head_pod(restarts=1, last=oom)
    state.put(head)
    pod_name = head["metadata"]["name"]
    state.logs[(pod_name, "ray-head", True)] = "loading the model\nallocating 40 GiB\n"
    state.logs[(pod_name, "autoscaler", False)] = (
        "Resized to 2 CPUs.\nAdding 1 node(s) of type workergroup.\n"
    )
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, _ = await status_text(client)
        previous = text_of(await call_ok(client, "kuberay_logs", {"pod": "head", "previous": True}))
        autoscaler = text_of(
            await call_ok(client, "kuberay_logs", {"pod": "head", "container": "autoscaler"})
        )
    assert text[:300].startswith("OOMKILLED:") and "head pod" in text[:300] and "exit 137" in text[:300], (
        text[:300]
    )
    assert "allocating 40 GiB" in previous and "(previous)" in previous
    assert "Adding 1 node(s)" in autoscaler


async def test_a_rayjob_that_kuberay_calls_failed_while_ray_runs_it_names_the_disagreement(
    kube: Any, ray_cluster: Any
) -> None:
    state, kubeconfig = kube
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url)
    ) as direct:  # a real job on the real head
        submitted = await call_ok(
            direct, "submit_job", {"entrypoint": "python -c 'import time; time.sleep(60)'"}
        )
        assert submitted.structured_content is not None
        job_id = submitted.structured_content["submission_id"]
        try:
            await wait_until(direct, job_id, {"RUNNING"})
            rj = sample("ray-job.sample.yaml", "RayJob")
            rj["metadata"]["name"] = "rayjob-sample"
            rj["status"] = {
                "jobDeploymentStatus": "Failed",
                "jobStatus": "RUNNING",
                "jobId": job_id,
                "rayClusterName": CLUSTER,
                "reason": "SubmissionFailed",
                "message": "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the "
                "specified backoff limit",
            }
            state.put(validate(rj))
            async with mcp_client(settings_for(kubeconfig, f"k8s://test/{NS}/rayjob-sample")) as client:
                text, data = await status_text(client)
        finally:
            await call_ok(direct, "stop_job", {"job": job_id})
    assert text[:300].startswith("STATUS DISAGREES: RayJob default/rayjob-sample"), text[:300]
    assert "Ray says the job is RUNNING" in text[:300]
    assert any(
        f["verdict"] == "RayJob failed" and "BackoffLimitExceeded" in f["text"] for f in data["findings"]
    )
    assert "submission mode K8sJobMode" in text


async def test_a_rayservice_whose_pending_cluster_never_gets_ready_is_an_upgrade_stuck(kube: Any) -> None:
    state, kubeconfig = kube
    pending = "rayservice-sample-raycluster-new"
    state.put(raycluster(pending, state="suspended"))
    state.put(
        pod(
            f"{pending}-head-zzzzz",
            pending,
            "head",
            status={
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": GPU_MESSAGE,
                    }
                ],
            },
        )
    )
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["status"] = {
        "serviceStatus": "Running",
        "activeServiceStatus": {
            "rayClusterName": CLUSTER,
            "applicationStatuses": {"fruit_app": {"status": "RUNNING"}},
        },
        "pendingServiceStatus": {"rayClusterName": pending},
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
    state.put(validate(rs))
    state.put(head_service("rayservice-sample-head-svc"))
    state.dashboards["rayservice-sample-head-svc"] = state.dashboards[HEAD_SVC]
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayservice-sample")) as client:
        text, _ = await status_text(client)
        ray_side = text_of(await call_ok(client, "serve_status", {}))  # through rayservice-sample-head-svc
    assert text[:300].startswith("UPGRADE STUCK: RayService default/rayservice-sample"), text[:300]
    assert pending in text[:300]
    assert "Insufficient nvidia.com/gpu" in text and "Serve app fruit_app: RUNNING" in text
    assert ray_side


async def test_a_rayjob_whose_submitter_hit_its_backoff_limit_shows_the_submitter_pods_and_log(
    kube: Any,
) -> None:
    """The submitter (a Kubernetes Job named after the RayJob) started before the head's dashboard answered,
    failed every retry, and the Job hit its backoffLimit: Ray never saw a job."""
    state, kubeconfig = kube
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["status"] = {
        "jobDeploymentStatus": "Failed",
        "jobStatus": "",
        "jobId": "rayjob-sample-x7k2p",
        "rayClusterName": CLUSTER,
        "reason": "SubmissionFailed",
        "message": "Job submission has failed. Reason: BackoffLimitExceeded. Message: Job has reached the "
        "specified backoff limit",
        "failed": 3,
    }
    state.put(validate(rj))
    for n in range(3):  # KubeRay's submitter Job: backoffLimit 2, so three pods, each exited 1
        name = f"rayjob-sample-sub{n}"
        state.put(
            validate(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": NS,
                        "creationTimestamp": f"2026-12-01T10:0{n}:00Z",
                        "labels": {
                            "job-name": "rayjob-sample",
                            "batch.kubernetes.io/job-name": "rayjob-sample",
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "name": "rayjob-sample",
                                "uid": "uid-jobs-rayjob-sample",
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "ray-job-submitter", "image": "rayproject/ray:2.46.0"}],
                    },
                    "status": {
                        "phase": "Failed",
                        "containerStatuses": [
                            {
                                "name": "ray-job-submitter",
                                "image": "rayproject/ray:2.46.0",
                                "imageID": "",
                                "ready": False,
                                "restartCount": 0,
                                "state": {"terminated": {"reason": "Error", "exitCode": 1}},
                            }
                        ],
                    },
                }
            )
        )
        state.logs[(name, "ray-job-submitter", False)] = (
            "Traceback (most recent call last):\n  ...\nConnectionError: Failed to connect to Ray at address: "
            f"http://{HEAD_SVC}.default.svc.cluster.local:8265.\n"
        )
    state.put(
        event("Job", "rayjob-sample", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    )
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayjob-sample")) as client:
        text, data = await status_text(client)
        log = text_of(await call_ok(client, "kuberay_logs", {"pod": "submitter"}))
    assert text[:300].startswith("RAYJOB FAILED: RayJob default/rayjob-sample"), text[:300]
    assert "BackoffLimitExceeded" in text[:300]
    submitters = [p for p in data["pods"] if p["node_type"] == "submitter"]
    assert len(submitters) == 3 and all(p["phase"] == "Failed" for p in submitters)
    assert "Failed to connect to Ray at address" in text  # the newest failed submitter's log tail
    assert any(
        e["reason"] == "BackoffLimitExceeded" and e["object"] == "Job/rayjob-sample" for e in data["events"]
    )
    assert "Failed to connect to Ray" in log


async def test_a_rayservice_whose_serve_app_keeps_failing_names_the_app_and_its_message(kube: Any) -> None:
    """The pending cluster is ready but its Serve app fails to deploy: the upgrade never finishes, and on the
    active cluster the same failure makes KubeRay replace the cluster again and again."""
    state, kubeconfig = kube
    pending = "rayservice-sample-raycluster-v2"
    state.put(raycluster(pending))
    state.put(head_pod(pending))
    failure = "ModuleNotFoundError: No module named 'fruit_v2'"
    rs = sample("ray-service.sample.yaml", "RayService")
    rs["status"] = {
        "serviceStatus": "Running",
        "activeServiceStatus": {
            "rayClusterName": CLUSTER,
            "applicationStatuses": {"fruit_app": {"status": "RUNNING"}},
        },
        "pendingServiceStatus": {
            "rayClusterName": pending,
            "applicationStatuses": {"fruit_app": {"status": "DEPLOY_FAILED", "message": failure}},
        },
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
    state.put(validate(rs))
    state.put(
        event(
            "RayService",
            "rayservice-sample",
            "CreatedRayCluster",
            f"Created RayCluster {pending}",
            warning=False,
            count=9,
        )
    )
    state.put(head_service("rayservice-sample-head-svc"))
    state.dashboards["rayservice-sample-head-svc"] = state.dashboards[HEAD_SVC]
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayservice-sample")) as client:
        text, _ = await status_text(client)
    assert text[:300].startswith("SERVE APP FAILING: RayService default/rayservice-sample"), text[:300]
    assert "fruit_app" in text[:300] and "DEPLOY_FAILED" in text[:300] and "fruit_v2" in text[:300]
    assert "upgrade cannot finish" in text and "CreatedRayCluster x9" in text


CRASHING_HEAD = {
    "phase": "Running",
    "containerStatuses": [
        {
            "name": "ray-head",
            "image": "rayproject/ray:2.46.0",
            "imageID": "",
            "ready": False,
            "restartCount": 7,
            "state": {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container",
                }
            },
            "lastState": {"terminated": {"reason": "Error", "exitCode": 1}},
        }
    ],
}
EVICTED_WORKER = {
    "phase": "Failed",
    "reason": "Evicted",
    "message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi.",
}


@pytest.mark.parametrize(
    ("node_type", "status", "verdict", "says"),
    [
        ("head", CRASHING_HEAD, "CRASH LOOPING:", "CrashLoopBackOff"),
        ("worker", EVICTED_WORKER, "EVICTED:", "low on resource: memory"),
    ],
    ids=["crash-looping-head", "evicted-worker"],
)
async def test_other_pod_failure_classes_are_the_verdict(
    kube: Any, node_type: str, status: dict[str, Any], verdict: str, says: str
) -> None:
    state, kubeconfig = kube
    name = f"{CLUSTER}-head-abcde" if node_type == "head" else f"{CLUSTER}-workergroup-worker-x5"
    group = "headgroup" if node_type == "head" else "workergroup"
    state.put(pod(name, CLUSTER, node_type, group=group, status=status))
    async with mcp_client(settings_for(kubeconfig)) as client:
        text, _ = await status_text(client)
    assert text[:300].startswith(verdict) and says in text[:300] and name in text[:300], text[:300]


# -- diagnosis joins the layers -------------------------------------------------------------------------------


def pending_gpu_worker() -> dict[str, Any]:
    return pod(
        f"{CLUSTER}-gpu-worker-x9",
        CLUSTER,
        "worker",
        group="gpu-group",
        status={
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_MESSAGE}
            ],
        },
    )


async def test_cluster_health_joins_rays_waiting_gpu_demand_to_the_pending_pod(
    kube: Any, ray_cluster: Any
) -> None:
    state, kubeconfig = kube
    state.put(pending_gpu_worker())
    wants_gpu = "python -c 'import ray; ray.init(); ray.get(ray.remote(num_gpus=1)(lambda: 1).remote())'"
    async with mcp_client(Settings(address=ray_cluster.dashboard_url)) as direct:
        submitted = await call_ok(direct, "submit_job", {"entrypoint": wants_gpu})
        job_id = submitted.structured_content["submission_id"]  # type: ignore[index]
        try:
            async with mcp_client(settings_for(kubeconfig)) as client:
                text = ""
                for _ in range(60):  # until Ray reports the demand
                    result = await call_ok(client, "cluster_health", {})
                    text = text_of(result)
                    if "Ray's demand waits" in text:
                        break
                    await anyio.sleep(1)
        finally:
            await call_ok(direct, "stop_job", {"job": job_id})
    assert "Ray's demand waits for a node that Kubernetes cannot schedule" in text[:300], text[:600]
    assert "Insufficient nvidia.com/gpu" in text and "gpu-group" in text and "GPU" in text
    # one vocabulary: the kind the head's platform events give the same pod, with the rule's references
    finding = next(f for f in result.structured_content["findings"] if "gpu-group" in f["title"])  # type: ignore[index]
    assert finding["kind"] == "pod_unschedulable" and "ray-docs://reference/20-kuberay" in finding["refs"]


async def test_diagnose_job_of_a_rayjob_says_its_crd_and_ray_disagree(kube: Any, ray_cluster: Any) -> None:
    state, kubeconfig = kube
    async with mcp_client(Settings(address=ray_cluster.dashboard_url)) as direct:
        submitted = await call_ok(
            direct, "submit_job", {"entrypoint": "python -c 'import time; time.sleep(60)'"}
        )
        job_id = submitted.structured_content["submission_id"]  # type: ignore[index]
        try:
            await wait_until(direct, job_id, {"RUNNING"})
            rj = sample("ray-job.sample.yaml", "RayJob")
            rj["status"] = {
                "jobDeploymentStatus": "Complete",
                "jobStatus": "SUCCEEDED",
                "jobId": job_id,
                "rayClusterName": CLUSTER,
            }
            state.put(validate(rj))
            async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/rayjob-sample")) as client:
                text = text_of(await call_ok(client, "diagnose_job", {"job": job_id}))
        finally:
            await call_ok(direct, "stop_job", {"job": job_id})
    assert "The RayJob says Complete but Ray says the job is RUNNING" in text[:300], text[:600]


# -- writes ----------------------------------------------------------------------------------------------------


async def test_scaling_a_worker_group_patches_the_raycluster_and_zero_is_confirmed(kube: Any) -> None:
    state, kubeconfig = kube
    async with mcp_client(settings_for(kubeconfig, allow_destructive=True)) as client:
        done = await call_ok(client, "scale_worker_group", {"group": "workergroup", "replicas": 3})
        assert "replicas 1 -> 3" in text_of(done)
        assert state.get("rayclusters", NS, CLUSTER)["spec"]["workerGroupSpecs"][0]["replicas"] == 3  # type: ignore[index]
        first = await call_ok(client, "scale_worker_group", {"group": "workergroup", "replicas": 0})
        assert first.structured_content is not None and first.structured_content["done"] is False
        token = first.structured_content["confirm_token"]
        assert state.get("rayclusters", NS, CLUSTER)["spec"]["workerGroupSpecs"][0]["replicas"] == 3  # type: ignore[index]
        await call_ok(client, "scale_worker_group", {"group": "workergroup", "replicas": 0, "confirm": token})
        assert state.get("rayclusters", NS, CLUSTER)["spec"]["workerGroupSpecs"][0]["replicas"] == 0  # type: ignore[index]
        missing = await client.call_tool("scale_worker_group", {"group": "gpu", "replicas": 1})
        assert missing.is_error and "workergroup" in text_of(missing)
    assert ("patch", "rayclusters.ray.io") in state.used


async def test_replicas_of_an_autoscaling_group_are_refused(kube: Any) -> None:
    state, kubeconfig = kube
    state.put(raycluster(autoscaling=True))
    async with mcp_client(settings_for(kubeconfig)) as client:
        refused = await client.call_tool("scale_worker_group", {"group": "workergroup", "replicas": 2})
        assert refused.is_error and "autoscal" in text_of(refused)
        await call_ok(client, "scale_worker_group", {"group": "workergroup", "max_replicas": 8})
    assert state.get("rayclusters", NS, CLUSTER)["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 8  # type: ignore[index]


async def test_deleting_a_rayjob_with_its_own_cluster_is_confirmed_and_audited(
    kube: Any, tmp_path: Path
) -> None:
    state, kubeconfig = kube
    rj = sample("ray-job.sample.yaml", "RayJob")
    rj["status"] = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "rayClusterName": CLUSTER}
    state.put(validate(rj))
    audit = tmp_path / "audit.jsonl"
    async with mcp_client(settings_for(kubeconfig, allow_destructive=True, audit_log=audit)) as client:
        first = await call_ok(client, "delete_ray_job", {"rayjob": "rayjob-sample"})
        assert f"AND its RayCluster {CLUSTER}" in text_of(first)
        assert state.get("rayjobs", NS, "rayjob-sample") is not None
        token = first.structured_content["confirm_token"]  # type: ignore[index]
        await call_ok(client, "delete_ray_job", {"rayjob": "rayjob-sample", "confirm": token})
    assert state.get("rayjobs", NS, "rayjob-sample") is None
    assert '"rayjob": "default/rayjob-sample"' in audit.read_text()


# -- independent checks: the API server's own failures ----------------------------------------------------------


async def test_rbac_refusal_names_the_verb_to_grant(kube: Any) -> None:
    state, kubeconfig = kube
    state.forbidden.add(("list", "events"))
    async with mcp_client(settings_for(kubeconfig)) as client:
        result = await client.call_tool("kuberay_status", {})
    assert result.is_error and "list on events" in text_of(result) and "403" in text_of(result)


async def test_an_unknown_name_says_what_exists_to_look_for(kube: Any) -> None:
    _state, kubeconfig = kube
    async with mcp_client(settings_for(kubeconfig, f"k8s://{NS}/nope")) as client:
        result = await client.call_tool("cluster_status", {})
    assert result.is_error and "No RayCluster, RayJob or RayService 'nope'" in text_of(result)
    assert f"history+http://<history-server>:<port>/{NS}/<kind>/nope" in text_of(
        result
    )  # where a record may be


def test_the_role_grants_exactly_the_verbs_ray_mcp_uses() -> None:
    """Every test's requests are checked against the Roles (the kube fixture); here, nothing more is granted."""
    for doc in yaml.safe_load_all(
        (Path(__file__).parents[1] / "deploy" / "kubernetes" / "kuberay" / "role.yaml").read_text()
    ):
        validate(doc)
    reads = {
        *(("get", f"{p}.ray.io") for p in ("rayclusters", "rayjobs", "rayservices")),
        *(("list", f"{p}.ray.io") for p in ("rayclusters", "rayjobs", "rayservices", "raycronjobs")),
        ("list", "pods"),
        ("get", "pods"),
        ("get", "pods/log"),
        ("list", "events"),
        ("get", "services"),
        ("get", "services/proxy"),
        ("list", "networkpolicies.networking.k8s.io"),
    }
    writes = {
        *(("patch", f"{p}.ray.io") for p in ("rayclusters", "rayjobs", "rayservices")),
        *(("delete", f"{p}.ray.io") for p in ("rayclusters", "rayjobs", "rayservices")),
        ("create", "services/proxy"),
        ("update", "services/proxy"),
        ("delete", "services/proxy"),
    }
    assert granted() == reads | writes
