"""Cluster events: what the GCS, raylets, autoscaler and job manager report (node added or removed, OOM
kills, worker crashes, autoscaler decisions, job status), as the dashboard keeps them."""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from ray_mcp import models
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.nodes import Nodes
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import AUTOSCALER_DECISIONS, STATE_API_MAX_ROWS
from ray_mcp.shaping.common import to_number
from ray_mcp.shaping.events import EventFilter, autoscaler_decisions, build_event_list
from ray_mcp.sources.cluster_sources import ClusterSources

STATE_EVENTS_RETRY_S = 300.0  # after the State API's event list failed, how long the older route goes first


class Events:
    def __init__(self, sources: ClusterSources, jobs: Jobs, nodes: Nodes) -> None:
        self.sources = sources
        self.jobs = jobs
        self.nodes = nodes
        self._state_failed_at = -STATE_EVENTS_RETRY_S  # when the State API's list last failed

    async def rows(
        self, notes: list[str], source: str | None = None, limit: int = STATE_API_MAX_ROWS
    ) -> list[dict[str, Any]]:
        """Every event the dashboard keeps, oldest first.

        /api/v0/cluster_events first (Ray keeps the oldest rows at its limit, so every row is read); the
        dashboard's older /events (the same store, no list options) when it fails, as it does once the store
        holds an event its schema refuses; until the head restarts, so for STATE_EVENTS_RETRY_S after a
        failure the older route is asked first. ``source`` narrows the State API's answer (the older one has
        every event). RayMCPError when neither answers."""
        if time.monotonic() - self._state_failed_at < STATE_EVENTS_RETRY_S:
            try:
                return _flat(await self.sources.routes.events())
            except RayMCPError:
                pass  # then the State API's, as if nothing had failed before
        try:
            result = await self.sources.state.cluster_events(source=source, limit=limit)
        except RayMCPError as exc:
            self._state_failed_at = time.monotonic()
            first_error = str(exc).split(". ")[0]
        else:
            kept: list[dict[str, Any]] = [dict(r) for r in result["result"]]
            if int(to_number(result.get("total")) or 0) > len(kept):
                notes.append(f"Ray returned the oldest {len(kept)} of {result.get('total')}")
            return kept
        try:
            by_job = await self.sources.routes.events()
        except RayMCPError as exc:
            raise type(exc)(f"{first_error}; and {exc}") from exc
        return _flat(by_job)

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


def _flat(by_job: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The older route's events (by job, camelCase) as the State API's rows, oldest first."""
    rows: list[dict[str, Any]] = []
    for events in by_job.values():
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


def clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"
