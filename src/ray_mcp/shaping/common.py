"""What every answer shares: the tool result, Ray's int64-as-string numbers, limits and byte budgets of lists."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from ray_mcp.limits import LIST_BUDGET_BYTES, MAX_LIMIT, RESPONSE_BUDGET_BYTES, STATE_API_MAX_ROWS


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """A tool answer: the concise text for the model, and the structured data with nulls dropped."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json", exclude_none=True),
    )


def to_number(value: Any) -> Any:
    """Ray's REST layer sends int64 values as strings ("num_restarts": "0"): turn them back into numbers."""
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def source_cap_note(resource: str, result: Mapping[str, Any], *, in_cluster: int | None = None) -> str | None:
    """A note when Ray's State API did not read every record of a kind (it reads at most 10,000).

    Ray counts and filters only the records it read (``num_after_truncation``), so every count built on them
    is then a lower bound; the CLI warns, and so must we. For actors and placement groups Ray reports the
    cluster's ``total``; for tasks it does not count what it left out, so a read of exactly the cap means
    "at least" unless the caller learned the real number (``in_cluster``) elsewhere.
    """
    total = int(to_number(result.get("total")) or 0)
    read = int(to_number(result.get("num_after_truncation", total)) or 0)
    known = max(total, in_cluster or 0)
    if known > read:
        return (
            f"Ray's State API read only {read:,} of the {known:,} {resource} in the cluster (its cap is "
            f"{STATE_API_MAX_ROWS:,}): counts and filters cover those {read:,}; {known - read:,} were left out."
        )
    if read >= STATE_API_MAX_ROWS:
        return (
            f"Ray's State API read {read:,} {resource}, its cap: the cluster may hold more, and no count here "
            "includes them."
        )
    return None


def clamp_limit(limit: int, *, maximum: int = MAX_LIMIT, what: str = "items") -> tuple[int, str | None]:
    """Clamp a caller's ``limit`` to [0, maximum]; 0 means "counts only". Returns the limit and a note, if any."""
    if limit > maximum:
        return (
            maximum,
            f"limit={limit:,} was clamped to {maximum:,}; narrow with filters to see other {what}.",
        )
    if limit == 0:
        return 0, f"limit=0: counts only, no {what} listed."
    return limit, None


def fit_budget(items: list[BaseModel], budget: int = LIST_BUDGET_BYTES) -> int:
    """How many of ``items`` (in order) fit in ``budget`` bytes of JSON (at least one, if there is one)."""
    used = 0
    for n, item in enumerate(items):
        used += len(item.model_dump_json(exclude_none=True)) + 1
        if used > budget and n > 0:
            return n
    return len(items)


def cap_items(items: list[Any], limit: int, matched: int, notes: list[str], what: str) -> list[Any]:
    """Keep what fits in the byte budget; note how many more the limit asked for."""
    items = items[:limit]
    keep = fit_budget(items)
    if keep < len(items):
        notes.append(
            f"Showing {keep} of the {len(items)} {what} requested, to keep the answer under "
            f"{RESPONSE_BUDGET_BYTES // 1024} KB; narrow with filters (or use detail=false)."
        )
    return items[:keep]


def narrowing_hint(remaining: int, by: Mapping[str, int], noun: str, filters: str) -> str | None:
    """'1,942 more DEAD actors; filter by class_name or job_id' (names the biggest group left)."""
    if remaining <= 0:
        return None
    if by:
        top, count = min(
            by.items(), key=lambda kv: (-kv[1], kv[0])
        )  # ties: the first by name, whatever the order
        return (
            f"{remaining:,} more {noun} not shown (the largest group: {count:,} {top}); filter by {filters}."
        )
    return f"{remaining:,} more {noun} not shown; filter by {filters}."
