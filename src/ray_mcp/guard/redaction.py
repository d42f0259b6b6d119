"""What leaves the server is safe to show: known secrets and secret shapes masked, control characters made
visible, structured content bounded.

Three parts, used by the one choke point in middleware.py (every tool result, resource, prompt, progress
notification, error and audit line) and by the logging hook (the server's own stderr):

* ``SECRETS``, the process-wide registry of secret *values* the server knows of: Ray's token, ray-mcp's bearer
  token, configured dashboard header values, and the ``env_vars`` values of every job and Serve app as the
  cluster reports them. Never what a caller sends. Thread-safe and bounded in bytes; matched in one pass
  (Aho-Corasick). Values of 4 characters or more are masked wherever they occur; shorter ones where they
  stand as whole words.
* secret *shapes*: the detectors of the ``detect-secrets`` library (AWS, GitHub, GitLab, Slack, Stripe, JWT,
  OpenAI, PyPI, npm, SendGrid, ...) plus the shapes they lack (``--password x``, ``NAME=value``, ``Password: x``,
  ``scheme://user:pass@host``, ``Authorization:`` headers, private key blocks, Hugging Face, GCP and Azure
  keys). A static Aho-Corasick pass finds their anchors: a string with none is not matched against them.
* ``escape_controls``: ESC, BEL, CR, BS, other C0/C1, bidi overrides and zero-width characters become visible
  escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import ahocorasick
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
from ray_mcp.limits import (
    EXTRA_SECRETS_MAX,
    REFUSED_OWNERS_KEPT,
    SECRET_BYTES_PER_KEY_CHAR,
    SECRET_ENTRY_BYTES,
    SECRET_KEY_CHARS,
    SECRET_REGISTRY_MIB,
    SECRETS_RECENT_KEY_CHARS,
    TOKEN_FILE_BYTES,
)

# env_vars values that configure rather than authenticate: masking them everywhere would mangle every answer
NOT_SECRET_VALUES = frozenset(
    {
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "none",
        "null",
        "auto",
        "debug",
        "info",
        "warn",
        "warning",
        "error",
        "critical",
    }
)

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


def _mask_shapes(text: str) -> str:
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    found = {s for s in detected(text) if len(s) >= SHORT_SECRET_CHARS}
    if not found:
        return text
    # all at once: replacing one find at a time would leave the rest of an overlapping one visible
    return _mask_spans(text, [span for secret in found for span in _occurrences(text, secret)])


# -- shape anchors and control characters: one static automaton ------------------------------------------------


def _is_word_char(ch: str) -> bool:
    return ch.isalnum()


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
# C0 but newline and tab, DEL, C1, and the invisible format characters that reorder or hide text.
_CONTROL_CHARS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]] + [
    "\u061c",
    "\u180e",
    *map(chr, range(0x200B, 0x2010)),
    *map(chr, range(0x2028, 0x202F)),
    *map(chr, range(0x2060, 0x206A)),
    "\ufeff",
    "\ufff9",
    "\ufffa",
    "\ufffb",
]
_CONTROL = re.compile("[" + "".join(_CONTROL_CHARS) + "]")


def _anchor_automaton() -> Any:
    automaton = ahocorasick.Automaton()
    for anchor in _ANCHORS:
        automaton.add_word(anchor, anchor)
    for ch in _CONTROL_CHARS:
        automaton.add_word(ch, None)
    automaton.make_automaton()
    return automaton


_ANCHOR_AUTOMATON = _anchor_automaton()


def _shapes_and_controls(text: str) -> tuple[bool, bool]:
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


# -- known secret values --------------------------------------------------------------------------------------


CUT_MARKS = ("…", "...")  # where a cut copy of a value ends


def _key(value: str) -> str:
    """What a value is found by: its first SECRET_KEY_CHARS characters (the rest is compared once found)."""
    return value[:SECRET_KEY_CHARS]


class _Secrets:
    """An immutable Aho-Corasick automaton over secret values, matched exactly (case included). A value longer
    than its key is masked where the text repeats it whole, or cut (up to the text's end or a cut mark); a text
    that merely shares its first characters is left alone."""

    def __init__(self, values: Iterable[str]) -> None:
        by_key: dict[str, list[str]] = {}
        for value in values:
            by_key.setdefault(_key(value), []).append(value)
        self.automaton: Any = None
        if by_key:
            automaton = ahocorasick.Automaton()
            for key, found in by_key.items():
                automaton.add_word(key, (key, tuple(sorted(found, key=len, reverse=True))))
            automaton.make_automaton()
            self.automaton = automaton

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Spans to mask: long values anywhere, short ones where they stand as whole words."""
        if self.automaton is None or not text:
            return []
        spans: list[tuple[int, int]] = []
        for end, (key, values) in self.automaton.iter(text):
            start = end - len(key) + 1
            stop = end + 1
            if len(key) < SHORT_SECRET_CHARS and (
                (start > 0 and _is_word_char(text[start - 1]))
                or (stop < len(text) and _is_word_char(text[stop]))
            ):
                continue
            whole = False
            for value in values:  # longest first
                agreed = _agreed(text, start, value)
                cut = start + agreed == len(text) or text.startswith(CUT_MARKS, start + agreed)
                if agreed == len(value) or cut:
                    stop, whole = max(stop, start + agreed), True
                    break
            if whole:  # a text that only shares a value's first characters (a path, a URL) is not that value
                spans.append((start, stop))
        return spans


def _agreed(text: str, start: int, value: str) -> int:
    """How many characters of ``value`` the text repeats from ``start`` (bisected: each probe is in C)."""
    low, high = len(_key(value)), min(len(value), len(text) - start)
    while low < high:
        mid = (low + high + 1) // 2
        if text.startswith(value[:mid], start):
            low = mid
        else:
            high = mid - 1
    return low


_NO_SECRETS = _Secrets(())


@dataclasses.dataclass(frozen=True)
class _View:
    """What readers use: the last full build and the values added since (both immutable), swapped whole."""

    base: _Secrets
    recent: tuple[_Secrets, ...]  # the values added since, in segments of at most SECRETS_RECENT_KEY_CHARS
    memo: dict[str, str] = dataclasses.field(default_factory=dict)  # short strings already cleaned with it

    @property
    def matchers(self) -> tuple[_Secrets, ...]:
        return (self.base, *self.recent)


def _cost(value: str) -> int:
    """Bytes a value holds in the registry: the value, its key in the automaton, its entries."""
    return len(value.encode()) + len(_key(value)) * SECRET_BYTES_PER_KEY_CHAR + SECRET_ENTRY_BYTES


class SecretRegistry:
    """The secret values the server knows of, by owner: ``configured`` (our token, Ray's token, header values)
    and, per cluster, each job's and each Serve app's ``env_vars`` values as the cluster reports them.

    Nothing a caller sends is added: only the reads of the cluster (sources/, answers/) and the settings add values. Bounded
    in bytes (``_cost``); at the bound a new owner's values are refused, never an older owner's dropped, and
    ``refused`` says so (the output choke point then withholds answers: see middleware.py). A job's values are
    dropped only once the cluster's job list no longer shows the job (deleted). Thread-safe; readers never
    lock: they take ``view``, which is swapped whole.

    Adding costs O(one segment of at most SECRETS_RECENT_KEY_CHARS): the values added since the last full
    build sit in small automatons of that size, and only the newest is rebuilt. Past one segment, a full
    build runs in a background thread and is swapped in when done; however long it takes (a busy machine),
    values added meanwhile fill further segments, so an add never costs more.
    """

    def __init__(self, max_bytes: int = SECRET_REGISTRY_MIB * 2**20) -> None:
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self._owners: dict[str, tuple[float, frozenset[str]]] = {}  # owner -> (when learned, values)
        self._refs: dict[str, int] = {}  # value -> how many owners hold it
        self._bytes = 0
        self._built: frozenset[str] = frozenset()  # the values of view.base
        self._closed: tuple[_Secrets, ...] = ()  # full segments of values held since the last full build
        self._open: list[str] = []  # the newest segment's values
        self._open_key_chars = 0
        self._building = False
        self._dirty = False  # changed while a build ran: build again
        self._refused: dict[str, None] = {}  # owners whose values did not fit (newest last, bounded)
        self.view = _View(_NO_SECRETS, ())

    @staticmethod
    def usable(value: object) -> str | None:
        """A value worth masking (not a flag such as ``true`` or a small number), as text."""
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return None
        text = str(value).strip()
        if not text or text.lower() in NOT_SECRET_VALUES or (text.isdigit() and len(text) <= 2):
            return None
        return text

    def hold(self, owner: str, values: Iterable[object]) -> bool:
        """Make ``owner``'s values secrets (added to what it already holds). False if they did not fit."""
        fresh = {v for v in (self.usable(value) for value in values) if v is not None}
        with self._lock:
            learned_at, held = self._owners.get(owner, (time.monotonic(), frozenset()))
            new = [v for v in fresh - held]
            if not new:
                self._owners.setdefault(owner, (learned_at, held))
                return True
            cost = sum(_cost(v) for v in new if v not in self._refs)
            if owner != CONFIGURED and self._bytes + cost > self.max_bytes:
                self._refused.pop(owner, None)
                self._refused[owner] = None
                while len(self._refused) > REFUSED_OWNERS_KEPT:
                    del self._refused[next(iter(self._refused))]
                return False
            self._owners[owner] = (learned_at, held | frozenset(new))
            for value in new:
                count = self._refs.get(value, 0)
                self._refs[value] = count + 1
                if count == 0:
                    self._bytes += _cost(value)
                    if value not in self._built:
                        self._open.append(value)
                        self._open_key_chars += len(_key(value))
            self._publish_recent()
            return True

    def drop_owners_except(self, prefix: str, alive: Iterable[str], listed_since: float) -> None:
        """Forget the owners under ``prefix`` that are not ``alive`` and were learned before ``listed_since``
        (a job list read that began then): the cluster no longer lists them."""
        keep = set(alive)
        with self._lock:
            gone = [
                o
                for o, (at, _) in self._owners.items()
                if o.startswith(prefix) and o not in keep and at < listed_since
            ]
            for owner in gone:
                _, values = self._owners.pop(owner)
                self._refused.pop(owner, None)
                for value in values:
                    count = self._refs[value] - 1
                    if count:
                        self._refs[value] = count
                    else:
                        del self._refs[value]
                        self._bytes -= _cost(value)
            if gone:
                # still masked by view.base until the next full build: masking a gone value is safe
                self._start_build()

    def _publish_recent(self) -> None:
        """Under the lock: a new view with the newest segment rebuilt; once it is full, a full build starts
        and the next values open a new segment."""
        newest = _Secrets(self._open)
        self.view = _View(self.view.base, (*self._closed, newest) if self._open else self._closed)
        if self._open_key_chars > SECRETS_RECENT_KEY_CHARS:
            self._closed = (*self._closed, newest)
            self._open, self._open_key_chars = [], 0
            self._start_build()

    def _start_build(self) -> None:
        if self._building:
            self._dirty = True
            return
        self._building = True
        threading.Thread(target=self._build, name="ray-mcp-secrets", daemon=True).start()

    def _build(self) -> None:
        while True:
            with self._lock:
                values = frozenset(self._refs)
                self._dirty = False
            base = _Secrets(values)  # the long part, outside the lock
            with self._lock:
                self._built = values
                self._closed, self._open, self._open_key_chars = (), [], 0
                for value in self._refs:  # those held while this build ran, segmented here, not by a caller
                    if value not in values:
                        self._open.append(value)
                        self._open_key_chars += len(_key(value))
                        if self._open_key_chars > SECRETS_RECENT_KEY_CHARS:
                            self._closed = (*self._closed, _Secrets(self._open))
                            self._open, self._open_key_chars = [], 0
                self.view = _View(base, (*self._closed, _Secrets(self._open)) if self._open else self._closed)
                if not self._dirty:
                    self._building = False
                    return

    def wait_built(self, timeout_s: float = 30.0) -> None:
        """Until no full build is running (tests and benchmarks)."""
        deadline = time.monotonic() + timeout_s
        while self._building and time.monotonic() < deadline:
            time.sleep(0.01)

    @property
    def refused(self) -> list[str]:
        """Owners whose values did not fit in ``max_bytes`` (so cannot be masked), newest last."""
        with self._lock:
            return list(self._refused)

    @property
    def bytes(self) -> int:
        return self._bytes

    def holds(self, owner: str) -> bool:
        with self._lock:
            return owner in self._owners

    def __contains__(self, value: object) -> bool:
        with self._lock:
            return value in self._refs

    def __len__(self) -> int:
        with self._lock:
            return len(self._refs)


CONFIGURED = "configured"
SECRETS = SecretRegistry()


def job_owner(cluster: str, job: str) -> str:
    """The registry's owner of a job's values, by submission id or job id."""
    return f"job:{cluster}:{job}"


def hold_job(cluster: str, details: Mapping[str, Any]) -> None:
    """Hold a job's ``env_vars`` values (and secret-named fields), as Ray's job details report them."""
    values = secret_values(details)
    for key in ("submission_id", "job_id"):
        ident = details.get(key)
        if isinstance(ident, str) and ident:
            SECRETS.hold(job_owner(cluster, ident), values)


def credential_values(header_value: str) -> list[str]:
    """A configured header value and, for ``Bearer x`` / ``Basic x``, the credential alone."""
    parts = header_value.strip().split(None, 1)
    return (
        [header_value, parts[1]]
        if len(parts) == 2 and len(parts[1]) >= SHORT_SECRET_CHARS
        else [header_value]
    )


def remember_settings_secrets(settings: Any) -> None:
    """Hold every credential the settings name: bearer token, Ray's token (setting or file), header values;
    and take the registry's bound from them."""
    SECRETS.max_bytes = int(getattr(settings, "secret_registry_mib", 0) * 2**20) or SECRETS.max_bytes
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
            if path is not None and Path(path).is_file() and Path(path).stat().st_size <= TOKEN_FILE_BYTES:
                values.append(Path(path).read_text(encoding="utf-8", errors="replace").strip())
        except OSError:
            pass
    for value in (getattr(settings, "dashboard_headers", None) or {}).values():
        values.extend(credential_values(str(value)))
    SECRETS.hold(CONFIGURED, values)


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


MEMO_MAX_CHARS = 64  # strings this short are remembered once cleaned (per registry view) ...
MEMO_MAX_ENTRIES = 16_384  # ... up to this many


def _clean_memo(text: str, matchers: tuple[_Secrets, ...], memo: dict[str, str] | None) -> str:
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


def _clean(text: str, matchers: tuple[_Secrets, ...], *, escape: bool = True) -> str:
    if not text:
        return text
    spans = [span for matcher in matchers for span in matcher.spans(text)]
    shapes, controls = _shapes_and_controls(text)
    if spans:
        text = _mask_spans(text, spans)
    if shapes:
        text = _mask_shapes(text)
    return escape_controls(text) if controls and escape else text


def _extra(values: Iterable[object]) -> _Secrets | None:
    """Secrets of one call or one structure only (never the registry's), at most EXTRA_SECRETS_MAX of them."""
    usable = {v for v in map(SecretRegistry.usable, values) if v is not None}
    return _Secrets(sorted(usable, key=len, reverse=True)[:EXTRA_SECRETS_MAX]) if usable else None


def _matchers(extra_secrets: Iterable[str]) -> tuple[_Secrets, ...]:
    extra = _extra(extra_secrets)
    known = SECRETS.view.matchers
    return (*known, extra) if extra is not None else known


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


def _redact(obj: Any, matchers: tuple[_Secrets, ...], memo: dict[str, str] | None, found: list[str]) -> Any:
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
