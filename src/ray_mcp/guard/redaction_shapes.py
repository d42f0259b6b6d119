"""Secret shapes: values that look like credentials (keyed assignments, auth headers, known token formats and
the detectors of detect-secrets, in redaction_detectors.py), masked by redaction.py."""

from __future__ import annotations

import re
from collections.abc import Callable

from ray_mcp.guard.redaction_detectors import compiled, detected

REDACTED = "***"
SHORT_SECRET_CHARS = 4  # values shorter than this are masked only where they stand as whole words

# A secret's name: with secret/password/passphrase/credential anywhere, or ending in token, key, pwd, ...
# (never a longer word: max_new_tokens, tokenizer, pad_token_id and monkey are not secret names).
_NAME = (
    r"(?:[\w.-]*(?:secret|passw(?:or)?d|passphrase|credential)[\w.-]*"
    r"|[\w.-]*(?:pwd|api[_-]?key|apikey|access[_-]?key|account[_-]?key|private[_-]?key|token|[_.-]key))(?![\w])"
)
_PLACEHOLDER = r"(?![<$*{…]|\.\.\.)"  # <token>, $TOKEN, ${env:TOKEN}, ***, ...: documentation, not secrets
_VALUE = r"[^\s\"',;}\]]+"
_SCHEMES = "bearer|basic|token|digest|negotiate"


def _keep(group: int) -> Callable[[re.Match[str]], str]:
    """Keep the text before the value (``group`` groups), mask the value."""
    return lambda m: "".join(m.group(i) or "" for i in range(1, group + 1)) + REDACTED


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


def preload_detectors() -> None:
    """Compile the detectors' patterns now (the warm-up; a few ms, no library import: redaction_detectors)."""
    compiled()


def _mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    spans.sort()
    out, pos = [], 0
    for start, stop in spans:
        if stop <= pos:
            continue
        out.append(text[pos : max(pos, start)])
        pos = stop
        out.append(REDACTED)
    out.append(text[pos:])
    return "".join(out)


def _mask_shapes(text: str) -> str:
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    found = {s for s in detected(text) if len(s) >= SHORT_SECRET_CHARS}
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
