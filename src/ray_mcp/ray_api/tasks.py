"""Tasks: list them, and summarize them by name, state and error type."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from ray_mcp import models
from ray_mcp.limits import MAX_ERROR_TYPES_SAMPLED, STATE_API_MAX_ROWS
from ray_mcp.ray_api import gcs, ray_import
from ray_mcp.ray_api.client import RayClient, gather
from ray_mcp.ray_api.query import Filter
from ray_mcp.shaping.tasks import build_task_list, build_task_summary, error_groups


def _at_cap(result: dict[str, Any]) -> bool:
    return int(result.get("num_after_truncation") or 0) >= STATE_API_MAX_ROWS


class TasksAPI(RayClient):
    """The tasks of one cluster."""

    async def list_tasks(
        self, *, filters: list[Filter], limit: int, detail: bool, notes: list[str]
    ) -> models.TaskList:
        total, matched, rows, ray_notes = await self._state_page(
            "tasks", filters=filters, limit=limit, detail=detail
        )
        return build_task_list(total=total, matched=matched, rows=rows, limit=limit, notes=notes + ray_notes)

    async def summarize_tasks(self, *, filters: list[Filter]) -> models.TaskSummary:
        summary = await self._summary("tasks", filters=filters, summary_by="func_name")
        notes = [
            w for w in [summary.get("partial_failure_warning"), *list(summary.get("warnings") or [])] if w
        ]
        failed_counts: dict[str, int] = {}
        samples: dict[str, dict[str, Any]] = {}
        if not any(k == "state" and v != "FAILED" for k, _p, v in filters):
            failed_counts, samples, failed_notes = await self.failed_task_errors(filters=filters)
            notes += failed_notes
        in_cluster = await self._stored_tasks() if not filters and _at_cap(summary) else None
        return build_task_summary(
            summary=summary, failed_counts=failed_counts, samples=samples, notes=notes, in_cluster=in_cluster
        )

    async def unfinished_tasks(self) -> tuple[list[dict[str, Any]], int] | None:
        """Every task attempt that did not finish, as the State API's detail rows, read from the GCS in one
        scan (up to Ray's 10,000), and how many more it left out; None when the GCS cannot be reached from here
        (the caller asks the State API, one list per state)."""
        try:
            await ray_import.ensure("state")
            rows, more = await anyio.to_thread.run_sync(
                lambda: gcs.unfinished_task_rows(self._gcs(), self.timeout_s, STATE_API_MAX_ROWS)
            )
        except Exception:  # the GCS may be unreachable from here
            return None
        await self.learn_job_secrets({str(r["job_id"]) for r in rows if r.get("job_id")})
        return rows, more

    async def _stored_tasks(self) -> int | None:
        """The GCS's count of the tasks it holds (None if the GCS cannot be reached from here)."""
        try:
            return await anyio.to_thread.run_sync(lambda: gcs.stored_task_count(self._gcs(), self.timeout_s))
        except Exception:  # the answer then says "at least"
            return None

    async def failed_task_errors(
        self, *, filters: list[tuple[str, str, str]]
    ) -> tuple[dict[str, int], dict[str, dict[str, Any]], list[str]]:
        """Failed tasks counted by error type, with one sample each: (counts, samples, notes).

        Ray filters tasks by state at the source (the GCS), so this reads only the failed ones, however many
        tasks the cluster holds: what a health check can afford on every call, unlike a full summary.
        """
        failed_filters = [f for f in filters if f[0] != "state"] + [("state", "=", "FAILED")]
        # Basic columns only (error_type is one): small rows, up to Ray's 10,000 cap.
        _t, matched, rows, notes = await self._state_page(
            "tasks", filters=failed_filters, limit=STATE_API_MAX_ROWS, detail=False
        )
        counts: dict[str, int] = {}
        for row in rows:
            key = str(row.get("error_type") or "UNKNOWN")
            counts[key] = counts.get(key, 0) + 1
        if matched > len(rows):
            notes.append(f"Error types counted over the first {len(rows):,} of {matched:,} failed tasks.")
        pages = await gather(
            *(self._state_page("tasks", filters=[*failed_filters, ("error_type", "=", et)], limit=1, detail=True)
              for et in list(counts)[:MAX_ERROR_TYPES_SAMPLED] if et != "UNKNOWN")
        )  # fmt: skip
        samples = {str(page[2][0].get("error_type")): page[2][0] for page in pages if page[2]}
        return counts, samples, notes

    async def task_error_groups(self, *, filters: list[tuple[str, str, str]]) -> list[models.ErrorGroup]:
        """Failed tasks by error type (see failed_task_errors): what diagnosis needs, without a full summary."""
        counts, samples, _notes = await self.failed_task_errors(filters=filters)
        return error_groups(counts, samples)
