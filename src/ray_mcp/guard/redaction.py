"""What leaves the server is safe to show: known secrets and secret shapes masked, control characters made
visible, structured content bounded.

Three parts, used by the one choke point in middleware.py (every tool result, resource, prompt, progress
notification, error and audit line) and by the logging hook (the server's own stderr):

* ``SECRETS``, the process-wide registry of secret *values* the server knows of: the ``env_vars`` values of
  every job it has read or submitted, Ray's token, ray-mcp's bearer token, configured dashboard header values.
  Thread-safe and bounded; matched in one pass (Aho-Corasick). Values of 4 characters or more are masked
  wherever they occur; shorter ones where they stand as whole words.
* secret *shapes*: the detectors of the ``detect-secrets`` library (AWS, GitHub, GitLab, Slack, Stripe, JWT,
  OpenAI, PyPI, npm, SendGrid, ...) plus the shapes they lack (``--password x``, ``NAME=value``, ``Password: x``,
  ``scheme://user:pass@host``, ``Authorization:`` headers, private key blocks, Hugging Face, GCP and Azure
  keys). The same Aho-Corasick pass finds their anchors: a string with none is not matched against them.
* ``escape_controls``: ESC, BEL, CR, BS, other C0/C1, bidi overrides and zero-width characters become visible
  escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector

from ray_mcp.guard.bounds import bound_structured as bound_structured

MAX_KNOWN_SECRETS = 4096  # learned values kept (oldest forgotten first); configured credentials are pinned
MAX_SECRET_CHARS = 4096  # a longer value is registered by its first MAX_SECRET_CHARS characters
# env_vars values that configure rather than authenticate: masking them everywhere would mangle every answer
NOT_SECRET_VALUES = frozenset(
    {"true", "false", "yes", "no", "on", "off", "none", "null", "auto", "debug", "info", "warn", "warning",
     "error", "critical"}
)  # fmt: skip

# Names of fields and variables whose values are secrets: *SECRET*, *PASSWORD*, and *_TOKEN, *_KEY, ...
SECRET_KEY = re.compile(
    r"(?i)(secret|passw(or)?d|passphrase|credential|authorization|cookie|(^|[_.-])(token|api[_-]?key|key|auth)$)"
)


def is_secret_key(key: object) -> bool:
    """A field whose value is a secret. Confirmation tokens are not: the agent must be able to send them back."""
    return isinstance(key, str) and _is_secret_name(key)


@functools.lru_cache(maxsize=4096)
def _is_secret_name(key: str) -> bool:
    return not key.startswith("confirm") and SECRET_KEY.search(key) is not None


# -- secret shapes ----------------------------------------------------------------------------------------------

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


# detect-secrets' detectors that redaction uses. Not the entropy and keyword plugins (Ray ids and prose trip
# them), nor Discord, Telegram, Twilio and Mailchimp (shapes with no literal anchor: they match within ids and
# hashes). Each yields what it finds in a string (analyze_string); a JWT only when its parts decode.
DETECTORS = (
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    BasicAuthDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    JwtTokenDetector(),
    NpmDetector(),
    OpenAIDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
)


def detected(text: str) -> Iterator[str]:
    """Every secret value detect-secrets' detectors find in ``text``."""
    for detector in DETECTORS:
        yield from detector.analyze_string(text)


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


# -- the registry of known secret values -------------------------------------------------------------------


def _is_word_char(ch: str) -> bool:
    return ch.isalnum()


# Lower-case substrings without which no shape nor detector above can match, found in one pass
# (Aho-Corasick) over the lower-cased text. "token" and "key" count only at the end of a word.
_ANCHORS = (
    "passw", "passphrase", "secret", "credential", "pwd", "key", "token", "authorization", "cookie", "bearer",
    "sig=", "-----begin", "putty", "aws", "xox", "hooks.slack", "eyj", "ya29.", "://", "hf_", "ghp_", "gho_",
    "ghs_", "ghu_", "ghr_", "github_pat", "glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-",
    "glptt-", "glagent-", "gloas-", "gr1348941", "npm_", "sk-", "sk_", "rk_", "pk_", "pypi-", "sg.",
    "a3t", "abia", "acca", "akia", "asia", "aiza", "sq0",
)  # fmt: skip
_WORD_END_ANCHORS = frozenset({"key", "token"})
# C0 but newline and tab, DEL, C1, and the invisible format characters that reorder or hide text.
_CONTROL_CHARS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]] + [
    "\u061c", "\u180e", *map(chr, range(0x200B, 0x2010)), *map(chr, range(0x2028, 0x202F)),
    *map(chr, range(0x2060, 0x206A)), "\ufeff", "\ufff9", "\ufffa", "\ufffb",
]  # fmt: skip
_CONTROL = re.compile("[" + "".join(_CONTROL_CHARS) + "]")
_SECRET, _ANCHOR, _CONTROL_KIND = 0, 1, 2


class _Matcher:
    """An immutable snapshot of the registry: one Aho-Corasick automaton over the lower-cased text that finds, in
    one pass, every known secret value, every shape anchor and every control character."""

    def __init__(self, values: Iterable[str], *, anchors: bool = True) -> None:
        import ahocorasick

        entries: dict[str, list[tuple[int, str, frozenset[str]]]] = {}
        by_lower: dict[str, set[str]] = {}
        for value in values:
            if value:
                by_lower.setdefault(value.lower(), set()).add(value)
        for lower, originals in by_lower.items():
            entries.setdefault(lower, []).append((_SECRET, lower, frozenset(originals)))
        if anchors:
            for anchor in _ANCHORS:
                entries.setdefault(anchor, []).append((_ANCHOR, anchor, frozenset()))
            for ch in _CONTROL_CHARS:
                entries.setdefault(ch, []).append((_CONTROL_KIND, ch, frozenset()))
        self.automaton: Any = None
        self.memo: dict[
            str, str
        ] = {}  # short strings already cleaned with this snapshot (keys, states, names)
        if entries:
            automaton = ahocorasick.Automaton()
            for word, found in entries.items():
                automaton.add_word(word, tuple(found))
            automaton.make_automaton()
            self.automaton = automaton

    def scan(self, text: str) -> tuple[list[tuple[int, int]], bool, bool]:
        """(spans of known secrets to mask, whether a shape may be present, whether control characters are).

        Long values are masked anywhere, short ones where they stand as whole words.
        """
        if self.automaton is None or not text:
            return [], False, False
        lower = text.lower()
        if len(lower) != len(text):  # a character whose lower case is longer (İ): keep offsets aligned
            lower = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
        spans: list[tuple[int, int]] = []
        shapes = controls = False
        for end, found in self.automaton.iter(lower):
            for kind, word, originals in found:
                if kind == _SECRET:
                    start, stop = end - len(word) + 1, end + 1
                    if text[start:stop] not in originals:
                        continue
                    if len(word) < SHORT_SECRET_CHARS and (
                        (start > 0 and _is_word_char(text[start - 1]))
                        or (stop < len(text) and _is_word_char(text[stop]))
                    ):
                        continue
                    spans.append((start, stop))
                elif kind == _ANCHOR:
                    if word in _WORD_END_ANCHORS and end + 1 < len(lower):
                        after = lower[end + 1]
                        if after.isalnum() or after == "_":
                            continue
                    if word == "://" and "@" not in lower[end:]:
                        continue  # a URL holds a credential only as scheme://user:password@host
                    shapes = True
                else:
                    controls = True
        return spans, shapes, controls


class SecretRegistry:
    """The secret values the server knows of. Thread-safe; bounded (learned values: oldest forgotten first)."""

    def __init__(self, max_values: int = MAX_KNOWN_SECRETS) -> None:
        self._lock = threading.Lock()
        self._pinned: set[str] = set()
        self._learned: OrderedDict[str, None] = OrderedDict()
        self._max = max_values
        self._matcher: _Matcher | None = None
        self._known_jobs: OrderedDict[str, None] = OrderedDict()

    @staticmethod
    def _usable(value: object) -> str | None:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        text = str(value).strip()[:MAX_SECRET_CHARS]
        if not text or text.lower() in NOT_SECRET_VALUES or (text.isdigit() and len(text) <= 2):
            return None
        return text

    def add(self, values: Iterable[object], *, pinned: bool = False) -> bool:
        """Remember secret values (``pinned``: configured credentials, never forgotten). True if any was new."""
        fresh = [v for v in (self._usable(value) for value in values) if v is not None]
        if not fresh:
            return False
        with self._lock:
            changed = False
            for value in fresh:
                if pinned:
                    changed |= value not in self._pinned
                    self._pinned.add(value)
                elif value in self._learned:
                    self._learned.move_to_end(value)
                else:
                    self._learned[value] = None
                    changed = True
            while len(self._learned) > self._max:
                self._learned.popitem(last=False)
                changed = True
            if changed:
                self._matcher = None
            return changed

    def learn(self, obj: Any) -> None:
        """Remember the secrets a JSON-like structure carries (``env_vars`` values, secret-named fields)."""
        found = secret_values(obj)
        if found:
            self.add(found)

    def learn_job(self, details: Mapping[str, Any]) -> None:
        """Remember a job's ``runtime_env.env_vars`` values (from Ray's job details, any shape)."""
        self.learn(details)
        with self._lock:
            for key in ("submission_id", "job_id"):
                ident = details.get(key)
                if isinstance(ident, str) and ident:
                    self._known_jobs[ident] = None
                    self._known_jobs.move_to_end(ident)
            while len(self._known_jobs) > self._max:
                self._known_jobs.popitem(last=False)

    def knows_job(self, job: str) -> bool:
        with self._lock:
            return job in self._known_jobs

    def matcher(self) -> _Matcher:
        with self._lock:
            matcher = self._matcher
            if matcher is None:
                matcher = self._matcher = _Matcher([*self._pinned, *self._learned])
            return matcher

    def __contains__(self, value: object) -> bool:
        with self._lock:
            return value in self._pinned or value in self._learned

    def __len__(self) -> int:
        with self._lock:
            return len(self._pinned) + len(self._learned)


SECRETS = SecretRegistry()


def credential_values(header_value: str) -> list[str]:
    """A configured header value and, for ``Bearer x`` / ``Basic x``, the credential alone."""
    parts = header_value.strip().split(None, 1)
    return (
        [header_value, parts[1]]
        if len(parts) == 2 and len(parts[1]) >= SHORT_SECRET_CHARS
        else [header_value]
    )


def remember_settings_secrets(settings: Any) -> None:
    """Pin every credential the settings name: bearer token, Ray's token (setting or file), header values."""
    values: list[str] = []
    for getter in ("resolved_auth_token", "resolved_ray_auth_token"):
        try:
            value = getattr(settings, getter)()
        except (OSError, ValueError):
            value = None
        if value:
            values.append(value)
    for path in (getattr(settings, "ray_auth_token_path", None), Path.home() / ".ray" / "auth_token"):
        try:
            if path is not None and Path(path).is_file() and Path(path).stat().st_size <= MAX_SECRET_CHARS:
                values.append(Path(path).read_text(encoding="utf-8", errors="replace").strip())
        except OSError:
            pass
    for value in (getattr(settings, "dashboard_headers", None) or {}).values():
        values.extend(credential_values(str(value)))
    SECRETS.add(values, pinned=True)


# -- control characters -------------------------------------------------------------------------------------


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def escape_controls(text: str) -> str:
    """Make control and invisible formatting characters visible; newlines and tabs stay (CRLF becomes LF)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text.replace("\r\n", "\n"))


# -- the whole pipeline for one string and for a structure ----------------------------------------------------


MEMO_MAX_CHARS = 64  # strings this short are remembered once cleaned (per registry snapshot) ...
MEMO_MAX_ENTRIES = 16_384  # ... up to this many


def _clean_memo(text: str, matchers: tuple[_Matcher, ...]) -> str:
    """``_clean`` for the strings of a result: the short ones (field names, states, class names) once each."""
    if len(text) > MEMO_MAX_CHARS or len(matchers) != 1:
        return _clean(text, matchers)
    memo = matchers[0].memo
    cleaned = memo.get(text)
    if cleaned is None:
        cleaned = _clean(text, matchers)
        if len(memo) >= MEMO_MAX_ENTRIES:
            memo.clear()
        memo[text] = cleaned
    return cleaned


def _clean(text: str, matchers: tuple[_Matcher, ...], *, escape: bool = True) -> str:
    spans: list[tuple[int, int]] = []
    shapes = controls = False
    for matcher in matchers:
        found, may_shape, has_controls = matcher.scan(text)
        spans += found
        shapes |= may_shape
        controls |= has_controls
    if spans:
        text = _mask_spans(text, spans)
    if shapes:
        text = _mask_shapes(text)
    return escape_controls(text) if controls and escape else text


def _matchers(extra_secrets: Iterable[str]) -> tuple[_Matcher, ...]:
    extra = [s for s in extra_secrets if s]
    known = SECRETS.matcher()
    return (known, _Matcher(extra, anchors=False)) if extra else (known,)


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Mask known secrets and secret shapes in free text (log lines, messages); control characters stay."""
    return _clean(text, _matchers(extra_secrets), escape=False)


def clean_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """What every string of a result goes through, once: ``redact_text``, then ``escape_controls``."""
    return _clean(text, _matchers(extra_secrets))


def secret_values(obj: Any) -> set[str]:
    """Values that must never be shown: every ``env_vars`` value and every value under a secret-looking key."""
    found: set[str] = set()
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            if key == "env_vars" and isinstance(value, Mapping):
                found.update(str(v) for v in value.values() if isinstance(v, str | int | float) and str(v))
            elif is_secret_key(key) and isinstance(value, str) and value:
                found.add(value)
            elif isinstance(value, Mapping | list | tuple):
                found |= secret_values(value)
    elif isinstance(obj, list | tuple):
        for item in obj:
            if isinstance(item, Mapping | list | tuple):
                found |= secret_values(item)
    return found


def redact(obj: Any, extra_secrets: Iterable[str] = ()) -> Any:
    """Redact a JSON-like structure: env_vars values, secret-named fields, secrets and control characters in
    every string (keys included). The structure's own ``env_vars`` values are masked wherever they occur."""
    return _redact(obj, _matchers(set(extra_secrets) | secret_values(obj)), [])


def redact_tree(obj: Any) -> Any:
    """Redact a JSON-like structure once, with the registry; the secrets it carries (``env_vars`` values,
    secret-named fields) join the registry, and the rare structure that brought new ones is redone with them."""
    found: list[str] = []
    out = _redact(obj, (SECRETS.matcher(),), found)
    if found and SECRETS.add(found):
        out = _redact(obj, (SECRETS.matcher(),), [])
    return out


_SCALARS = (int, float, bool, type(None))


def _redact(obj: Any, matchers: tuple[_Matcher, ...], found: list[str]) -> Any:
    kind = type(obj)
    if kind is str:
        return _clean_memo(obj, matchers)
    if kind in _SCALARS:
        return obj
    if kind is dict or isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            name = _clean_memo(key, matchers) if type(key) is str else key
            if key == "env_vars" and isinstance(value, Mapping):
                found.extend(str(v) for v in value.values() if isinstance(v, str | int | float))
                out[name] = {(_clean_memo(k, matchers) if isinstance(k, str) else k): REDACTED for k in value}
            elif type(value) is str and is_secret_key(key):
                found.append(value)
                out[name] = REDACTED
            else:
                out[name] = _redact(value, matchers, found)
        return out
    if kind is list or kind is tuple:
        return [_redact(item, matchers, found) for item in obj]
    if isinstance(obj, str):
        return _clean(str(obj), matchers)
    return obj


# -- the server's own logs ----------------------------------------------------------------------------------------

_log_hook_lock = threading.Lock()
_log_hook_installed = False


def _redact_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: let logging report it as it would
        return record
    redacted = redact_text(message)
    if redacted != message:
        _redact_message(record, redacted)
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact_text(record.stack_info)
    return record


def _redact_message(record: logging.LogRecord, redacted: str) -> None:
    """Mask a record's secret, keeping its arguments where it can: formatters such as uvicorn's access log
    unpack ``record.args``, so they stay a tuple of the same length whenever masking them is enough."""
    args = record.args
    if isinstance(args, tuple) and args and isinstance(record.msg, str):
        record.msg = redact_text(record.msg)
        record.args = tuple(redact_text(a) if isinstance(a, str) else a for a in args)
        try:
            if record.getMessage() == redacted:
                return
        except Exception:  # a masked argument no longer fits its %-format
            pass
    record.msg, record.args = redacted, None


def install_log_redaction() -> None:
    """Redact every log record of the process (ray_mcp, mcp, uvicorn, asyncio, Ray), tracebacks included, and
    uncaught exceptions (main thread and other threads). Idempotent."""
    global _log_hook_installed
    with _log_hook_lock:
        if _log_hook_installed:
            return
        make_record = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return _redact_record(make_record(*args, **kwargs))

        logging.setLogRecordFactory(factory)
        sys.excepthook = _redacting_excepthook
        threading.excepthook = _redacting_thread_excepthook
        _log_hook_installed = True


def _redacting_excepthook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
    sys.stderr.write(redact_text("".join(traceback.format_exception(exc_type, exc, tb))))
    sys.stderr.flush()


def _redacting_thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
    sys.stderr.write(redact_text(f"Exception in thread {name}:\n{text}"))
    sys.stderr.flush()
