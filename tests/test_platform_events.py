"""Platform events without a kubeconfig: the Kubernetes pod events a head ingests
(RAY_DASHBOARD_INGEST_PLATFORM_EVENTS=1, /api/v0/platform_events) in list_events and cluster_health.

One machine cannot produce Kubernetes events: the route's answer is a recording made by Ray's own code
(tests/platform_events_recording.py), served in place of that one route of the real session head, whose every
other route answers for itself. The head that does not ingest them is the real session head, as it is.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import httpx
import pytest
from tests.platform_events_recording import (
    CPU_POD,
    GPU_POD,
    HEAD_POD,
    IMAGE_POD,
    RECORDED_AT,
    RECORDING,
    ray_answer,
)
from tests.support import mcp_client, structured, text_of

from ray_mcp.answers.events import INGEST_SETTING, platform_row
from ray_mcp.diagnosis.explain import explain_cluster
from ray_mcp.diagnosis.facts import PROBLEM, WARNING
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.settings import Settings
from ray_mcp.sources.routes import PLATFORM_EVENTS_PATH

RECORDED: dict[str, Any] = json.loads(RECORDING.read_text())


def test_the_recording_is_what_the_installed_ray_makes() -> None:
    assert ray_answer(RECORDED_AT) == RECORDED, "run `python -m tests.platform_events_recording`"


def rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((platform_row(e) for e in answer["data"]["events"]), key=lambda r: r["timestamp"])


def chains_at(events: list[dict[str, Any]], now: datetime.datetime) -> dict[str, tuple[str, int]]:
    ev = GraphInputs(now_ms=now.timestamp() * 1000, platform_events=events)
    return {sorted(c.subjects)[0]: (str(c.kind), c.severity) for c in explain_cluster(ev)}


def test_each_pod_in_trouble_is_one_finding_by_its_newest_event_until_a_later_one_ends_it() -> None:
    events = rows(RECORDED)
    found = chains_at(events, RECORDED_AT + datetime.timedelta(minutes=10))
    assert {pod: kind for pod, (kind, _s) in found.items()} == {
        f"pod:{GPU_POD}": "pod_unschedulable",
        f"pod:{CPU_POD}": "pod_evicted",
        f"pod:{IMAGE_POD}": "image_pull",
    }  # the head's pod (scheduled, image present) is not a finding
    assert all(severity >= PROBLEM for _k, severity in found.values())
    later = RECORDED_AT + datetime.timedelta(hours=2)
    assert all(severity == WARNING for _k, severity in chains_at(events, later).values())  # old news
    scheduled = dict(events[0])  # the GPU pod was scheduled after all
    scheduled["timestamp"] = max(r["timestamp"] for r in events) + 1
    scheduled["custom_fields"] = {**scheduled["custom_fields"], "name": GPU_POD, "reason": "Scheduled"}
    assert f"pod:{GPU_POD}" not in chains_at([*events, scheduled], later)


def moved_to_now(answer: dict[str, Any]) -> dict[str, Any]:
    """The recording with its times moved so that its newest event is a minute old (the rule's window is an hour)."""
    moved = json.loads(json.dumps(answer))
    stamps = [
        datetime.datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00"))
        for e in moved["data"]["events"]
    ]
    shift = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1) - max(stamps)
    for e, at in zip(moved["data"]["events"], stamps, strict=True):
        e["timestamp"] = (at + shift).strftime("%Y-%m-%dT%H:%M:%SZ")
    return moved


class RecordedRoute(httpx.AsyncBaseTransport):
    """The real head's dashboard, except /api/v0/platform_events, which answers the recording."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.body = json.dumps(answer).encode()
        self.asked = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == PLATFORM_EVENTS_PATH:
            self.asked += 1
            return httpx.Response(200, content=self.body, headers={"content-type": "application/json"})
        return await self.inner.handle_async_request(request)


@pytest.mark.live
async def test_list_events_and_cluster_health_read_the_pods_events_from_the_dashboard_alone(
    ray_cluster,
) -> None:
    route = RecordedRoute(moved_to_now(RECORDED))
    settings = Settings(address=ray_cluster.dashboard_url)
    async with mcp_client(settings, http_transport=route) as client:
        events = await structured(client, "list_events", source="KUBERNETES")
        assert events["total"] == 8 and not events["notes"]
        by_label = {e["label"]: e for e in events["events"]}
        assert (
            by_label["FailedScheduling"]["count"] == 7
            and by_label["FailedScheduling"]["source"] == "KUBERNETES"
        )
        assert GPU_POD in by_label["FailedScheduling"]["message"]
        everything = await structured(client, "list_events", severity="WARNING")
        assert {"FailedScheduling", "Evicted", "Failed"} <= {e.get("label") for e in everything["events"]}

        health = await structured(client, "cluster_health")
        kinds = {f["kind"]: f for f in health["findings"]}
        assert {"pod_unschedulable", "pod_evicted", "image_pull"} <= set(kinds), health
        assert health["status"] == "PROBLEMS_FOUND"
        assert "Insufficient nvidia.com/gpu" in kinds["pod_unschedulable"]["title"]
        assert HEAD_POD not in json.dumps(health)
    assert route.asked >= 2


@pytest.mark.live
async def test_a_head_that_does_not_ingest_them_says_so_and_names_the_setting(ray_cluster) -> None:
    async with mcp_client(Settings(address=ray_cluster.dashboard_url)) as client:
        events = await client.call_tool("list_events", {"source": "KUBERNETES"})
        text = text_of(events)
        assert INGEST_SETTING in text and "does not ingest" in text, text
        assert (events.structured_content or {})["total"] == 0
        health = await structured(client, "cluster_health")
        assert any(INGEST_SETTING in n for n in health["notes"]), health["notes"]
        assert not any("Kubernetes" in u for u in health["unchecked"])  # optional: not a check that failed
