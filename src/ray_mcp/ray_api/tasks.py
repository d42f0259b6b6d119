"""Tasks: list them, and summarize them by name, state and error type."""

from __future__ import annotations

from typing import Any

from ray_mcp import models
from ray_mcp.limits import MAX_ERROR_TYPES_SAMPLED, STATE_API_MAX_ROWS
from ray_mcp.ray_api.client import RayClient, gather
from ray_mcp.shaping.tasks import build_task_list, build_task_summary


class TasksAPI(RayClient):
    """The tasks of one cluster."""

    async def list_tasks(
        self, *, filters: list[tuple[str, str, str]], limit: int, detail: bool, notes: list[str]
    ) -> models.TaskList:
        total, matched, rows, ray_notes = await self._state_page(
            "tasks", filters=filters, limit=limit, detail=detail
        )
        return build_task_list(total=total, matched=matched, rows=rows, limit=limit, notes=notes + ray_notes)

    async def summarize_tasks(self, *, filters: list[tuple[str, str, str]]) -> models.TaskSummary:
        summary = await self._summary("tasks", filters=filters, summary_by="func_name")
        notes = [
            w for w in [summary.get("partial_failure_warning"), *list(summary.get("warnings") or [])] if w
        ]
        failed_counts: dict[str, int] = {}
        samples: dict[str, dict[str, Any]] = {}
        if not any(k == "state" and v != "FAILED" for k, _p, v in filters):
            failed_filters = [f for f in filters if f[0] != "state"] + [("state", "=", "FAILED")]
            # Basic columns only (error_type is one): small rows, up to Ray's 10,000 cap.
            _t, matched, rows, _n = await self._state_page(
                "tasks", filters=failed_filters, limit=STATE_API_MAX_ROWS, detail=False
            )
            for row in rows:
                key = str(row.get("error_type") or "UNKNOWN")
                failed_counts[key] = failed_counts.get(key, 0) + 1
            if matched > len(rows):
                notes.append(f"Error types counted over the first {len(rows):,} of {matched:,} failed tasks.")
            pages = await gather(
                *(self._state_page("tasks", filters=[*failed_filters, ("error_type", "=", et)], limit=1, detail=True)
                  for et in list(failed_counts)[:MAX_ERROR_TYPES_SAMPLED] if et != "UNKNOWN")
            )  # fmt: skip
            for page in pages:
                if page[2]:
                    samples[str(page[2][0].get("error_type"))] = page[2][0]
        return build_task_summary(summary=summary, failed_counts=failed_counts, samples=samples, notes=notes)
