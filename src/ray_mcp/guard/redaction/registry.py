"""The process-wide registry of secret *values* the server knows of (``SECRETS``): Ray's token, ray-mcp's bearer
token, configured dashboard header values, and the ``env_vars`` values of every job and Serve app as the
cluster reports them. Never what a caller sends. Thread-safe and bounded in bytes."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ray_mcp.guard.redaction.known import SHORT_SECRET_CHARS, KnownValues, key_of
from ray_mcp.guard.redaction.names import secret_values
from ray_mcp.limits import (
    REFUSED_OWNERS_KEPT,
    SECRET_BYTES_PER_KEY_CHAR,
    SECRET_ENTRY_BYTES,
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


_NO_SECRETS = KnownValues(())


@dataclasses.dataclass(frozen=True)
class _View:
    """What readers use: the last full build and the values added since (both immutable), swapped whole."""

    base: KnownValues
    recent: tuple[KnownValues, ...]  # the values added since, in segments of at most SECRETS_RECENT_KEY_CHARS
    memo: dict[str, str] = dataclasses.field(default_factory=dict)  # short strings already cleaned with it

    @property
    def matchers(self) -> tuple[KnownValues, ...]:
        return (self.base, *self.recent)


def _cost(value: str) -> int:
    """Bytes a value holds in the registry: the value, its key in the automaton, its entries."""
    return len(value.encode()) + len(key_of(value)) * SECRET_BYTES_PER_KEY_CHAR + SECRET_ENTRY_BYTES


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
        self._closed: tuple[KnownValues, ...] = ()  # full segments of values held since the last full build
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
                        self._open_key_chars += len(key_of(value))
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
        newest = KnownValues(self._open)
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
            base = KnownValues(values)  # the long part, outside the lock
            with self._lock:
                self._built = values
                self._closed, self._open, self._open_key_chars = (), [], 0
                for value in self._refs:  # those held while this build ran, segmented here, not by a caller
                    if value not in values:
                        self._open.append(value)
                        self._open_key_chars += len(key_of(value))
                        if self._open_key_chars > SECRETS_RECENT_KEY_CHARS:
                            self._closed = (*self._closed, KnownValues(self._open))
                            self._open, self._open_key_chars = [], 0
                self.view = _View(
                    base, (*self._closed, KnownValues(self._open)) if self._open else self._closed
                )
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
    def used_bytes(self) -> int:
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
    prometheus_headers = getattr(settings, "prometheus_request_headers", None)
    if callable(
        prometheus_headers
    ):  # RAY_PROMETHEUS_HEADERS: its values are credentials like the dashboard's
        for _name, value in prometheus_headers():
            values.extend(credential_values(str(value)))
    SECRETS.hold(CONFIGURED, values)
