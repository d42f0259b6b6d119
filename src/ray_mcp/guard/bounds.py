"""Bounds on a tool result's structured content: cut long strings, maps and lists until it fits (re-exported
by guard/redaction/)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ray_mcp.limits import (
    MAX_MODEL_KEYS,
    STRUCTURED_CUT_FIELDS_CHARS,
    STRUCTURED_MAX_BYTES,
    STRUCTURED_MIN_BYTES,
    STRUCTURED_TEXT_FACTOR,
)
from ray_mcp.text import cut_counted, truncate_text

# How the cutting tightens until the content fits its bound (limits.STRUCTURED_*): (chars per string, keys per
# string map) at each step. Lists are already bounded by each tool's `limit` (and counted in its `shown`):
# they are cut, to these lengths in turn, only past STRUCTURED_MAX_BYTES.
_CUT_STEPS = ((8192, 500), (2048, 100), (512, 32), (128, 16), (32, 16))
_LIST_STEPS = (2000, 500, 100, 20, 5)
NO_LIST_CUT = 1 << 62


def json_size(obj: Any) -> int:
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).encode())


def _cut(obj: Any, chars: int, keys: int, items: int, cuts: list[str], path: str) -> Any:
    if isinstance(obj, str):
        if len(obj) > chars:
            cuts.append(path or "(top)")
            return cut_counted(obj, chars)
        return obj
    if isinstance(obj, Mapping):
        entries = list(obj.items())
        free_map = len(entries) > keys and all(isinstance(v, str) for _, v in entries)
        if free_map or len(entries) > MAX_MODEL_KEYS:
            cuts.append(path or "(top)")
            out = {k: _cut(v, chars, keys, items, cuts, f"{path}.{k}") for k, v in entries[:keys]}
            if free_map:
                out["…"] = f"[cut: {len(entries) - keys} more keys]"
            return out
        return {k: _cut(v, chars, keys, items, cuts, f"{path}.{k}" if path else str(k)) for k, v in entries}
    if isinstance(obj, list):
        kept = [_cut(v, chars, keys, items, cuts, f"{path}[{i}]") for i, v in enumerate(obj[:items])]
        if len(obj) > items:
            cuts.append(path or "(top)")
            if all(isinstance(v, str) for v in obj):
                kept.append(f"… [cut: {len(obj) - items} more items]")
        return kept
    return obj


def bound_structured(structured: dict[str, Any], text_bytes: int) -> tuple[dict[str, Any], str | None]:
    """Cut structured content that outgrows its bound, field by field, with a marker at each cut.

    Long strings and string maps (entrypoints, messages, metadata) are what grows without bound; lists are
    bounded by each tool's limit, so they are cut only past STRUCTURED_MAX_BYTES.
    Returns the content and a note for the text (None when nothing was cut). Strings end in
    ``… [cut: N more characters]``; string maps get a ``"…"`` key; lists of strings a last item; the note is
    also appended to the content's ``hints`` (or ``notes``) when it has them.
    """
    limit = min(STRUCTURED_MAX_BYTES, max(STRUCTURED_MIN_BYTES, STRUCTURED_TEXT_FACTOR * text_bytes))
    size = json_size(structured)
    if size <= limit:
        return structured, None
    out: dict[str, Any] = structured
    cuts: list[str] = []
    for chars, keys in _CUT_STEPS:
        cuts = []
        out = _cut(structured, chars, keys, NO_LIST_CUT, cuts, "")
        if json_size(out) <= limit - 512:
            break
    else:
        for items in _LIST_STEPS:  # still huge: a list past any tool's limit
            if json_size(out) <= STRUCTURED_MAX_BYTES - 512:
                break
            out = _cut(out, 32, 16, items, cuts, "")
    if not cuts:  # over the bound only by lists a limit already bounds: nothing to cut
        return structured, None
    fields = ", ".join(dict.fromkeys(cuts))
    note = (
        f"Structured content cut from {size} to about {limit} bytes (fields: {truncate_text(fields, STRUCTURED_CUT_FIELDS_CHARS)}); the text above "
        "is the full answer within its bounds."
    )
    for key in ("hints", "notes"):
        if isinstance(out.get(key), list):
            out[key] = [*out[key], note]
            break
    return out, note
