"""Shared parts of the causal-chain tests: a job's evidence recorded as JSON (tests/recorded) and replayed."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ray_mcp.answers import RayAPI
from ray_mcp.diagnosis import evidence as causal_gather
from ray_mcp.diagnosis import job_evidence
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.shaping.jobs import job_info as shape_job_info

RECORDED = Path(__file__).parent / "recorded"


async def gather(dashboard_url: str, job: str) -> GraphInputs:
    """The evidence diagnose_job reasons over, gathered by the same one gather (for recording and replay)."""
    api = RayAPI(dashboard_url, timeout_s=30)
    try:
        return await job_evidence.gather_job(api, job)
    finally:
        await api.aclose()


async def record(dashboard_url: str, job: str, name: str) -> None:
    """With RAY_MCP_RECORD=1, save a scenario's evidence to tests/recorded/<name>.json for the replay tests."""
    if os.environ.get("RAY_MCP_RECORD") != "1":
        return
    ev = await gather(dashboard_url, job)
    RECORDED.mkdir(exist_ok=True)
    (RECORDED / f"{name}.json").write_text(ev.to_json())


async def gather_cluster(dashboard_url: str) -> GraphInputs:
    """The evidence cluster_health reasons over."""
    api = RayAPI(dashboard_url, timeout_s=30)
    try:
        return await causal_gather.gather_cluster(api)
    finally:
        await api.aclose()


async def record_cluster(dashboard_url: str, name: str) -> None:
    """With RAY_MCP_RECORD=1, save cluster_health's evidence to tests/recorded/<name>.json."""
    if os.environ.get("RAY_MCP_RECORD") != "1":
        return
    (RECORDED / f"{name}.json").write_text((await gather_cluster(dashboard_url)).to_json())


def replay(name: str) -> GraphInputs:
    return GraphInputs.from_json((RECORDED / f"{name}.json").read_text())


def job_info(ev: GraphInputs) -> Any:
    return shape_job_info(ev.job or {}, ev.now_ms / 1000 or time.time())


FOLLOW_BUDGET = 6_000  # the bytes of diagnose_job's answer in issue 39's scenarios


async def follow_scenario(
    client: Any,
    dashboard_url: str,
    tmp_path: Path,
    name: str,
    source: str,
    *,
    files: dict[str, str] | None = None,
    runtime_env: dict[str, Any] | None = None,
    end: bool = True,
    deadline_s: float = 20,
) -> None:
    """Run ``source`` as a job from ``tmp_path``; once it ended (or, for a hang, once it runs and its answer
    passes, polled under ``deadline_s``) record its evidence and check the answer with tests/follow_checks.py's
    FOLLOW[name]. A job left running is stopped."""
    import textwrap

    import anyio
    from tests.follow_checks import FOLLOW
    from tests.support import TERMINAL, call_ok, submit, text_of, wait_until

    async def answer() -> str:
        text = text_of(await call_ok(client, "diagnose_job", {"job": sid}))
        assert len(text.encode()) <= FOLLOW_BUDGET, len(text.encode())
        return text

    (tmp_path / "main.py").write_text(textwrap.dedent(source))
    for rel, content in (files or {}).items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(content)
    env = {"working_dir": str(tmp_path), **(runtime_env or {})}
    sid = await submit(client, entrypoint="python main.py", runtime_env=env)
    try:
        if end:
            await wait_until(client, sid, TERMINAL, 240)
        else:
            await wait_until(client, sid, {"RUNNING"}, 120)
        with anyio.move_on_after(deadline_s):
            while True:
                try:
                    FOLLOW[name](await answer())
                    break
                except AssertionError:
                    await anyio.sleep(2)
        await record(dashboard_url, sid, name)
        FOLLOW[name](await answer())
    finally:
        if not end:
            await client.call_tool("stop_job", {"job": sid})
