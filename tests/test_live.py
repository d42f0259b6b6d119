"""Live job updates: ray://jobs/{id} reads the job and its log tail; subscribers hear when its status changes.

Over stdio and streamable HTTP, with 2025 sessions (resources/subscribe) and 2026 ones (subscriptions/listen),
against real jobs on the session cluster.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from tests.conftest import clean_env
from tests.support import TERMINAL, call, submit
from tests.test_transports import RAY_MCP, http_server

from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.server.context import App
from ray_mcp.server.live import job_watchers
from ray_mcp.settings import Settings

SECRET = "s3cr3t-live-value-93f1"
ENTRYPOINT = (
    "python -c \"import os, time; print('API_TOKEN=' + os.environ['API_TOKEN'], flush=True); time.sleep(4); "
    "print('live-done', flush=True)\""
)
RUNTIME_ENV = {"env_vars": {"API_TOKEN": SECRET}}
# The 2025 protocol's resources/subscribe is what Claude Code and Cursor speak; the SDK marks it deprecated.
pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


def uri_of(job: str) -> str:
    return f"ray://jobs/{job}"


async def read_text(client: Client, uri: str) -> str:
    contents = (await client.read_resource(uri)).contents
    return "\n".join(getattr(c, "text", "") for c in contents)


async def status_in(text: str) -> str:
    for status in ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"):
        if status in text.split("\n", 1)[0]:
            return status
    raise AssertionError(text[:500])


class Updates:
    """notifications/resources/updated as a 2025 session receives them."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if getattr(message, "method", None) == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))
            self.event.set()

    async def next(self) -> None:
        await self.event.wait()
        self.event = anyio.Event()


async def follow_legacy(client: Client, updates: Updates, job: str) -> list[str]:
    """Subscribe, then read the resource after each notification until the job has ended."""
    uri = uri_of(job)
    await client.subscribe_resource(uri)
    seen = [await status_in(await read_text(client, uri))]
    with anyio.fail_after(240):
        while seen[-1] not in TERMINAL:
            await updates.next()
            seen.append(await status_in(await read_text(client, uri)))
    assert set(updates.uris) == {uri}
    return seen


def check_final(text: str) -> None:
    assert "SUCCEEDED" in text.split("\n", 1)[0], text[:500]
    assert "live-done" in text and "Driver log" in text
    assert SECRET not in text and "API_TOKEN=***" in text  # redacted like every tool output
    assert len(text.encode()) < 16_384  # the log tail is bounded


async def test_a_stdio_session_is_notified_of_each_status_change_and_reads_the_log_tail(
    ray_cluster, tmp_path
) -> None:
    updates = Updates()
    params = StdioServerParameters(
        command=RAY_MCP, args=["--address", ray_cluster.dashboard_url], env=clean_env()
    )
    with open(tmp_path / "stderr.log", "w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", message_handler=updates
        ) as client:
            resources = client.server_capabilities.resources
            assert resources is not None and resources.subscribe
            templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
            assert "ray://jobs/{submission_id}{?cluster}" in templates  # ?cluster=: servers of several
            job = await submit(client, entrypoint=ENTRYPOINT, runtime_env=RUNTIME_ENV)
            seen = await follow_legacy(client, updates, job)
            assert seen[-1] == "SUCCEEDED" and len(updates.uris) >= 1
            check_final(await read_text(client, uri_of(job)))


@asynccontextmanager
async def http_client(ray_cluster: Any, tmp_path: Path, mode: str, **kw: Any) -> AsyncIterator[Client]:
    args = ["--transport", "streamable-http", "--address", ray_cluster.dashboard_url]
    with http_server(args, tmp_path / f"server-{mode}.log") as port:
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode, **kw) as client:  # type: ignore[arg-type]
            yield client


async def test_a_2026_http_client_listening_on_a_job_hears_its_changes(ray_cluster, tmp_path) -> None:
    async with http_client(ray_cluster, tmp_path, "auto") as client:
        job = await submit(client, entrypoint=ENTRYPOINT, runtime_env=RUNTIME_ENV)
        uri = uri_of(job)
        seen, events = [await status_in(await read_text(client, uri))], []
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            assert subscription.honored.resource_subscriptions == [uri]
            with anyio.fail_after(240):
                async for event in subscription:
                    events.append(event)
                    seen.append(await status_in(await read_text(client, uri)))
                    if seen[-1] in TERMINAL:
                        break
        assert seen[-1] == "SUCCEEDED" and all(getattr(e, "uri", uri) == uri for e in events)
        check_final(await read_text(client, uri))


async def test_a_2025_http_session_is_notified_too(ray_cluster, tmp_path) -> None:
    updates = Updates()
    async with http_client(ray_cluster, tmp_path, "legacy", message_handler=updates) as client:
        job = await submit(client, entrypoint=ENTRYPOINT, runtime_env=RUNTIME_ENV)
        assert (await follow_legacy(client, updates, job))[-1] == "SUCCEEDED"


async def test_subscribers_share_one_poller_that_stops_when_they_unsubscribe_or_leave(
    server: RayMCPServer, ray_cluster
) -> None:
    watchers = server.job_watchers
    async with Client(server, mode="legacy") as setup:
        job = await submit(setup, entrypoint="sleep 120")
        uri = uri_of(job)
        try:
            async with Client(server, mode="legacy") as a, Client(server, mode="legacy") as b:
                async with anyio.create_task_group() as tg:  # parallel subscribes from two sessions
                    for client in (a, b) * 8:
                        tg.start_soon(client.subscribe_resource, uri)
                assert watchers.watched == {uri: 2}
                await a.unsubscribe_resource(uri)
                assert watchers.watched == {uri: 1}
            # b's session ended without unsubscribing: its subscription, and so the poller, are gone.
            with anyio.fail_after(30):
                while watchers.watched:
                    await anyio.sleep(0.05)
            async with Client(server) as modern:  # 2026: watched while the listen stream is open
                async with modern.listen(resource_subscriptions=[uri]):
                    assert watchers.watched == {uri: 1}
                with anyio.fail_after(30):
                    while watchers.watched:
                        await anyio.sleep(0.05)
        finally:
            await call(setup, "stop_job", job=job)
    await server.app.aclose()


async def test_a_watch_lasts_as_long_as_the_listen_stream_or_the_2025_connection_without_a_cluster() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"))  # nothing listens there: status unknown
    watchers, uri = server.job_watchers, "ray://jobs/raysubmit_offline"
    try:
        async with Client(server) as modern:
            with pytest.raises(MCPError) as raised:  # refused before the stream opens
                async with modern.listen(resource_subscriptions=[uri, "ray-docs://reference/index"]):
                    pass
            assert (
                raised.value.error.code == -32602
                and "ray://jobs/{submission_id}" in raised.value.error.message
            )
            assert watchers.watched == {}
            async with modern.listen(resource_subscriptions=[uri]) as subscription:
                assert subscription.honored.resource_subscriptions == [uri]
                assert watchers.watched == {uri: 1}
            with anyio.fail_after(30):
                while watchers.watched:
                    await anyio.sleep(0.05)
        async with Client(server, mode="legacy") as legacy:
            await legacy.subscribe_resource(uri)
            await legacy.subscribe_resource(uri)  # the same connection: one subscriber
            assert watchers.watched == {uri: 1}
        with anyio.fail_after(30):  # the connection closed without unsubscribing
            while watchers.watched:
                await anyio.sleep(0.05)
    finally:
        await server.app.aclose()


async def test_only_job_uris_can_be_subscribed_and_the_number_of_jobs_watched_is_bounded(
    server: RayMCPServer, ray_cluster
) -> None:
    async with Client(server, mode="legacy") as client:
        for uri in ("ray-docs://reference/index", "ray://jobs/", "ray://jobs/a b", "file:///etc/passwd"):
            with pytest.raises(MCPError) as raised:
                await client.subscribe_resource(uri)
            assert (
                raised.value.error.code == -32602
                and "ray://jobs/{submission_id}" in raised.value.error.message
            )
        with pytest.raises(MCPError) as raised:
            await client.read_resource("ray://jobs/raysubmit_nosuchjob")
        assert "raysubmit_nosuchjob" in raised.value.error.message
        with pytest.raises(MCPError) as raised:  # a job the cluster does not have holds no watch
            await client.subscribe_resource("ray://jobs/raysubmit_nosuchjob")
        assert "No job 'raysubmit_nosuchjob'" in raised.value.error.message
        assert server.job_watchers.watched == {}
    await server.app.aclose()
    app = App(Settings(address="http://127.0.0.1:9"))  # no cluster: existence unknown, so the bounds decide
    published: list[str] = []

    async def publish(uri: str) -> None:
        published.append(uri)

    watchers = job_watchers(app, publish, max_watched=3, per_session=2, poll_interval_s=0.05)
    await watchers.subscribe("ray://jobs/one", None, owner=1)
    await watchers.subscribe("ray://jobs/two", None, owner=1)
    with pytest.raises(MCPError, match="already watches 2 jobs, its share of the 3"):
        await watchers.subscribe("ray://jobs/three", None, owner=1)
    await watchers.subscribe("ray://jobs/three", None, owner=2)  # another client still gets its share
    with pytest.raises(MCPError, match="Already watching 3 jobs"):
        await watchers.subscribe("ray://jobs/four", None, owner=2)
    await watchers.unsubscribe("ray://jobs/one", None, owner=1)
    await watchers.subscribe("ray://jobs/four", None, owner=1)
    await watchers.aclose()
    await app.aclose()
    assert watchers.watched == {}
