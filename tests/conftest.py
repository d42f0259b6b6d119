"""Test harness: one real Ray head for the session, and real MCP clients.

The head is started by ray-mcp's own LocalHead (``ray start --head --block``) in a private temp dir on free
ports, and stopped by killing exactly the processes it started. Set RAY_MCP_TEST_ADDRESS (its dashboard URL)
and RAY_MCP_TEST_GCS_ADDRESS to use a running cluster instead.

The suite's rules (the ``live`` mark and its guard; which skips may happen) are the plugin tests/rules.py.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests.support import mcp_client

from ray_mcp.local_head import LocalHead, start_local_head
from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings

pytest_plugins = ["tests.rules"]

BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


class Cluster:
    def __init__(self, dashboard_url: str, gcs_address: str, temp_dir: Path | None) -> None:
        self.dashboard_url = dashboard_url
        self.gcs_address = gcs_address
        self.temp_dir = temp_dir


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Cluster]:
    given = os.environ.get("RAY_MCP_TEST_ADDRESS")
    if given:
        gcs = os.environ.get("RAY_MCP_TEST_GCS_ADDRESS")
        if not gcs:  # the tests that run drivers or read the GCS need it
            pytest.fail(
                "RAY_MCP_TEST_ADDRESS is set without RAY_MCP_TEST_GCS_ADDRESS (the cluster's GCS host:port)"
            )
        yield Cluster(given, gcs, None)
        return

    with local_head(num_cpus=2) as head:
        yield Cluster(head.dashboard_url, head.gcs_address, head.temp_dir)


@contextmanager
def local_head(
    num_cpus: int = 1,
    *,
    extra_env: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    **options: Any,
) -> Iterator[LocalHead]:
    """A Ray head of our own (retried on a port clash); stops exactly the processes it started. ``options``
    go to start_local_head (``attempts``) and LocalHead (``resources``)."""
    import anyio

    started: list[LocalHead] = []
    try:
        yield anyio.run(
            partial(
                start_local_head,
                num_cpus=num_cpus,
                timeout_s=240.0,
                headers=headers
                if headers is not None
                else Settings().dashboard_request_headers(local_cluster=True),
                on_spawn=started.append,
                extra_env=extra_env,
                **options,
            )
        )
    finally:
        for head in started:
            head.stop()


# For a private head whose worker node a test kills: the GCS checks each raylet's health every second instead
# of Ray's 3 s (the timeout, and the failures in a row it takes, stay Ray's), so the node is known DEAD in about
# 5 s instead of 15. How it dies and what the diagnosis says of it are unchanged.
QUICK_NODE_DEATH_ENV = {"RAY_health_check_period_ms": "1000"}


@contextmanager
def joined(worker: LocalHead) -> Iterator[LocalHead]:
    """A worker node (a LocalHead subclass run with ``--address``) spawned for the test; stops exactly its
    processes afterwards."""
    worker.spawn()
    try:
        yield worker
    finally:
        worker.stop()


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a spawned ray-mcp: no inherited Ray or ray-mcp settings."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("RAY_MCP_", "RAY_ADDRESS", "RAY_API_SERVER"))
    }
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def prometheus(ray_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus scraping the session head (tests/prometheus.py): its URL. Only tests that ask start it."""
    from tests.prometheus import running_prometheus
    from tests.rules import lacking

    from ray_mcp.local_prometheus import prometheus_binary

    if prometheus_binary() is None:
        lacking("prometheus", "install Debian's package: apt install prometheus")
    if ray_cluster.temp_dir is None:
        given = os.environ.get("RAY_MCP_TEST_PROMETHEUS")
        if not given:
            pytest.fail("RAY_MCP_TEST_ADDRESS is set without RAY_MCP_TEST_PROMETHEUS (its Prometheus URL)")
        yield given
        return
    import httpx

    session = httpx.get(f"{ray_cluster.dashboard_url}/api/version", timeout=30).json()["session_name"]
    with running_prometheus(
        ray_cluster.temp_dir / "session_latest", tmp_path_factory.mktemp("prometheus"), session
    ) as prom:
        yield prom.url


@pytest.fixture
def server(ray_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayMCPServer]:
    # Tests upload working dirs from their tmp_path: the session's temp root is the upload root.
    roots = [tmp_path_factory.getbasetemp()]
    yield build_server(
        Settings(address=ray_cluster.dashboard_url, allow_destructive=True, upload_roots=roots)
    )


@pytest.fixture
async def client(server: RayMCPServer) -> AsyncIterator[Client]:
    async with Client(server) as c:
        yield c
    await server.app.aclose()


@pytest.fixture
async def offline_client() -> AsyncIterator[Client]:
    """A server pointed at nothing: for what needs no cluster (resources, prompts, listings)."""
    async with mcp_client(Settings(address="http://127.0.0.1:9")) as c:
        yield c


@pytest.fixture
async def metrics_client(ray_cluster: Cluster, prometheus: str) -> AsyncIterator[Client]:
    """A server that knows the session's Prometheus (get_metrics' history, the diagnosis' trends)."""
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, prometheus=prometheus)) as c:
        yield c


@pytest.fixture
def kube(ray_cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    """The loopback Kubernetes API with KubeRay's sample cluster, its head service leading to the session head
    (tests/kuberay_objects.py): the API server's state and a kubeconfig."""
    from tests.kuberay_objects import kube_cluster

    with kube_cluster(ray_cluster.dashboard_url, tmp_path) as served:
        yield served


# How long a job must stand still before the diagnosis calls it stalled, in the live tests that wait for a
# stall (a hang, a Ray Data pipeline that stopped): the rule is the same with a shorter wait, and
# each such test then waits this long instead of the product's NO_PROGRESS_S (30 s). A recording
# (RAY_MCP_RECORD=1) keeps the product's threshold, since its unit test replays it with that one.
QUICK_STALL_S = 8.0


@pytest.fixture
def quick_stall(monkeypatch: pytest.MonkeyPatch) -> float:
    """The diagnosis' no-progress threshold lowered to QUICK_STALL_S for this test (unless recording): what
    the product waits 30 s for, a test sees in a few."""
    from ray_mcp.diagnosis import hang

    if os.environ.get("RAY_MCP_RECORD") == "1":
        return hang.NO_PROGRESS_S
    monkeypatch.setattr(hang, "NO_PROGRESS_S", QUICK_STALL_S)
    return QUICK_STALL_S
