"""Cluster events: what the GCS, raylets, autoscaler and job manager report (node added or removed, OOM
kills, worker crashes, autoscaler decisions, job status), as the dashboard keeps them."""

from __future__ import annotations

import datetime
import re
from typing import Any

from ray_mcp import models
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.nodes import Nodes
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import AUTOSCALER_DECISIONS, STATE_API_MAX_ROWS
from ray_mcp.shaping.common import to_number
from ray_mcp.shaping.events import EventFilter, autoscaler_decisions, build_event_list
from ray_mcp.sources.dashboard import Dashboard


class Events:
    def __init__(self, client: Dashboard, jobs: Jobs, nodes: Nodes) -> None:
        self.client = client
        self.jobs = jobs
        self.nodes = nodes

    async def rows(
        self, notes: list[str], source: str | None = None, limit: int = STATE_API_MAX_ROWS
    ) -> list[dict[str, Any]]:
        """Every event the dashboard keeps, oldest first.

        /api/v0/cluster_events first (Ray keeps the oldest rows at its limit, so every row is read); the
        dashboard's older /events (the same store, no list options) when it fails, as it does on some
        event records. ``source`` narrows the State API's answer (the older one has every event). RayMCPError when
        neither answers."""
        try:
            # detail=1: Ray 2.60 answers 500 to the basic-columns variant of this list.
            result = await self.client.list_state(
                "cluster_events",
                what="the cluster events",
                limit=limit,
                detail=True,
                filters=[("source_type", "=", source)] if source else [],
            )
        except RayMCPError as exc:
            first_error = str(exc).split(". ")[0]
        else:
            rows = [dict(r) for r in result.get("result") or []]
            if int(to_number(result.get("total")) or 0) > len(rows):
                notes.append(f"Ray returned the oldest {len(rows)} of {result.get('total')}")
            return rows
        try:
            data = await self.client.get_data("/events", what="the cluster events (/events)")
        except RayMCPError as exc:
            raise type(exc)(f"{first_error}; and {exc}") from exc
        rows = []
        for events in (data.get("events") or {}).values() if isinstance(data, dict) else []:
            for e in events:
                ts = float(to_number(e.get("timestamp")) or 0)
                rows.append(
                    {
                        "time": clock(ts),
                        "timestamp": ts,
                        "severity": e.get("severity"),
                        "source_type": e.get("sourceType") or e.get("source_type"),
                        "message": e.get("message"),
                        "custom_fields": e.get("customFields") or {},
                        "source_hostname": e.get("hostName") or e.get("sourceHostname"),
                        "label": e.get("label"),
                    }
                )
        rows.sort(key=lambda r: r["timestamp"])
        return rows

    async def page(
        self,
        *,
        severity: str | None,
        source: str | None,
        node: str | None,
        job: str | None,
        since_s: float | None,
        limit: int,
    ) -> models.EventList:
        notes: list[str] = []
        node_id = await self.nodes.resolve(node) if node else None
        job_id, submission_id = await self._job_ids(job)
        wanted = EventFilter(
            severity=severity,
            source=source,
            node_id=node_id,
            job_id=job_id,
            submission_id=submission_id,
            since=datetime.datetime.now(datetime.UTC).timestamp() - since_s if since_s else None,
        )
        rows = await self.rows(notes, wanted.source)
        return build_event_list(rows, wanted, limit=limit, notes=notes)

    async def _job_ids(self, job: str | None) -> tuple[str | None, str | None]:
        """(job id, submission id) of a job; a job whose driver never connected has events by submission id only."""
        if not job or not job.strip():
            return None, None
        job = job.strip()
        if re.fullmatch(r"[0-9a-fA-F]{8}", job):
            return job.lower(), None
        details = await self.jobs.details(job)
        return details.get("job_id") or None, str(details.get("submission_id") or job)

    async def autoscaler_decisions(self, notes: list[str]) -> list[str]:
        """The autoscaler's recent events (launches, removals, failures), newest first; unread: a note."""
        try:
            rows = await self.rows(notes, "AUTOSCALER")
        except RayMCPError as exc:
            notes.append(f"The autoscaler's events could not be read: {str(exc).split('. ')[0]}.")
            return []
        return autoscaler_decisions(rows, AUTOSCALER_DECISIONS)


def clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"
