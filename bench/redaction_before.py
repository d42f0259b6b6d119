"""The redaction of ray-mcp at 0dbea0b (shaping.py), kept verbatim so that bench/redaction.py can time it."""

# ruff: noqa
# mypy: ignore-errors
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
# -- redaction -----------------------------------------------------------------------------------------------

REDACTED = "***"
# Names of fields and variables whose values are secrets: *SECRET*, *PASSWORD*, and *_TOKEN, *_KEY, ...
SECRET_KEY = re.compile(
    r"(?i)(secret|passw(or)?d|passphrase|credential|authorization|cookie|(^|[_.-])(token|api[_-]?key|key|auth)$)"
)


def is_secret_key(key: object) -> bool:
    """A field whose value is a secret. Confirmation tokens are not: the agent must be able to send them back."""
    return isinstance(key, str) and not key.startswith("confirm") and SECRET_KEY.search(key) is not None


_SECRET_NAME = (
    r"[\w.-]*(?:secret|passw(?:or)?d)[\w.-]*|[\w.-]*(?:token|api[_-]?key|_key|credentials?|passphrase)\b"
)
_PLACEHOLDER = r"(?![<$*{.…])"  # <token>, $TOKEN, ${env:TOKEN}, ***, ...: documentation, not secrets
_SECRET_TEXT: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # NAME=value (env and shell style), any secret-looking name
    (re.compile(rf"""(?i)(\b(?:{_SECRET_NAME})\s*=\s*)(["']?){_PLACEHOLDER}([^\s"',}}]+)"""), r"\1\2***"),
    # "NAME": "value" (JSON, Python reprs)
    (re.compile(rf"""(?i)(["'](?:{_SECRET_NAME})["']\s*:\s*)(["']){_PLACEHOLDER}([^"']+)"""), r"\1\2***"),
    # NAME: value (YAML, logs) where NAME is an identifier such as HF_TOKEN or PASSWORD, not a prose word
    (
        re.compile(
            rf"""(\b(?=[\w.-]*[_A-Z])(?:[A-Z0-9_.-]*(?:SECRET|PASSWORD|PASSWD|TOKEN|KEY|CREDENTIALS?)[A-Z0-9_.-]*|[\w.-]+_(?:token|secret|password|passwd|key|api_key))\s*:\s*)(["']?){_PLACEHOLDER}([^\s"',}}]+)"""
        ),
        r"\1\2***",
    ),
    (
        re.compile(
            r"(?i)\b(authorization\s*[:=]\s*)(?!(?:(?:bearer|basic|token)\s+)?[<$*{.…])(?:(bearer|basic|token)\s+)?\S+"
        ),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}***",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"), "Bearer ***"),
    (re.compile(r"\b(?:hf|sk|ghp|gho|ghs|ghu|github_pat|xox[abp]|glpat)[-_][A-Za-z0-9_-]{16,}\b"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
]


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Mask what looks like a token, password or key in free text (log lines, messages, rendered answers)."""
    for secret in sorted({s for s in extra_secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, replacement in _SECRET_TEXT:
        text = pattern.sub(replacement, text)
    return text


def secret_values(obj: Any) -> set[str]:
    """Values that must never be shown: every ``env_vars`` value and every value under a secret-looking key."""
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                found.update(str(v) for v in value.values() if isinstance(v, str | int | float) and str(v))
            elif is_secret_key(key) and isinstance(value, str) and value:
                found.add(value)
            else:
                found |= secret_values(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            found |= secret_values(item)
    return found


def redact(obj: Any, extra_secrets: Iterable[str] = ()) -> Any:
    """Redact a JSON-like structure: env_vars values, secret-named fields, and secrets inside strings."""
    extra = set(extra_secrets) | secret_values(obj)
    return _redact(obj, extra)


def _redact(obj: Any, extra: set[str]) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, extra)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                out[key] = {k: REDACTED for k in value}
            elif is_secret_key(key) and isinstance(value, str):
                out[key] = REDACTED
            else:
                out[key] = _redact(value, extra)
        return out
    if isinstance(obj, list):
        return [_redact(item, extra) for item in obj]
    return obj


# -- jobs ---------------------------------------------------------------------------------------------------
