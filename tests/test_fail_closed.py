"""Fail closed: an audit log that cannot be written stops the server, or the call, before anything runs."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from tests.conftest import clean_env
from tests.rules import lacking
from tests.support import call_ok, mcp_client, text_of
from tests.test_transports import RAY_MCP

from ray_mcp.guard.audit import AuditLogUnwritable
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings


@pytest.mark.live
@pytest.mark.parametrize("where", ["missing-dir/audit.jsonl", "a-directory"])
def test_an_audit_log_that_cannot_be_written_stops_the_server_at_startup(tmp_path: Path, where: str) -> None:
    (tmp_path / "a-directory").mkdir()
    path = tmp_path / where
    out = subprocess.run(
        [RAY_MCP, "--audit-log", str(path), "--address", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "--audit-log" in lines[0], out.stderr
    with pytest.raises(AuditLogUnwritable):
        build_server(Settings(address="http://127.0.0.1:9", audit_log=path))


async def test_when_an_audit_write_fails_the_job_is_refused_and_never_submitted(
    ray_cluster: Any, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    server = build_server(Settings(address=ray_cluster.dashboard_url, audit_log=audit))
    probe = f"fail-closed-audit-probe-{uuid.uuid4().hex[:8]}"
    entrypoint = f"echo {probe}"
    async with Client(server) as client:
        before = (await call_ok(client, "list_jobs", {"limit": 1})).structured_content["total"]
        audit.unlink()
        audit.mkdir()  # the log can no longer be appended to (as root, a chmod would not stop a write)
        refused = await client.call_tool("submit_job", {"entrypoint": entrypoint})
        text = text_of(refused)
        assert refused.is_error and "audit log" in text and "nothing was done" in text and str(audit) in text
        after = await call_ok(client, "list_jobs", {"entrypoint_contains": probe})
        assert after.structured_content["matching"] == 0 and after.structured_content["total"] == before
        audit.rmdir()  # fixed: calls go through again, and are audited
        ok = await call_ok(client, "submit_job", {"entrypoint": entrypoint})
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["started", "ok"] and records[1]["tool"] == "submit_job"
    assert ok.structured_content["submission_id"]
    await server.app.aclose()


async def test_a_full_disk_under_the_audit_log_refuses_every_write_call(ray_cluster: Any) -> None:
    """/dev/full opens fine (the startup check passes) and fails every write with ENOSPC."""
    if not Path("/dev/full").exists():
        lacking("/dev/full", "this system has no /dev/full (Linux has)")
    async with mcp_client(Settings(address=ray_cluster.dashboard_url, audit_log=Path("/dev/full"))) as client:
        refused = await client.call_tool("stop_job", {"job": "raysubmit_anything"})
        assert refused.is_error and "audit log" in text_of(refused) and "/dev/full" in text_of(refused)
        assert not (await client.call_tool("cluster_status", {})).is_error  # reads are not audited
