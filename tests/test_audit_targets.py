"""The audit log's write-ahead record of every write and destructive tool names what the call will change.

Every such tool the server can offer (destructive tools allowed, Kubernetes tools listed) is found from the
server's own tool kinds, and called through a real client with its required arguments; the dashboard is a
stand-in that answers 503 to everything (httpx.MockTransport), since the record under test is written before
the call runs, whatever it then does. A tool added later is checked too: its arguments are made from its input
schema when this file has no sample for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from ray_mcp.guard import audit
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

# Arguments as an agent would send them, and what the record must name from them.
SAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "submit_job": ({"entrypoint": "python train.py"}, {"job": "a new job"}),
    "stop_job": ({"job": "raysubmit_audit_1"}, {"job": "raysubmit_audit_1"}),
    "delete_job": ({"job": "raysubmit_audit_2"}, {"job": "raysubmit_audit_2"}),
    "kill_actor": ({"actor_id": "a" * 32}, {"actor_id": "a" * 32}),
    "serve_delete_app": ({"app": "shop"}, {"app": "shop"}),
    "serve_deploy": (
        {"config": {"applications": [{"name": "shop", "import_path": "shop:app"}]}},
        {"apps": ["shop"]},
    ),
    "delete_ray_job": ({"rayjob": "nightly-train"}, {"rayjob": "nightly-train"}),
    "scale_worker_group": ({"group": "gpu-workers", "replicas": 2}, {"group": "gpu-workers"}),
}


def from_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The required arguments of a tool this file has no sample for, each a plausible value of its type."""
    samples = {
        "string": "audit-target-x",
        "integer": 1,
        "number": 1,
        "boolean": True,
        "object": {},
        "array": [],
    }
    properties = schema.get("properties", {})
    out = {}
    for name in schema.get("required", []):
        kind = properties.get(name, {}).get("type", "string")
        out[name] = samples.get(kind if isinstance(kind, str) else "string", "audit-target-x")
    return out


def refusing(request: httpx.Request) -> httpx.Response:
    return httpx.Response(503, text="stand-in dashboard: unavailable")


async def test_every_write_and_destructive_tools_write_ahead_record_names_its_target(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    settings = Settings(
        address="http://127.0.0.1:9",
        allow_destructive=True,
        kubernetes_tools=True,
        audit_log=log,
        request_timeout_s=2,
    )
    server = build_server(settings, http_transport=httpx.MockTransport(refusing), gcs_lookup=None)
    writes = sorted(name for name, kind in server.tool_kinds.items() if kind in ("write", "destructive"))
    assert set(SAMPLES) <= set(writes), "a sampled tool is no longer a write tool: update SAMPLES"
    try:
        async with Client(server) as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            for name in writes:
                arguments, named = SAMPLES.get(name) or (from_schema(schemas[name]), {})
                await client.call_tool(name, arguments)  # it may fail: its record was written first
                started = [
                    r
                    for r in map(json.loads, log.read_text().splitlines())
                    if r["tool"] == name and r["outcome"] == "started"
                ]
                assert started, f"{name}: no write-ahead record"
                targets = started[-1]["targets"]
                assert targets, f"{name}: its write-ahead record names no target ({started[-1]})"
                for key, value in named.items():
                    shown = targets.get(key)
                    assert shown == value or (isinstance(shown, str) and shown.startswith(value)), (
                        name,
                        targets,
                    )
    finally:
        await server.app.aclose()


def test_the_outcome_of_a_call_is_the_kind_its_decision_set_never_read_from_its_text() -> None:
    """A result whose text happens to start like one of our refusals (here a job's own output, quoted) is an
    ordinary outcome; "dry_run" and "declined" come only from the confirmation's decision."""
    started = {"targets": {}, "cluster": {}, "outcome": "started"}
    lookalike = {"content": [{"type": "text", "text": "Not done yet (nothing changed): printed by the job"}]}
    assert audit.finish_record(started, audit.AuditNotes(), 0.1, lookalike)["outcome"] == "ok"
    assert audit.finish_record(started, audit.AuditNotes(outcome="dry_run"), 0.1, {})["outcome"] == "dry_run"
    declined = audit.AuditNotes(outcome="declined")
    assert audit.finish_record(started, declined, 0.1, {"content": []})["outcome"] == "declined"
    failed = {"isError": True, "content": [{"type": "text", "text": "No such job"}]}
    assert audit.finish_record(started, declined, 0.1, failed)["outcome"] == "error"
