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
from ray_mcp.errors import RayMCPError, RayRequestFailed
from ray_mcp.limits import AUTOSCALER_DECISIONS, STATE_API_MAX_ROWS
from ray_mcp.shaping.common import to_number
from ray_mcp.shaping.events import EventFilter, autoscaler_decisions, build_event_list
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.routes import PLATFORM_EVENTS_PATH

KUBERNETES = "KUBERNETES"  # the source of the head's platform events (Ray's Source.Platform)

STATE_EVENTS_RETRY_S = 300.0  # after the State API's event list failed, how long the older route goes first
INGEST_SETTING = "RAY_DASHBOARD_INGEST_PLATFORM_EVENTS"
NOT_INGESTED = (
    f"Kubernetes pod events: this head does not ingest them ({INGEST_SETTING} is not set to 1 in its "
    "environment; on KubeRay, set it in the head container's env to see FailedScheduling, evictions, OOMKilled "
    "and image pulls here without a kubeconfig)"
)


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
        rows = [] if wanted.source == KUBERNETES else await self.rows(notes, wanted.source)
        if wanted.source in (None, KUBERNETES):
            rows += await self.platform_or_note(notes)
        return build_event_list(rows, wanted, limit=limit, notes=notes)

    async def platform(self) -> list[dict[str, Any]] | None:
        """The Kubernetes pod events the head ingests, as event rows (source KUBERNETES), oldest first; None when
        the head does not ingest them. RayMCPError when the route fails otherwise."""
        answer = await self.sources.routes.platform_events()
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise RayRequestFailed(
                f"The dashboard answered {PLATFORM_EVENTS_PATH} with HTTP {answer.status}; its Kubernetes pod "
                "events are unknown. Check the head's dashboard log for PlatformEventsHead."
            )
        try:
            body = answer.json()
        except ValueError:
            raise RayRequestFailed(f"The dashboard's {PLATFORM_EVENTS_PATH} answered with no JSON.") from None
        data = body.get("data") if isinstance(body, dict) else None
        events = data.get("events") if isinstance(data, dict) else None
        rows = [platform_row(e) for e in events or [] if isinstance(e, dict)]
        rows.sort(key=lambda r: r["timestamp"])
        return rows

    async def platform_or_note(self, notes: list[str]) -> list[dict[str, Any]]:
        """The platform events, or a note that says why there are none to read."""
        try:
            rows = await self.platform()
        except RayMCPError as exc:
            notes.append(f"Kubernetes pod events: could not be read: {str(exc).split('. ')[0]}")
            return []
        if rows is None:
            notes.append(NOT_INGESTED)
            return []
        return rows

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


def platform_row(e: dict[str, Any]) -> dict[str, Any]:
    """One of Ray's platform events (a RayEvent as JSON, ``platformEvent`` inside) as an event row: source
    KUBERNETES, the pod and the reason in its custom fields, Kubernetes' count kept."""
    pe = _mapping(e.get("platformEvent"))
    source = _mapping(pe.get("source"))
    metadata = _mapping(source.get("metadata"))
    custom = _mapping(pe.get("customFields"))
    ts = _rfc3339(e.get("timestamp"))
    kind, name, reason = (
        str(pe.get("objectKind") or ""),
        str(pe.get("objectName") or ""),
        str(pe.get("reason") or ""),
    )
    message = str(pe.get("message") or e.get("message") or "")
    return {
        "time": clock(ts),
        "timestamp": ts,
        "severity": str(e.get("severity") or "INFO"),
        "source_type": str(source.get("platform") or KUBERNETES),
        "message": f"{kind} {name}: {reason}: {message}",
        "count": int(to_number(custom.get("count")) or 1),
        "custom_fields": {
            "kind": kind,
            "name": name,
            "reason": reason,
            "message": message,
            "component": str(source.get("component") or ""),
            "namespace": str(metadata.get("namespace") or ""),
            "count": str(custom.get("count") or ""),
        },
        "label": reason,
    }


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rfc3339(value: Any) -> float:
    """protobuf's JSON timestamp ("2026-12-04T10:00:05Z", fractions optional) as a UNIX time; 0 when absent."""
    try:
        return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def clock(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"
