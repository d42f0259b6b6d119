"""Secret shapes: the patterns detect-secrets lacks (``--password x``, ``NAME=value``, ``Password: x``,
``scheme://user:pass@host``, ``Authorization:`` headers, private key blocks, Hugging Face, GCP and Azure keys) and
detect-secrets' own detectors (detectors.py). One static Aho-Corasick pass finds their anchors and control
characters together: a string with no anchor is not matched against them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import ahocorasick

from ray_mcp.guard.redaction.controls import CONTROL_CHARS
from ray_mcp.guard.redaction.detectors import detected
from ray_mcp.guard.redaction.known import SHORT_SECRET_CHARS

REDACTED = "***"


# A secret's name: with secret/password/passphrase/credential anywhere, or ending in token, key, pwd, ...
# (never a longer word: max_new_tokens, tokenizer, pad_token_id and monkey are not secret names).
_NAME = (
    r"(?:[\w.-]*(?:secret|passw(?:or)?d|passphrase|credential)[\w.-]*"
    r"|[\w.-]*(?:pwd|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|token|[_.-]key))(?![\w])"
)
_PLACEHOLDER = r"(?![<$*{…]|\.\.\.)"  # <token>, $TOKEN, ${env:TOKEN}, ***, ...: documentation, not secrets
_VALUE = r"[^\s\"',;}\]]+"
_SCHEMES = "bearer|basic|token|digest|negotiate"


def _prose_or_code(value: str, rest: str) -> bool:
    """An English word followed by more words (``token: use one of``), a small number, or a code expression."""
    if value.isalpha() and (value.islower() or value.istitle()) and re.match(r"[ \t]+[A-Za-z(]", rest):
        return True
    if re.fullmatch(r"[fFrRbBuU]{1,2}", value) and rest[:1] in ("'", '"'):  # a string prefix: f"Bearer {x}"
        return True
    if value.isdigit() and len(value) <= 3:
        return True
    return re.match(r"[A-Za-z_][\w.]*[(\[]", value) is not None


def _keyed(prefix_groups: int) -> Callable[[re.Match[str]], str]:
    def replace(m: re.Match[str]) -> str:
        value = m.group(prefix_groups + 1)
        if _prose_or_code(value, m.string[m.end() :]):
            return m.group(0)
        return "".join(m.group(i) or "" for i in range(1, prefix_groups + 1)) + REDACTED

    return replace


_SHAPES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # -----BEGIN ... PRIVATE KEY----- ... -----END ... PRIVATE KEY----- (or to the end, when cut)
    (
        re.compile(
            r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        "-----BEGIN PRIVATE KEY-----***-----END PRIVATE KEY-----",
    ),
    # scheme://user:password@host
    (
        re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)([^\s@/]+)(@)"),
        lambda m: f"{m[1]}{REDACTED}{m[3]}",
    ),
    # Authorization: Bearer x / Basic x / x; Proxy-Authorization too
    (
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            rf"(?!(?:(?:{_SCHEMES})\s+)?(?:[<$*{{…]|\.\.\.))((?:{_SCHEMES})\s+)?({_VALUE})"
        ),
        lambda m: (
            m[0]
            if not m[2] and _prose_or_code(m[3], m.string[m.end() :])
            else f"{m[1]}{m[2] or ''}{REDACTED}"
        ),
    ),
    (re.compile(r"(?i)(\b(?:set-)?cookie\s*:\s*)[^\r\n]+"), r"\1***"),
    # a bare bearer token (with a digit: "Bearer authentication" is prose)
    (re.compile(r"(?i)\b(bearer\s+)(?=[\w.~+/=-]*\d)[\w.~+/=-]{8,}"), r"\1***"),
    # --password x, --api-key=x, -p? no: flags named like secrets only
    (
        re.compile(rf"(?i)((?<![\w-])--?{_NAME})(=|[ \t]+)([\"']?){_PLACEHOLDER}(?!-)({_VALUE})"),
        _keyed(3),
    ),
    # NAME=value (env and shell style), "NAME": "value" (JSON, reprs), NAME: value (YAML, logs, headers)
    (re.compile(rf"(?i)(\b{_NAME})(\s*=\s*)([\"']?){_PLACEHOLDER}({_VALUE})"), _keyed(3)),
    (re.compile(rf"(?i)([\"']{_NAME}[\"']\s*:\s*)([\"']){_PLACEHOLDER}([^\"'\n]+)"), _keyed(2)),
    (re.compile(rf"(?i)(\b{_NAME})(\s*:[ \t]*)([\"']?){_PLACEHOLDER}({_VALUE})"), _keyed(3)),
    # JSON Web Tokens, signature included (the detector below stops before it)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"), REDACTED),
    # tokens the detectors below lack or know in an older format
    (
        re.compile(
            r"\b(?:hf|sk|rk|pk|ghp|gho|ghs|ghu|ghr|github_pat|glpat|npm|xox[abposr])[-_][A-Za-z0-9_-]{16,}"
        ),
        REDACTED,
    ),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), REDACTED),  # Google API key
    (re.compile(r"\bya29\.[0-9A-Za-z_-]{20,}"), REDACTED),  # Google OAuth access token
    (re.compile(r"(?i)(\bsig=)[A-Za-z0-9%+/=]{16,}"), r"\1***"),  # Azure SAS signature
    (re.compile(r"(?i)(\b(?:AccountKey|SharedAccessKey)=)[A-Za-z0-9+/=]{16,}"), r"\1***"),
]


def mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """Mask every span; overlapping and touching spans become one mask."""
    merged: list[list[int]] = []
    for start, stop in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    out, pos = [], 0
    for start, stop in merged:
        out += [text[pos:start], REDACTED]
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _occurrences(text: str, value: str) -> Iterator[tuple[int, int]]:
    start = text.find(value)
    while start >= 0:
        yield start, start + len(value)
        start = text.find(value, start + 1)


def mask_shapes(text: str) -> str:
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    found = {s for s in detected(text) if len(s) >= SHORT_SECRET_CHARS}
    if not found:
        return text
    # all at once: replacing one find at a time would leave the rest of an overlapping one visible
    return mask_spans(text, [span for secret in found for span in _occurrences(text, secret)])


# Lower-case substrings without which no shape nor detector above can match, found in one pass
# (Aho-Corasick) over the lower-cased text. "token" and "key" count only at the end of a word.
_ANCHORS = (
    "passw",
    "passphrase",
    "secret",
    "credential",
    "pwd",
    "key",
    "token",
    "authorization",
    "cookie",
    "bearer",
    "sig=",
    "-----begin",
    "putty",
    "aws",
    "xox",
    "hooks.slack",
    "eyj",
    "ya29.",
    "://",
    "hf_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat",
    "glpat-",
    "gldt-",
    "glft-",
    "glsoat-",
    "glrt-",
    "glcbt-",
    "glimt-",
    "glptt-",
    "glagent-",
    "gloas-",
    "gr1348941",
    "npm_",
    "sk-",
    "sk_",
    "rk_",
    "pk_",
    "pypi-",
    "sg.",
    "a3t",
    "abia",
    "acca",
    "akia",
    "asia",
    "aiza",
    "sq0",
)
_WORD_END_ANCHORS = frozenset({"key", "token"})


def _anchor_automaton() -> Any:
    automaton = ahocorasick.Automaton()
    for anchor in _ANCHORS:
        automaton.add_word(anchor, anchor)
    for ch in CONTROL_CHARS:
        automaton.add_word(ch, None)
    automaton.make_automaton()
    return automaton


_ANCHOR_AUTOMATON = _anchor_automaton()


def shapes_and_controls(text: str) -> tuple[bool, bool]:
    """(whether a secret shape may be present, whether control characters are), in one pass."""
    lower = text.lower()
    shapes = controls = False
    for end, anchor in _ANCHOR_AUTOMATON.iter(lower):
        if anchor is None:
            controls = True
        elif not shapes:
            if anchor in _WORD_END_ANCHORS and end + 1 < len(lower):
                after = lower[end + 1]
                if after.isalnum() or after == "_":
                    continue
            if anchor == "://" and "@" not in lower[end:]:
                continue  # a URL holds a credential only as scheme://user:password@host
            shapes = True
        if shapes and controls:
            break
    return shapes, controls
