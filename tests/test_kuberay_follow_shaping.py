"""Issue 39, pattern 8, over the pure shaping (the live scenarios are in test_kuberay_follow.py): a container
Kubernetes never created is not crash-looping, and a failing Serve app quotes its deployment's own message."""

from __future__ import annotations

from ray_mcp.shaping.kuberay import cluster_findings, pod_state, serve_app_findings


def test_a_container_never_created_is_cannot_start_and_a_restarted_one_still_crash_loops() -> None:
    def worker(reason: str, restarts: int) -> dict:
        waiting = {"reason": reason, "message": 'secret "wandb-key" not found'}
        return {
            "metadata": {"name": "w-1", "labels": {"ray.io/node-type": "worker", "ray.io/group": "g"}},
            "spec": {"containers": [{"name": "ray-worker"}]},
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {"name": "ray-worker", "restartCount": restarts, "state": {"waiting": waiting}}
                ],
            },
        }

    [never] = cluster_findings(None, [pod_state(worker("CreateContainerConfigError", 0))])
    assert never.verdict == "cannot start" and "wandb-key" in never.text and "never created" in never.text
    [looping] = cluster_findings(None, [pod_state(worker("CrashLoopBackOff", 4))])
    assert looping.verdict == "crash looping"


def test_a_failing_serve_app_quotes_its_deployments_exception_line() -> None:
    message = "The deployment failed to start 3 times in a row.\nTraceback (most recent call last):\nKeyError: 'vocab'"
    rs = {
        "status": {
            "pendingServiceStatus": {
                "rayClusterName": "new",
                "applicationStatuses": {
                    "app": {
                        "status": "DEPLOY_FAILED",
                        "message": "the deployments ['Tok'] are UNHEALTHY",
                        "serveDeploymentStatuses": {"Tok": {"status": "UNHEALTHY", "message": message}},
                    }
                },
            }
        }
    }
    [found] = serve_app_findings(rs)
    assert (
        "Tok" in found.text and "KeyError: 'vocab'" in found.text and "failed to start 3 times" in found.text
    )
