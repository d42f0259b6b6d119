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
    FIT_SAMPLE_ITEMS,
    MAX_LIMIT,
    RESULT_ENVELOPE_BYTES,
    STATE_API_MAX_ROWS,
)
from ray_mcp.models import Listed, Logged

M = TypeVar("M", bound=BaseModel)


def tool_result(
    model: M, text: str | Callable[[M], str], *, links: Callable[[M], list[ResourceLink]] | None = None
) -> CallToolResult:
    """A tool answer, the one way every tool makes it: the concise text for the model, the structured data with
    nulls dropped, and ``links`` (resource links a client can read and subscribe to) after the text.

    This is the edge where the one budget is applied: a list page (models.Listed) or a log answer
    (models.Logged) comes with its renderer as ``text`` and is fitted here (fit_page, fit_log), so no tool
    carries fitting code. ``links`` is given the answer as sent, so that it links only the items kept.
    """
    if isinstance(model, Logged):
        model, said = fit_log(model, _renderer(model, text), reserve=_links_bytes(model, links))
    elif isinstance(model, Listed) and type(model).items_field:
        model, said = fit_page(model, _renderer(model, text), reserve=_links_bytes(model, links))
    else:
        said = text(model) if callable(text) else text
    result = CallToolResult(
        content=[TextContent(type="text", text=said)],
        structured_content=model.model_dump(mode="json", exclude_none=True),
    )
    return linked(result, links(model)) if links else result


def linked(result: CallToolResult, links: list[ResourceLink]) -> CallToolResult:
    """The answer with resource links after its text: what it names that a client can read (and subscribe to)."""
    result.content.extend(links)
    return result


def _renderer(model: M, text: str | Callable[[M], str]) -> Callable[[M], str]:
    if not callable(text):  # the fitter renders what it keeps: a fixed text could not follow the cut
        raise TypeError(f"{type(model).__name__} is fitted at the edge: pass its renderer, not its text")
    return text


def _links_bytes(model: M, links: Callable[[M], list[ResourceLink]] | None) -> int:
    """What the resource links of the whole answer add to it as sent (the fitter keeps room for them)."""
    found = links(model) if links else []
    return sum(json_bytes(link.model_dump(mode="json", by_alias=True, exclude_none=True)) for link in found)


def json_bytes(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def sent_bytes(structured: object, text: str) -> int:
    """A result as a client receives it: the text as a JSON string (escaped), the structured content, the rest."""
    return json_bytes(text) + json_bytes(structured) + RESULT_ENVELOPE_BYTES


def sent_escaped_bytes(structured: object, text: str) -> int:
    """``sent_bytes`` once the middleware has made every control character visible (escape_controls)."""
    raw = json.dumps(structured, separators=(",", ":"), ensure_ascii=False)
    # Most answers hold no control character: then the structure is sent as it is, and one scan of its JSON
    # says so (JSON shows C0 characters as \u00XX, \r, \b or \f; a backslash before r, b or f only takes
    # the longer way here).
    if escape_controls(raw) == raw and not any(e in raw for e in ("\\u00", "\\r", "\\b", "\\f")):
        return json_bytes(escape_controls(text)) + len(raw.encode()) + RESULT_ENVELOPE_BYTES
    return sent_bytes(_escaped(structured), escape_controls(text))


def _escaped(value: object) -> object:
    if isinstance(value, str):
        return escape_controls(value)
    if isinstance(value, Mapping):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(v) for v in value]
    return value


L = TypeVar("L", bound=Listed)


def fit_page(page: L, render: Callable[[L], str], *, reserve: int = 0) -> tuple[L, str]:
    """The one fitter: a list page whose whole, as a client receives it (text and structured content, escaped
    as the guard will escape them), stays within its budget (RESPONSE_BUDGET_BYTES, or what the caller asked
    for: EdgeBudget.within). The last items of the page are left out (Listed.first: the area's order says which
    go first), the most that fit are kept, and one note says how many. ``reserve``: bytes sent besides the
    result's text and structured content (resource links). The area's own ``limit`` chose the items; this only
    keeps the answer within what a client's context can take.
    """
    budget, where = page.sent_budget, type(page).notes_field

    def size(answer: tuple[L, str]) -> int:
        return sent_escaped_bytes(answer[0].model_dump(mode="json", exclude_none=True), answer[1]) + reserve

    n = page.item_count()
    if n <= 1:  # nothing to leave out
        return page, render(page)

    def keep(k: int) -> tuple[L, str]:
        if k == n:
            return page, render(page)
        cut = page.first(k)
        note = (
            f"{page.left_out(cut)} left out to keep the whole answer under {_budget_words(budget)} as sent; "
            f"{type(page).next_step}."
        )
        cut = cut.model_copy(update={where: [*getattr(cut, where), note]})
        return cut, render(cut)

    answers: dict[int, tuple[tuple[L, str], int]] = {}  # k -> (the answer with k items, its size as sent)

    def fits(k: int) -> bool:
        if k not in answers:
            answer = keep(k)
            answers[k] = answer, size(answer)
        return answers[k][1] <= budget

    # Measure a first few items only (a page of 1,000 is never rendered whole), and guess from them that the
    # rest are about as long: usually two more renders find the most that fit. (The whole page has no note, so
    # it may fit where it less its last item and a note does not; only rows shorter than the note, which no
    # list here has, could then lose a row or two.)
    sample = min(n, FIT_SAMPLE_ITEMS)
    if fits(sample) and sample == n:
        return answers[sample][0]
    bare = size(keep(0))
    guess = (budget - bare) * sample // max(1, answers[sample][1] - bare)
    return answers[most_that_fit(n, fits, guess)][0]


def _budget_words(budget: int) -> str:
    return f"{budget // 1024} KB" if budget % 1024 == 0 else f"{budget:,} bytes"


def most_that_fit(high: int, fits: Callable[[int], bool], guess: int) -> int:
    """The largest k in [1, high] for which ``fits(k)`` (1 if none does), where fits holds up to some k and not
    past it. Probes the guess, then its neighbour, then bisects: two probes when the guess is right, about
    log2(high) when it is far off."""
    low, best, k = 1, 1, min(max(guess, 1), high)
    near = True  # the next probe is the guess's neighbour, on the side the guess pointed to
    while low <= high:
        if fits(k):
            best, low = k, k + 1
            k = low if near else (low + high) // 2
        else:
            high = k - 1
            k = high if near else (low + high) // 2
        near = False
    return best


G = TypeVar("G", bound=Logged)


def fit_log(answer: G, render: Callable[[G], str], *, reserve: int = 0) -> tuple[G, str]:
    """The one fitter, for a log: its whole answer as a client receives it (text and structured content,
    escaped as the guard will escape them) stays within its budget (RESPONSE_BUDGET_BYTES, or what the caller
    asked for: Logged.within). The oldest lines are left out, from the run that costs the most, and one note
    says how many; a single line left that alone does not fit keeps its start. The area's own ``lines`` (and
    ``max_bytes``) chose what was read; this only keeps the answer within what a client's context can take.
    """
    budget = answer.sent_budget

    def size(a: G, said: str | None = None) -> int:
        return sent_escaped_bytes(a.model_dump(mode="json", exclude_none=True), said or render(a)) + reserve

    said = render(answer)
    if size(answer, said) <= budget:
        return answer, said
    runs = answer.runs()
    left_out = cut = 0
    # measured with the longest note it can get: every line left out, one cut
    longest = _log_note(type(answer).next_step, sum(len(run.lines) for run in runs), 1, budget)

    def over() -> int:
        return size(answer.with_runs(runs, longest)) - budget

    excess = over()
    while excess > 0:
        costs = [sum(_line_cost(line) for line in run.lines) for run in runs]
        worst = max(range(len(runs)), key=costs.__getitem__, default=-1)
        if worst < 0 or not runs[worst].lines:
            break  # nothing left to cut: the headers alone
        run = runs[worst]
        if len(run.lines) > 1:  # the oldest lines, as many as the excess costs (the last one stays)
            drop = 0
            while drop < len(run.lines) - 1 and excess > 0:
                excess -= _line_cost(run.lines[drop])
                drop += 1
            runs[worst] = run.without_oldest(drop)
            left_out += drop
        else:  # one line that alone does not fit: keep what does, once
            chars = len(run.lines[0]) * (costs[worst] - excess) // max(1, costs[worst])
            runs[worst] = run.first_cut_to(max(0, chars))
            cut += 1
            if over() > 0:  # still too long: leave it out too
                runs[worst] = runs[worst].without_oldest(1)
                left_out += 1
        excess = over()
    fitted = answer.with_runs(runs, _log_note(type(answer).next_step, left_out, cut, budget))
    return fitted, render(fitted)


def _log_note(next_step: str, left_out: int, cut: int, budget: int) -> str:
    what = [f"{left_out} older line(s) left out, the newest kept"] if left_out else []
    what += [f"{cut} over-long line(s) cut"] if cut else []
    return (
        f"{', and '.join(what)}, to keep the whole answer within {budget:,} bytes as sent (every line goes "
        "twice, escaped: quotes, backslashes and control characters grow longer as sent)"
        f"{'; ' + next_step if next_step else ''}."
    )


def _line_cost(line: str) -> int:
    """What one line adds to the answer as sent: twice its escaped JSON string, a newline and a comma."""
    return 2 * (json_bytes(escape_controls(line)) - 2) + 4


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
