"""serve_deploy(replace=true) deletes every app its config leaves out: destructive, so it needs
--allow-destructive and a confirmation that names the apps, and the audit line names them too. A Serve app's
confirmation is bound to its deploy: a redeploy in between voids it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.types import ElicitRequestParams, ElicitResult
from tests.support import call_ok, mcp_client, text_of
from tests.test_serve import APPS, app_config

from ray_mcp.local_head import free_ports
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

NAMES = ("keep-a", "other-b", "other-c")


def config(module_dir: Path, *names: str, prefix: str = "") -> dict[str, Any]:
    apps = []
    for name in names:
        app = app_config(name, module_dir, "hello")
        app["route_prefix"] = f"/{prefix}{name}"
        apps.append(app)
    return {"applications": apps}


async def declared(client: Client) -> set[str]:
    status = (await call_ok(client, "serve_status", {"log_lines": 0})).structured_content
    return {a["name"] for a in status.get("apps", []) if a["status"] != "DELETING"}


async def wait_declared(client: Client, expected: set[str]) -> None:
    with anyio.fail_after(180):
        while await declared(client) != expected:
            await anyio.sleep(1)


def token_in(text: str) -> str:
    found = re.search(r"confirm='([^']+)'", text)
    assert found, text
    return found.group(1)


async def test_a_replace_that_deletes_apps_needs_allow_destructive_and_a_confirmation_naming_them(
    ray_cluster: Any, tmp_path: Path
) -> None:
    (tmp_path / "mcp_serve_apps.py").write_text(APPS)
    audit = tmp_path / "audit.jsonl"
    destructive = build_server(
        Settings(address=ray_cluster.dashboard_url, allow_destructive=True, audit_log=audit)
    )
    plain = build_server(Settings(address=ray_cluster.dashboard_url))
    async with Client(destructive) as client, Client(plain) as guarded:
        first = config(tmp_path, *NAMES)
        running = (await call_ok(client, "serve_status", {})).structured_content["running"]
        if not running:  # Serve's proxy must not take port 8000
            first["http_options"] = {"host": "127.0.0.1", "port": free_ports(1)[0]}
        await call_ok(client, "serve_deploy", {"config": first})
        await wait_declared(client, set(NAMES))
        try:
            only_a = config(tmp_path, "keep-a")
            refused = await guarded.call_tool("serve_deploy", {"config": only_a, "replace": True})
            assert refused.is_error and "--allow-destructive" in text_of(refused), text_of(refused)

            asked: list[str] = []

            async def user(_context: Any, params: ElicitRequestParams) -> ElicitResult:
                asked.append(params.message)
                return ElicitResult(action="decline")

            async with Client(destructive, elicitation_callback=user) as asking:
                declined = await call_ok(asking, "serve_deploy", {"config": only_a, "replace": True})
            assert "declined" in text_of(declined) and "nothing changed" in text_of(declined)
            assert len(asked) == 1 and '"other-b"' in asked[0] and '"other-c"' in asked[0], asked
            assert ray_cluster.dashboard_url in asked[0]

            dry = await call_ok(client, "serve_deploy", {"config": only_a, "replace": True})
            text = text_of(dry)
            assert "Not done yet" in text and '"other-b"' in text and '"other-c"' in text, text
            assert ray_cluster.dashboard_url in text
            assert await declared(client) == set(
                NAMES
            )  # neither the refusal nor the dry run changed anything

            done = await call_ok(
                client, "serve_deploy", {"config": only_a, "replace": True, "confirm": token_in(text)}
            )
            assert "other-b" in text_of(done) and "Deleted" in text_of(done)
            await wait_declared(client, {"keep-a"})
            records = [json.loads(line) for line in audit.read_text().splitlines()]
            final = [r for r in records if r["tool"] == "serve_deploy" and r["outcome"] == "ok"][-1]
            assert set(final["targets"]["deletes"]) == {"other-b", "other-c"}, final
            assert final["targets"]["apps"] == ["keep-a"], final

            same = await call_ok(client, "serve_deploy", {"config": only_a, "replace": True})
            assert "Not done" not in text_of(same)  # deleting nothing is not destructive: no confirmation
        finally:
            for name in NAMES:
                dry = await client.call_tool("serve_delete_app", {"app": name})
                if not dry.is_error and "confirm=" in text_of(dry):
                    await call_ok(
                        client, "serve_delete_app", {"app": name, "confirm": token_in(text_of(dry))}
                    )
    await destructive.app.aclose()
    await plain.app.aclose()


async def test_a_token_for_a_serve_app_is_void_once_the_app_is_redeployed(
    ray_cluster: Any, tmp_path: Path
) -> None:
    (tmp_path / "mcp_serve_apps.py").write_text(APPS)
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, allow_destructive=True)) as client:
        first = config(tmp_path, "redeployed")
        if not (await call_ok(client, "serve_status", {})).structured_content["running"]:
            first["http_options"] = {"host": "127.0.0.1", "port": free_ports(1)[0]}
        await call_ok(client, "serve_deploy", {"config": first})
        await wait_declared(client, {"redeployed"})
        try:
            stale = token_in(text_of(await call_ok(client, "serve_delete_app", {"app": "redeployed"})))
            await call_ok(client, "serve_deploy", {"config": config(tmp_path, "redeployed", prefix="v2-")})
            refused = await client.call_tool("serve_delete_app", {"app": "redeployed", "confirm": stale})
            assert refused.is_error and "does not match" in text_of(refused), text_of(refused)
            assert "redeployed" in await declared(client)
        finally:
            dry = await client.call_tool("serve_delete_app", {"app": "redeployed"})
            if not dry.is_error and "confirm=" in text_of(dry):
                await call_ok(
                    client, "serve_delete_app", {"app": "redeployed", "confirm": token_in(text_of(dry))}
                )


async def test_an_app_serve_is_already_deleting_is_not_in_the_replace_to_confirm(tmp_path: Path) -> None:
    """Serve deletes apps asynchronously: one already DELETING goes away on its own, so a replace neither asks to
    delete it nor loses its confirmation when it is gone."""

    def app(name: str, status: str) -> dict[str, Any]:
        return {
            "name": name,
            "status": status,
            "last_deployed_time_s": 1.0,
            "deployed_app_config": {"name": name},
        }

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/serve/applications/":
            apps = {
                n: app(n, s)
                for n, s in (("keep-a", "RUNNING"), ("other-b", "RUNNING"), ("old-x", "DELETING"))
            }
            return httpx.Response(200, json={"applications": apps, "proxies": {}, "controller_info": {}})
        return httpx.Response(404, json={})

    settings = Settings(
        address="http://serve:8265", allow_destructive=True, audit_log=tmp_path / "audit.jsonl"
    )
    async with mcp_client(settings, http_transport=httpx.MockTransport(answer)) as client:
        dry = await call_ok(client, "serve_deploy", {"config": config(tmp_path, "keep-a"), "replace": True})
    assert '"other-b"' in text_of(dry) and "old-x" not in text_of(dry), text_of(dry)
