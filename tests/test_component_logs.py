"""tail_logs component=: a Ray daemon's own log on a node (the raylet, the GCS, the dashboard, ...), read by name
on the session's head."""

from __future__ import annotations

from mcp import Client
from tests.support import call_ok, text_of

from ray_mcp.models import LogTail


async def test_a_daemons_own_log_is_read_by_its_component_name(client: Client) -> None:
    status = (await call_ok(client, "cluster_status", {})).structured_content
    head = next(n for n in status["nodes"] if n["is_head"])
    raylet = await call_ok(
        client, "tail_logs", {"component": "raylet", "node": head["ip"], "stream": "out", "lines": 5}
    )
    (section,) = LogTail.model_validate(raylet.structured_content).sections
    assert (
        section.filename == "raylet.out" and section.node_id == head["node_id"] and section.lines_shown == 5
    )
    # the GCS and the dashboard write their own files (<name>.out and <name>.log) and their stderr apart
    both = await call_ok(client, "tail_logs", {"component": "dashboard", "node": head["node_id"], "lines": 3})
    assert [s.filename for s in LogTail.model_validate(both.structured_content).sections] == [
        "dashboard.log",
        "dashboard.err",
    ]
    gcs = await call_ok(client, "tail_logs", {"component": "gcs_server", "node": head["ip"], "grep": "GCS"})
    assert "gcs_server.out" in text_of(gcs)


async def test_a_component_needs_its_node_and_an_unknown_one_is_refused_with_the_names(
    client: Client,
) -> None:
    missing = await client.call_tool("tail_logs", {"component": "raylet"})
    assert missing.is_error and "needs node" in text_of(missing), text_of(missing)
    unknown = await client.call_tool("tail_logs", {"component": "supervisor", "node": "10.0.0.1"})
    assert unknown.is_error and "raylet" in text_of(unknown) and "gcs_server" in text_of(unknown), text_of(
        unknown
    )
