"""No secret the server knows of leaves it: not in results, notifications, errors or its own logs.

A real job whose env_vars hold secrets prints them (and control characters) from its driver and an actor;
every tool that can show them is called. A stand-in dashboard that echoes the request headers in its error
bodies (what some proxies do) stands for the one fault a real cluster cannot produce.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import uuid
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from tests.support import call_ok, text_of

from ray_mcp.errors import RayRequestFailed
from ray_mcp.guard.redaction import SECRETS
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from ray_mcp.tools import READ_ONLY

RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def secrets_for_test() -> dict[str, str]:
    tag = uuid.uuid4().hex[:10]
    return {
        "HF_TOKEN": f"hfv{tag}tokenvalue",  # no vendor shape: only the registry can know it
        "DB_PASSWORD": f"pw{tag}",
        "PIN": f"{tag[:2]}z",  # three characters
    }


def assert_clean(where: str, text: str, secrets: dict[str, str]) -> None:
    for name, value in secrets.items():
        if len(value) < 4:
            assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", text), (
                where,
                name,
                text,
            )
        else:
            assert value not in text, (where, name, text)
    assert not RAW_CONTROL.search(text), (where, RAW_CONTROL.search(text), text)


def strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*strings(k), *strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def everything(result: Any) -> str:
    """The text blocks and every string (keys too) of the structured content, raw."""
    texts = [getattr(c, "text", "") for c in result.content]
    return "\n".join(texts + strings(result.structured_content or {}))


DRIVER = r"""
import os, sys, time, ray
ray.init()
hf, pw, pin = os.environ["HF_TOKEN"], os.environ["DB_PASSWORD"], os.environ["PIN"]

@ray.remote(num_cpus=0)
class Printer:
    def show(self):
        print("actor sees", hf, "and pin", pin, "\x1b[31mred\x1b[0m", flush=True)
        return os.getpid()

printer = Printer.options(name="leak-printer-" + os.environ["TAG"]).remote()
ray.get(printer.show.remote())
print("hf token", hf, "; password", pw, "; pin", pin, "(" + pin + ")", flush=True)
print("bell\x07 back\x08 cr\r esc\x1b[2J bidi\u202eevil\u202c zw\u200bx", flush=True)
for i in range(int(os.environ["LOOPS"])):
    print(f"tick {i} pin={pin} hf={hf}", flush=True)
    time.sleep(0.5)
raise RuntimeError(f"could not log in with {pw} ({pin}) \x1b[1mbold\x07")
"""


async def test_a_jobs_secrets_never_leave_through_any_tool_or_notification(ray_cluster, tmp_path) -> None:
    from ray.job_submission import JobSubmissionClient

    secrets = secrets_for_test()
    tag = uuid.uuid4().hex[:8]
    (tmp_path / "leaky.py").write_text(DRIVER)
    # Submitted outside ray-mcp: the server learns the secrets only by reading the cluster.
    sdk = JobSubmissionClient(ray_cluster.dashboard_url)
    sid = sdk.submit_job(
        entrypoint=f"{sys.executable} leaky.py",
        runtime_env={"working_dir": str(tmp_path), "env_vars": {**secrets, "TAG": tag, "LOOPS": "30"}},
        metadata={"note": "meta\x1b]0;title\x07 \u202eevil"},
    )
    server = build_server(Settings(address=ray_cluster.dashboard_url))
    notifications: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notifications.append(message or "")

    async with Client(server) as client:
        # The first call of all is a tail of the job's log, while it prints its secrets.
        with anyio.fail_after(180):
            while True:
                result = await client.call_tool("tail_logs", {"job": sid, "lines": 50})
                assert_clean("tail_logs (first call)", everything(result), secrets)
                if not result.is_error and "tick" in text_of(result):
                    break
                await anyio.sleep(1)
        assert "***" in text_of(result) and "\\x1b" in text_of(result)

        followed = await call_ok(
            client, "tail_logs", {"job": sid, "follow_s": 3}, progress_callback=on_progress
        )
        assert_clean("tail_logs follow", everything(followed), secrets)
        grep = await call_ok(client, "tail_logs", {"job": sid, "grep": "pin|password|hf"})
        assert_clean("tail_logs grep", everything(grep), secrets)
        assert "tick" in text_of(grep)

        actors = await call_ok(client, "list_actors", {"name": f"leak-printer-{tag}"})
        actor_id = actors.structured_content["actors"][0]["actor_id"]
        actor_log = await call_ok(client, "tail_logs", {"actor_id": actor_id})
        assert "actor sees ***" in text_of(actor_log)
        for result in (actors, actor_log):
            assert_clean("actor", everything(result), secrets)

        waited = await call_ok(
            client, "wait_for_job", {"job": sid, "timeout_s": 120}, progress_callback=on_progress
        )
        assert waited.structured_content["job"]["status"] == "FAILED"
        outputs = {
            "wait_for_job": waited,
            "get_job": await call_ok(client, "get_job", {"job": sid}),
            "list_jobs": await call_ok(client, "list_jobs", {}),
            "diagnose_job": await call_ok(client, "diagnose_job", {"job": sid}),
            "cluster_health": await call_ok(client, "cluster_health", {}),
            "tail_logs": await call_ok(client, "tail_logs", {"job": sid, "lines": 200}),
        }
        for name, result in outputs.items():
            assert_clean(name, everything(result), secrets)
        assert "could not log in with *** (***)" in text_of(outputs["diagnose_job"])
        job = outputs["get_job"].structured_content
        assert set(job["runtime_env"]["env_vars"].values()) == {"***"}
        assert "\\u202e" in job["metadata"]["note"] and "\\x1b" in job["metadata"]["note"]
    assert len(notifications) >= 2
    for message in notifications:
        assert_clean("progress notification", message, secrets)
    await server.app.aclose()


async def test_a_huge_job_keeps_its_structured_content_bounded(client: Client) -> None:
    from tests.support import submit

    metadata = {f"key{i}": f"value number {i}" for i in range(3000)}
    sid = await submit(client, entrypoint="echo hi # " + "x" * 100_000, metadata=metadata)
    for name, args in (("get_job", {"job": sid}), ("list_jobs", {"limit": 5})):
        result = await call_ok(client, name, args)
        size = len(json.dumps(result.structured_content).encode())
        assert size <= 20_000, (name, size)
        if name == "get_job":
            assert "[cut: " in json.dumps(result.structured_content, ensure_ascii=False)
            assert "Structured content cut" in text_of(result)


class EchoingDashboard(httpx.AsyncBaseTransport):
    """A dashboard (or the proxy in front of it) that fails and echoes the request's headers in its body."""

    def __init__(self, status: int) -> None:
        self.status = status

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        echoed = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
        return httpx.Response(self.status, text=f"<html>upstream error\n{echoed}\n</html>", request=request)


@pytest.mark.parametrize("status", [401, 403, 500, 502])
async def test_credentials_echoed_by_a_failing_dashboard_never_reach_results_or_logs(
    status: int, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    tag = uuid.uuid4().hex[:10]
    credentials = {"ray token": f"rt{tag}", "proxy header": f"px{tag}", "bearer": f"mcp{tag}secret"}
    settings = Settings(
        address="http://127.0.0.1:9",  # every dashboard request goes to the stand-in; the Jobs API is refused
        ray_auth_token=credentials["ray token"],
        dashboard_headers={"X-Proxy-Auth": credentials["proxy header"]},
        auth_token=credentials["bearer"],
        request_timeout_s=5,
    )
    server = build_server(settings, http_transport=EchoingDashboard(status))
    calls = [
        ("cluster_status", {}),
        ("list_actors", {}),
        ("serve_status", {}),
        ("pg_status", {}),
        ("list_nodes", {}),
        ("list_tasks", {}),
        ("summarize_tasks", {}),
        ("cluster_health", {}),
        ("tail_logs", {"actor_id": "ab" * 16}),
    ]
    with caplog.at_level(logging.DEBUG):
        async with Client(server) as client:
            for name, args in calls:
                result = await client.call_tool(name, args)
                text = everything(result)
                for what, value in credentials.items():
                    assert value not in text, (name, what, text)
                if result.is_error and status in (401, 403):
                    assert "refused the token" in text and "upstream error" not in text, text
        await server.app.aclose()
    logged = caplog.text + "".join(capfd.readouterr())
    assert "Tool 'cluster_status' failed" in logged  # the SDK's own line, redacted
    for what, value in credentials.items():
        assert value not in logged, (what, logged[-2000:])


async def test_any_tools_progress_notifications_and_errors_are_redacted_at_the_choke_point() -> None:
    value = f"argsecret{uuid.uuid4().hex[:8]}"
    server = build_server(Settings(address="http://127.0.0.1:9"))

    async def probe(ctx: Context, runtime_env: dict[str, Any], fail: bool) -> CallToolResult:
        """Reports progress and fails with what its job printed."""
        await ctx.report_progress(1, 2, f"printed {value} \x1b[2J\u202e")
        if fail:
            raise RayRequestFailed(f"upstream said {value}\x07")
        text = TextContent(type="text", text=f"ran --x {value} as name\x1b")
        return CallToolResult(
            content=[text], structured_content={"entrypoint": f"run --x {value}", "n\x1b": 1}
        )

    server.add_tool(probe, annotations=READ_ONLY)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    secrets = {"argument": value}
    SECRETS.hold("job:test:probe", [value])  # a job's env_vars value, as the cluster reported it
    async with Client(server) as client:
        env = {"env_vars": {"API_SECRET": value}}
        failed = await client.call_tool(
            "probe", {"runtime_env": env, "fail": True}, progress_callback=on_progress
        )
        assert failed.is_error and "upstream said ***\\x07" in text_of(failed)
        ok = await call_ok(
            client, "probe", {"runtime_env": env, "fail": False}, progress_callback=on_progress
        )
        assert text_of(ok) == "ran --x *** as name\\x1b"
        assert ok.structured_content == {"entrypoint": "run --x ***", "n\\x1b": 1}
        for result in (failed, ok):
            assert_clean("probe", everything(result), secrets)
    assert messages == ["printed *** \\x1b[2J\\u202e"] * 2
    await server.app.aclose()
