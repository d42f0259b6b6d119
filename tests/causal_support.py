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
