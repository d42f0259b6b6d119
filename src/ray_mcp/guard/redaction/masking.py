"""Masking: the one pipeline for one string (``clean_text``, ``redact_text``) and for a structure (``redact``,
``redact_tree``): known values (registry.py), secret shapes (shapes.py), then control characters
(controls.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ray_mcp.guard.redaction.controls import escape_controls
from ray_mcp.guard.redaction.known import KnownValues
from ray_mcp.guard.redaction.names import is_secret_key, secret_values
from ray_mcp.guard.redaction.registry import SECRETS, SecretRegistry
from ray_mcp.guard.redaction.shapes import REDACTED, mask_shapes, mask_spans, shapes_and_controls
from ray_mcp.limits import EXTRA_SECRETS_MAX

MEMO_MAX_CHARS = 64  # strings this short are remembered once cleaned (per registry view) ...
MEMO_MAX_ENTRIES = 16_384  # ... up to this many


def _clean_memo(text: str, matchers: tuple[KnownValues, ...], memo: dict[str, str] | None) -> str:
    """``_clean`` for the strings of a result: the short ones (field names, states, class names) once each."""
    if memo is None or len(text) > MEMO_MAX_CHARS:
        return _clean(text, matchers)
    cleaned = memo.get(text)
    if cleaned is None:
        cleaned = _clean(text, matchers)
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        memo[text] = cleaned
    return cleaned


def _clean(text: str, matchers: tuple[KnownValues, ...], *, escape: bool = True) -> str:
    if not text:
        return text
    spans = [span for matcher in matchers for span in matcher.spans(text)]
    shapes, controls = shapes_and_controls(text)
    if spans:
        text = mask_spans(text, spans)
    if shapes:
        text = mask_shapes(text)
    return escape_controls(text) if controls and escape else text


def _extra(values: Iterable[object]) -> KnownValues | None:
    """KnownValues of one call or one structure only (never the registry's), at most EXTRA_SECRETS_MAX of them."""
    usable = {v for v in map(SecretRegistry.usable, values) if v is not None}
    return KnownValues(sorted(usable, key=len, reverse=True)[:EXTRA_SECRETS_MAX]) if usable else None


def _matchers(extra_secrets: Iterable[str]) -> tuple[KnownValues, ...]:
    extra = _extra(extra_secrets)
    known = SECRETS.view.matchers
    return (*known, extra) if extra is not None else known


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Mask known secrets and secret shapes in free text (log lines, messages); control characters stay."""
    return _clean(text, _matchers(extra_secrets), escape=False)


def clean_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """What every string of a result goes through, once: ``redact_text``, then ``escape_controls``."""
    return _clean(text, _matchers(extra_secrets))


def redact(obj: Any, extra_secrets: Iterable[str] = ()) -> Any:
    """Redact a JSON-like structure: env_vars values, secret-named fields, secrets and control characters in
    every string (keys included). The structure's own ``env_vars`` values are masked wherever they occur."""
    return _redact(obj, _matchers(set(extra_secrets) | secret_values(obj)), None, [])


def redact_tree(obj: Any) -> Any:
    """Redact a JSON-like structure once, with the registry. The secrets it carries (``env_vars`` values,
    secret-named fields) are masked wherever they occur in it (the rare structure that has some is redone with
    them), and only in it: what a structure carries never joins the registry."""
    view = SECRETS.view
    found: list[str] = []
    out = _redact(obj, view.matchers, view.memo, found)
    extra = _extra(found) if found else None
    if extra is not None:
        out = _redact(obj, (*view.matchers, extra), None, [])
    return out


_SCALARS = (int, float, bool, type(None))


def _redact(
    obj: Any, matchers: tuple[KnownValues, ...], memo: dict[str, str] | None, found: list[str]
) -> Any:
    kind = type(obj)
    if kind is str:
        return _clean_memo(obj, matchers, memo)
    if kind in _SCALARS:
        return obj
    if kind is dict or isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            name = _clean_memo(key, matchers, memo) if type(key) is str else key
            if key == "env_vars" and isinstance(value, Mapping):
                found.extend(str(v) for v in value.values() if isinstance(v, str | int | float))
                out[name] = {
                    (_clean_memo(k, matchers, memo) if isinstance(k, str) else k): REDACTED for k in value
                }
            elif type(value) is str and is_secret_key(key):
                found.append(value)
                out[name] = REDACTED
            else:
                out[name] = _redact(value, matchers, memo, found)
        return out
    if kind is list or kind is tuple:
        return [_redact(item, matchers, memo, found) for item in obj]
    if isinstance(obj, str):
        return _clean(str(obj), matchers)
    return obj
