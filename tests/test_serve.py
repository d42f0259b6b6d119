"""Serve tests. The first one must run before anything starts Serve on the session cluster."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from tests.support import text_of

from ray_mcp.local_head import free_ports
from ray_mcp.models import ServeChange, ServeStatus
from ray_mcp.server.build import RayMCPServer

APPS = textwrap.dedent(
    """
    from ray import serve

    @serve.deployment
    class Hello:
        def __call__(self, request):
            return "hello"

    @serve.deployment
    class Broken:
        def __init__(self):
            raise RuntimeError("cannot load model weights from /models/v3")

        def __call__(self, request):
            return "never"

    hello = Hello.bind()
    broken = Broken.bind()
    """
)


def app_config(name: str, module_dir: Path, target: str) -> dict:
    return {
        "name": name,
        "import_path": f"mcp_serve_apps:{target}",
        "route_prefix": f"/{name}",
        "runtime_env": {"env_vars": {"PYTHONPATH": str(module_dir)}},
        # Serve's default is 1 CPU per replica; the test cluster has 2 and other tests use them.
        "deployments": [{"name": target.capitalize(), "ray_actor_options": {"num_cpus": 0}}],
    }


async def listed(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


async def test_serve_status_says_plainly_that_serve_is_not_running(client: Client) -> None:
    # the default toolsets: no Serve tools where Serve does not run; they still answer a call
    assert "serve_status" not in await listed(client) and "cluster_status" in await listed(client)
    result = await client.call_tool("serve_status", {})
    assert not result.is_error, result.content
    status = ServeStatus.model_validate(result.structured_content)
    assert not status.running, "Serve already runs on the session cluster: a test before this one started it"
    assert status.apps == [] and "Serve is not running" in text_of(result)
    delete = await client.call_tool("serve_delete_app", {"app": "nothing"})
    assert delete.is_error and "No Serve application" in text_of(delete)


async def test_serve_deploy_reports_a_healthy_app_and_a_failing_one_with_its_error(
    client: Client, server: RayMCPServer, tmp_path: Path
) -> None:
    (tmp_path / "mcp_serve_apps.py").write_text(APPS)
    port = free_ports(1)[0]
    first = {
        "http_options": {"host": "127.0.0.1", "port": port},
        "applications": [app_config("hello", tmp_path, "hello")],
    }
    assert "serve_deploy" not in await listed(client)  # Serve does not run yet (the test before says so)
    heard: list[str] = []  # what a 2025 client (Claude Code, Cursor) hears: a notification on its connection

    async def on_message(message: Any) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            heard.append(message.method)

    async with Client(server, mode="legacy", message_handler=on_message) as legacy:
        tools = legacy.server_capabilities.tools
        assert tools is not None and tools.list_changed  # the list follows the cluster, and says so
        assert "serve_deploy" not in await listed(legacy)
        async with client.listen(tools_list_changed=True) as changes:
            deployed = await client.call_tool("serve_deploy", {"config": first})
            assert not deployed.is_error, deployed.content
            with anyio.fail_after(
                60
            ):  # the deploy started Serve: the serve toolset is offered, and announced
                await changes.__anext__()
        with anyio.fail_after(30):
            while not heard:
                await anyio.sleep(0.1)
        assert heard == ["notifications/tools/list_changed"]
        assert {"serve_status", "serve_deploy", "serve_delete_app"} <= await listed(legacy)
    assert {"serve_status", "serve_deploy", "serve_delete_app"} <= await listed(client)
    # The second deploy merges: hello stays declared.
    second = {"applications": [app_config("broken", tmp_path, "broken")]}
    merged = await client.call_tool("serve_deploy", {"config": second})
    assert not merged.is_error, merged.content
    assert ServeChange.model_validate(merged.structured_content).applications == ["hello", "broken"]
    try:
        with anyio.fail_after(240):
            while True:
                result = await client.call_tool("serve_status", {})
                assert not result.is_error, result.content
                status = ServeStatus.model_validate(result.structured_content)
                apps = {a.name: a for a in status.apps}
                if apps["hello"].status == "RUNNING" and apps["broken"].status in (
                    "DEPLOY_FAILED",
                    "UNHEALTHY",
                ):
                    break
                await anyio.sleep(1)
        hello, broken = apps["hello"], apps["broken"]
        assert (
            hello.route_prefix == "/hello"
            and hello.import_path == "mcp_serve_apps:hello"
            and hello.last_deployed
        )
        deployment = hello.deployments[0]
        assert (
            deployment.status == "HEALTHY" and deployment.running_replicas == deployment.target_replicas == 1
        )
        replica = deployment.replicas[0]
        assert replica.state == "RUNNING" and replica.pid and replica.actor_name and replica.node_id
        failing = broken.deployments[0]
        assert failing.status in ("DEPLOY_FAILED", "UNHEALTHY")
        assert "cannot load model weights from /models/v3" in (failing.error or "")
        text = text_of(result)
        assert failing.status in text and "cannot load model weights from /models/v3" in text
        assert len(text) < 8192 and len(json.dumps(result.structured_content)) < 8192
        # The failing replica's own Serve log, found through its dead actor.
        assert failing.log_tail and "replica_broken_Broken_" in (failing.log_source or "")
        assert "last log lines" in text
        # cluster_health names the failing app, its deployment and the exception (diagnosis scenario 4).
        health = await client.call_tool("cluster_health", {})
        assert not health.is_error, health.content
        health_text = text_of(health)
        assert '"broken"' in health_text and "Broken" in health_text
        assert "RuntimeError" in health_text and "cannot load model weights" in health_text
        assert health.structured_content["healthy"] is False and len(health_text.encode()) <= 6000
        one = await client.call_tool("serve_status", {"app": "hello"})
        assert [a.name for a in ServeStatus.model_validate(one.structured_content).apps] == ["hello"]
        missing = await client.call_tool("serve_status", {"app": "nope"})
        assert missing.is_error and "hello" in text_of(missing)
        invalid = await client.call_tool("serve_deploy", {"config": {"applications": [{"name": "x"}]}})
        assert invalid.is_error and "import_path" in text_of(invalid)
    finally:
        for name in ("broken", "hello"):
            dry = await client.call_tool("serve_delete_app", {"app": name})
            token = re.search(r"confirm='([^']+)'", text_of(dry))
            if token:
                done = await client.call_tool("serve_delete_app", {"app": name, "confirm": token.group(1)})
                assert not done.is_error, done.content
    with anyio.fail_after(120):
        while True:
            status = ServeStatus.model_validate(
                (await client.call_tool("serve_status", {})).structured_content
            )
            if not status.apps:
                break
            await anyio.sleep(1)
    assert status.running  # deleting apps one by one never shuts Serve down
