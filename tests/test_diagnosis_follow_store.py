"""Issue 39, pattern 7 on a private head with a small object store (the session head's is shared, and filling it
would starve the other runs): a store filled by one actor's references is the headline, with its holder, call
site and job, ahead of work that waits for CPU. Recorded (RAY_MCP_RECORD=1) and checked by tests/follow_checks.py
over the live answer and the recording."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client
from tests.causal_support import follow_scenario
from tests.conftest import local_head
from tests.support import mcp_client

from ray_mcp.local_head import LocalHead
from ray_mcp.settings import Settings

pytestmark = pytest.mark.live

STORE_BYTES = 100 * 1024**2


@pytest.fixture(scope="module")
def head() -> Iterator[LocalHead]:
    # Ray records where each reference was created only with RAY_record_ref_creation_sites=1.
    env = {"RAY_record_ref_creation_sites": "1"}
    with local_head(num_cpus=2, attempts=6, object_store_memory=STORE_BYTES, extra_env=env) as head:
        yield head


@pytest.fixture
async def mcp(head: LocalHead, tmp_path: Path) -> AsyncIterator[Client]:
    settings = Settings(
        address=head.dashboard_url, allow_destructive=True, upload_roots=[tmp_path.parent.parent]
    )
    async with mcp_client(settings) as client:
        yield client


FULL_STORE = """\
import numpy as np
import ray


@ray.remote(num_cpus=1)
class ReplayBuffer:
    def __init__(self):
        self.episodes = []

    def fill(self, n):
        for _ in range(n):
            self.episodes.append(ray.put(np.zeros(10 * 1024 * 1024, dtype=np.uint8)))
        return len(self.episodes)


@ray.remote(num_cpus=2)
class Learner:
    def ready(self):
        return True


ray.init()
buffer = ReplayBuffer.remote()
print("episodes", ray.get(buffer.fill.remote(9)), flush=True)
learner = Learner.remote()
print("waiting for the learner", flush=True)
ray.get(learner.ready.remote())
"""


async def test_a_store_one_actor_fills_leads_with_its_holder_ahead_of_work_waiting_for_cpu(
    mcp: Client, head: LocalHead, tmp_path: Path
) -> None:
    await follow_scenario(
        mcp, head.dashboard_url, tmp_path, "follow_store_holder", FULL_STORE, end=False, deadline_s=120
    )
