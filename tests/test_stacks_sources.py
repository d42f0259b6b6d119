"""Where stacks come from on a head WITHOUT RAY_DASHBOARD_ENABLE_PROFILING: local py-spy, or an error naming the fix."""

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
