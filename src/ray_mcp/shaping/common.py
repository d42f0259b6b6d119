"""What every answer shares: the tool result, Ray's int64-as-string numbers, limits and byte budgets of lists."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from mcp.types import CallToolResult, ResourceLink, TextContent
from pydantic import BaseModel

from ray_mcp.guard.redaction import escape_controls
from ray_mcp.limits import (
    LIST_BUDGET_BYTES,
    MAX_LIMIT,
    RESPONSE_BUDGET_BYTES,
    RESULT_ENVELOPE_BYTES,
    STATE_API_MAX_ROWS,
)


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    """A tool answer: the concise text for the model, and the structured data with nulls dropped."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json", exclude_none=True),
    )


def linked(result: CallToolResult, links: list[ResourceLink]) -> CallToolResult:
    """The answer with resource links after its text: what it names that a client can read (and subscribe to)."""
    result.content.extend(links)
    return result


def json_bytes(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def sent_bytes(structured: object, text: str) -> int:
    """A result as a client receives it: the text as a JSON string (escaped), the structured content, the rest."""
    return json_bytes(text) + json_bytes(structured) + RESULT_ENVELOPE_BYTES


def sent_escaped_bytes(structured: object, text: str) -> int:
    """``sent_bytes`` once the middleware has made every control character visible (escape_controls)."""
    return sent_bytes(_escaped(structured), escape_controls(text))


def _escaped(value: object) -> object:
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, Mapping):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


P = TypeVar("P", bound=BaseModel)


def fit_list(
    page: P, render: Callable[[P], str], field: str, what: str, *, reserve: int = 0
) -> tuple[P, str]:
    """A list answer whose whole, as a client receives it, stays under RESPONSE_BUDGET_BYTES: the last items
    of ``field`` are left out (and the answer says how many) when long or escape-heavy text (quotes,
    backslashes, control characters) would take it over. The number kept is the most that fits. ``reserve``:
    bytes the caller adds to the result afterwards (resource links)."""

    def fits(answer: tuple[P, str]) -> bool:
        sent = sent_escaped_bytes(answer[0].model_dump(mode="json", exclude_none=True), answer[1])
        return sent + reserve <= RESPONSE_BUDGET_BYTES

    whole = page, render(page)
    items = list(getattr(page, field))
    if len(items) <= 1 or fits(whole):
        return whole
    notes = "notes" if "notes" in type(page).model_fields else "hints"

    def keep(k: int) -> tuple[P, str]:
        note = (
            f"{len(items) - k} more of these {len(items)} {what} left out to keep the whole answer under "
            f"{RESPONSE_BUDGET_BYTES // 1024} KB as sent (their text is long); narrow with filters."
        )
        cut = page.model_copy(update={field: items[:k], "shown": k, notes: [*getattr(page, notes), note]})
        return cut, render(cut)

    best, low, high = keep(1), 2, len(items) - 1
    while low <= high:
        k = (low + high) // 2
        candidate = keep(k)
        if fits(candidate):
            best, low = candidate, k + 1
        else:
            high = k - 1
    return best


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


def state_notes(resource: str, found: Mapping[str, Any]) -> list[str]:
    """What to say about one State API list: Ray's own warnings, and the note when it did not read every record."""
    notes = [str(w) for w in [found.get("partial_failure_warning"), *(found.get("warnings") or [])] if w]
    capped = source_cap_note(resource.replace("_", " "), found)
    return notes + ([capped] if capped else [])


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


def cap_items(items: list[Any], limit: int, notes: list[str], what: str) -> list[Any]:
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
