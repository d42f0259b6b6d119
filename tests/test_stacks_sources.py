"""Where stacks and memory profiles come from on a head WITHOUT RAY_DASHBOARD_ENABLE_PROFILING: local py-spy and
local memray, or an error naming the fix."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests.conftest import local_head
from tests.support import call_ok, mcp_client, submit, text_of
from tests.test_stacks import job_dir, poll

from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

NAPPER_JOB = """\
import time

import ray

ray.init()


@ray.remote(num_cpus=0)
class Napper:
    def nap(self):
        while True:
            time.sleep(0.5)


napper = Napper.remote()
ray.get(napper.nap.remote())
"""


@pytest.fixture(scope="module")
def plain_head() -> Iterator[str]:
    """The dashboard URL of a head without profiling (RAY_MCP_TEST_PLAIN_ADDRESS: one already running)."""
    given = os.environ.get("RAY_MCP_TEST_PLAIN_ADDRESS")
    if given:
        yield given
        return
    with local_head(num_cpus=1, extra_env={"RAY_DASHBOARD_ENABLE_PROFILING": "0"}) as head:
        yield head.dashboard_url


async def connect(url: str, **settings: Any) -> AsyncIterator[Client]:
    async with mcp_client(Settings(address=url, upload_roots=[Path(tempfile.gettempdir())], **settings)) as c:
        yield c


@pytest.fixture
async def plain_client(plain_head: str) -> AsyncIterator[Client]:
    async for c in connect(plain_head):
        yield c


async def test_without_profiling_stacks_come_from_local_py_spy_and_the_errors_name_the_fix(
    plain_client: Client, plain_head: str, tmp_path: Path
) -> None:
    sid = await submit(plain_client, **job_dir(tmp_path, "napper.py", NAPPER_JOB))
    try:

        async def napping() -> Any:
            result = await plain_client.call_tool("list_actors", {"class_name": "Napper", "state": "ALIVE"})
            actors = [] if result.is_error else result.structured_content["actors"]
            return actors[0]["actor_id"] if actors else None

        actor_id = await poll(napping, 240, "the Napper actor")

        async def stack() -> Any:
            result = await plain_client.call_tool("stack_traces", {"actor_id": actor_id})
            groups = [] if result.is_error else result.structured_content["groups"]
            return result if groups and groups[0]["where"] else None

        result = await poll(stack, 120, "the Napper's stack")
        data = result.structured_content
        assert data["source"] == "py-spy", data  # the dashboard route is off: py-spy on this host
        assert data["groups"][0]["where"] == "napper.py:12 in Napper.nap", data

        async for dashboard_only in connect(plain_head, stack_source="dashboard"):
            for tool, args in (
                ("stack_traces", {"actor_id": actor_id}),
                ("cpu_profile", {"actor_id": actor_id}),
            ):
                failed = await dashboard_only.call_tool(tool, args)
                assert failed.is_error and "RAY_DASHBOARD_ENABLE_PROFILING=1" in text_of(failed), text_of(
                    failed
                )

        async for no_py_spy in connect(plain_head, py_spy=str(tmp_path / "missing" / "py-spy")):
            failed = await no_py_spy.call_tool("stack_traces", {"job": sid})
            text = text_of(failed)
            assert failed.is_error and "py-spy is not installed" in text and "pip install py-spy" in text, (
                text
            )
            assert "RAY_DASHBOARD_ENABLE_PROFILING=1" in text
    finally:
        await call_ok(plain_client, "stop_job", {"job": sid})


@pytest.fixture
async def memory_client(plain_head: str) -> AsyncIterator[Client]:
    """A client that lists the profiling toolset (memory_profile) for the head without profiling."""
    async for c in connect(plain_head, toolsets="default,profiling"):
        yield c


async def test_without_profiling_memory_profile_runs_memray_on_this_host_and_names_the_leaking_line(
    memory_client: Client, plain_head: str, tmp_path: Path
) -> None:
    from tests.test_profiles import HOARD_JOB, alive_actor
    from tests.test_stacks import line_of

    grow_line = line_of(HOARD_JOB, "self.kept.append(bytearray")
    sid = await submit(memory_client, **job_dir(tmp_path, "hoard.py", HOARD_JOB))
    try:
        actor_id = await alive_actor(memory_client, "Hoarder")

        async def profiled() -> Any:
            args = {"actor_id": actor_id, "duration_s": 3, "leaks_only": True}
            result = await memory_client.call_tool("memory_profile", args)
            assert not result.is_error or "not running" in text_of(result).lower(), text_of(result)
            return None if result.is_error or not result.structured_content["total_bytes"] else result

        result = await poll(profiled, 180, "a leaks-only memory profile with memray on this host")
        data = result.structured_content
        assert data["source"] == "memray" and data["mode"] == "leaks", data  # the routes are off
        top = data["leak_candidates"][0]
        assert top["where"] == f"hoard.py:{grow_line} in grow", data["leak_candidates"]
        assert top["held_bytes"] >= 256 * 1024 * 10, top  # 3 s at 50 allocations a second, each 256 KiB
        assert text_of(result).startswith(data["verdict"]), text_of(result)

        async for dashboard_only in connect(
            plain_head, toolsets="default,profiling", stack_source="dashboard"
        ):
            failed = await dashboard_only.call_tool("memory_profile", {"actor_id": actor_id})
            assert failed.is_error and "RAY_DASHBOARD_ENABLE_PROFILING=1" in text_of(failed), text_of(failed)
    finally:
        await call_ok(memory_client, "stop_job", {"job": sid})
