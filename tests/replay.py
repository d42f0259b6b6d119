"""A real cluster's answers, recorded once and replayed through ``httpx.MockTransport``.

``python -m tests.replay DASHBOARD_URL GCS_ADDRESS`` runs the scenarios below against a real cluster and
saves, for each, every dashboard request the tool made and the answer it got (tests/recorded/<name>.json).
``replayed_server(name)`` builds a server whose dashboard is that recording: the diagnosis runs on real
evidence in milliseconds, without a cluster.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
from mcp import Client
from tests.support import call_ok, mcp_client, run_to_end

from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.settings import Settings

RECORDED = Path(__file__).parent / "recorded"
PY = sys.executable


def request_key(request: httpx.Request) -> str:
    """What identifies a request: method, path and query, without the timeout (it follows the settings)."""
    params = sorted((k, v) for k, v in request.url.params.multi_items() if k != "timeout")
    return f"{request.method} {request.url.path}?{urlencode(params)}"


class Body(httpx.AsyncByteStream):
    """A recorded body served as a stream (an ``httpx.ByteStream`` would be read at once, and the adapter
    streams log bodies with ``aiter_raw``)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data


class Recorder(httpx.AsyncBaseTransport):
    """Passes every request to the real dashboard and keeps the request and its answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()  # decoded: the replay serves it as is
        content_type = response.headers.get("content-type", "")
        self.exchanges.append(
            {
                "request": request_key(request),
                "status": response.status_code,
                "content_type": content_type,
                "body": body.decode("utf-8", errors="replace"),
            }
        )
        return httpx.Response(response.status_code, headers={"content-type": content_type}, stream=Body(body))

    async def aclose(self) -> None:
        await self.inner.aclose()


class Replay(httpx.MockTransport):
    """Answers each request with its recorded answer; a request that was not recorded is kept in ``missed``
    (and answered 599, so that the test fails on it, not on a guess)."""

    def __init__(self, exchanges: list[dict[str, Any]]) -> None:
        self.answers = {e["request"]: e for e in exchanges}
        self.missed: list[str] = []
        super().__init__(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        recorded = self.answers.get(request_key(request))
        if recorded is None:
            self.missed.append(request_key(request))
            return httpx.Response(599, text="not recorded")
        headers = {"content-type": recorded["content_type"]}
        return httpx.Response(recorded["status"], headers=headers, stream=Body(recorded["body"].encode()))


def load(name: str) -> dict[str, Any]:
    return dict(json.loads((RECORDED / f"{name}.json").read_text()))


def replayed_server(name: str) -> tuple[RayMCPServer, Replay, dict[str, Any]]:
    """A server whose cluster is the recording ``name`` (no GCS: the recording was made without one)."""
    recording = load(name)
    replay = Replay(recording["exchanges"])
    # the recorded cluster's files are not on this machine: every log is read through the (replayed) dashboard
    # every toolset named: tools/list then reads nothing from the cluster (the recording holds the tool's reads)
    settings = Settings(
        address=recording["dashboard_url"], request_timeout_s=5, local_logs=False, toolsets="all"
    )
    return build_server(settings, http_transport=replay, gcs_lookup=None), replay, recording


# -- recording, against a real cluster ----------------------------------------------------------------------

SCENARIOS: dict[str, str] = {
    # The driver raises: the root cause is its own exception.
    "driver_exception": """
        import ray
        ray.init()
        config = {"lr": 0.1}
        print("training with", config)
        raise ValueError(f"learning rate {config['lr']} is too high for this model")
    """,
    # An actor's __init__ raises; the driver dies of ActorDiedError: the root cause is the actor's exception.
    "actor_init_fails": """
        import ray
        ray.init()

        @ray.remote(num_cpus=0)
        class Trainer:
            def __init__(self):
                raise RuntimeError("CUDA out of memory while building the model")

            def step(self):
                return 1

        trainer = Trainer.remote()
        ray.get(trainer.step.remote())
    """,
    # Tasks fail with an application error; the driver re-raises it: the root cause is the tasks' error.
    "task_errors": """
        import ray
        ray.init()

        @ray.remote(num_cpus=0, max_retries=0)
        def shard(i):
            if i % 2:
                raise KeyError(f"shard {i} has no column 'label'")
            return i

        ray.get([shard.remote(i) for i in range(6)])
    """,
}


async def record(dashboard_url: str, gcs_address: str, work_dir: Path) -> None:
    RECORDED.mkdir(exist_ok=True)
    plain = build_server(Settings(address=gcs_address))
    async with Client(plain) as client:
        jobs = {}
        for name, script in SCENARIOS.items():
            path = work_dir / f"{name}.py"
            path.write_text(textwrap.dedent(script))
            sid, info = await run_to_end(client, entrypoint=f"{PY} {path}")
            assert info["status"] == "FAILED", info
            jobs[name] = sid
    await plain.app.aclose()
    scenarios: list[tuple[str, str, dict[str, Any]]] = [
        (name, "diagnose_job", {"job": sid}) for name, sid in jobs.items()
    ]
    scenarios.append(("cluster_health", "cluster_health", {}))
    for name, tool, arguments in scenarios:
        recorder = Recorder()
        async with mcp_client(  # logs through the dashboard, so that the recording holds them
            Settings(address=dashboard_url, local_logs=False), http_transport=recorder, gcs_lookup=None
        ) as client:
            await call_ok(client, tool, arguments)
        recording = {
            "tool": tool,
            "arguments": arguments,
            "dashboard_url": dashboard_url,
            "exchanges": recorder.exchanges,
        }
        (RECORDED / f"{name}.json").write_text(json.dumps(recording, indent=1) + "\n")
        print(f"recorded {name}: {len(recorder.exchanges)} requests")


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(record, sys.argv[1], sys.argv[2], Path(tmp))
