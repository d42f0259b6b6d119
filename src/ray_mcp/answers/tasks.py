"""Tasks: list them, and summarize them by name, state and error type (State API); the GCS's count of every
task attempt it stores, past the State API's cap."""

from __future__ import annotations

from typing import Any

from ray_mcp import models
from ray_mcp.errors import RayMCPError
from ray_mcp.limits import MAX_ERROR_TYPES_SAMPLED, STATE_API_MAX_ROWS
from ray_mcp.shaping.tasks import build_task_list, build_task_summary
from ray_mcp.shaping.tasks import error_groups as group_by_error_type
from ray_mcp.sources.dashboard import Dashboard, gather
from ray_mcp.sources.gcs import Gcs
from ray_mcp.sources.query import Filter


def _at_cap(result: dict[str, Any]) -> bool:
    return int(result.get("num_after_truncation") or 0) >= STATE_API_MAX_ROWS


class Tasks:
    """The tasks of one cluster."""

    def __init__(self, client: Dashboard, gcs: Gcs) -> None:
        self.client = client
        self.gcs = gcs

    async def summarize(self, *, filters: list[Filter]) -> models.TaskSummary:
        summary = await self.client.summary("tasks", filters=filters, summary_by="func_name")
        notes = [
            w for w in [summary.get("partial_failure_warning"), *list(summary.get("warnings") or [])] if w
        ]
        failed_counts: dict[str, int] = {}
        samples: dict[str, dict[str, Any]] = {}
        if not any(k == "state" and v != "FAILED" for k, _p, v in filters):
            failed_counts, samples, failed_notes = await self._failed_errors(filters=filters)
            notes += failed_notes
        in_cluster = await self._stored_tasks() if not filters and _at_cap(summary) else None
        return build_task_summary(
            summary=summary, failed_counts=failed_counts, samples=samples, notes=notes, in_cluster=in_cluster
        )

    async def _stored_tasks(self) -> int | None:
        """The GCS's count of the tasks it holds; None when the GCS cannot answer (the summary then says "at
        least")."""
        try:
            return await self.gcs.stored_task_count()
        except RayMCPError:
            return None

    async def _failed_errors(
        self, *, filters: list[tuple[str, str, str]]
    ) -> tuple[dict[str, int], dict[str, dict[str, Any]], list[str]]:
        """Failed tasks counted by error type, with one sample each: (counts, samples, notes).

        Ray filters tasks by state at the source (the GCS), so this reads only the failed ones, however many
        tasks the cluster holds: what a health check can afford on every call, unlike a full summary.
        """
        failed_filters = [f for f in filters if f[0] != "state"] + [("state", "=", "FAILED")]
        # Basic columns only (error_type is one): small rows, up to Ray's 10,000 cap.
        _t, matched, rows, notes = await self.client.state_page(
            "tasks", filters=failed_filters, limit=STATE_API_MAX_ROWS, detail=False
        )
        counts: dict[str, int] = {}
        for row in rows:
            key = str(row.get("error_type") or "UNKNOWN")
            counts[key] = counts.get(key, 0) + 1
        if matched > len(rows):
            notes.append(f"Error types counted over the first {len(rows):,} of {matched:,} failed tasks.")
        pages = await gather(
            *(
                self.client.state_page(
                    "tasks", filters=[*failed_filters, ("error_type", "=", et)], limit=1, detail=True
                )
                for et in list(counts)[:MAX_ERROR_TYPES_SAMPLED]
                if et != "UNKNOWN"
            )
        )
        samples = {str(page[2][0].get("error_type")): page[2][0] for page in pages if page[2]}
        return counts, samples, notes

    async def error_groups(self, *, filters: list[tuple[str, str, str]]) -> list[models.ErrorGroup]:
        """Failed tasks by error type (see _failed_errors): what diagnosis needs, without a full summary."""
        counts, samples, _notes = await self._failed_errors(filters=filters)
        return group_by_error_type(counts, samples)

    async def page(
        self, *, filters: list[Filter], limit: int, detail: bool, notes: list[str]
    ) -> models.TaskList:
        total, matched, rows, ray_notes = await self.client.state_page(
            "tasks", filters=filters, limit=limit, detail=detail
        )
        return build_task_list(total=total, matched=matched, rows=rows, limit=limit, notes=notes + ray_notes)
