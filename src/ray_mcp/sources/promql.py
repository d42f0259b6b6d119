"""What a get_metrics call asks, checked before anything is sent: its window, and label matchers built from
its narrowing (quoted and escaped here, so a value can only ever match a label, never change the query)."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import MAX_WINDOW_S, MIN_RATE_WINDOW_S, RANGE_POINTS

DEFAULT_LAST = "15m"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
# RE2's metacharacters (Prometheus matches =~ with RE2, anchored at both ends)
_REGEX_META = re.compile(r"([\\.^$*+?()\[\]{}|])")


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    step_s: float

    @property
    def span_s(self) -> float:
        return self.end - self.start

    @property
    def rate_window(self) -> str:
        """The range of rate() and increase(): at least MIN_RATE_WINDOW_S (a few scrapes of Ray's 10 s
        interval), else the step, so consecutive points cover every sample once."""
        return f"{max(MIN_RATE_WINDOW_S, math.ceil(self.step_s))}s"


def parse_duration(text: str, what: str) -> float:
    """``15m``, ``2h``, ``1h30m``, ``90s``, ``1d`` (Prometheus's duration syntax) in seconds."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise InvalidArgument(
            f"{what}={text!r} is not a duration: use a number and a unit, as Prometheus writes them (90s, 15m, "
            "2h, 1h30m, 1d). Nothing was sent."
        )
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def parse_time(text: str, what: str) -> float:
    """An ISO 8601 time (UTC unless it names its offset) or Unix seconds."""
    spec = text.strip()
    try:
        return float(spec)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(spec.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"{what}={text!r} is not a time: give ISO 8601 (2026-12-04T03:40:00Z; UTC when no offset is given) "
            "or Unix seconds, or use last='2h' for a window ending now. Nothing was sent."
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def window(last: str | None, since: str | None, until: str | None, *, now: float | None = None) -> Window:
    """The window a call asks about: ``last`` (ending now), or ``since`` up to ``until`` (default now)."""
    now = time.time() if now is None else now
    if last is not None and (since is not None or until is not None):
        raise InvalidArgument(
            "Give either last (a window ending now, e.g. last='2h') or since/until (times), not both. "
            "Nothing was sent."
        )
    if since is None and until is not None:
        raise InvalidArgument("until needs since (the window's start). Nothing was sent.")
    if since is not None:
        start = parse_time(since, "since")
        end = parse_time(until, "until") if until is not None else now
    else:
        end = now
        start = end - parse_duration(last or DEFAULT_LAST, "last")
    if end > now:
        end = now  # Prometheus has nothing after now
    # whole seconds: the window an answer names (ISO, to the second) is the one it asked, exactly
    start, end = float(math.floor(start)), float(math.floor(end))
    if start >= end:
        raise InvalidArgument(
            f"The window is empty: it starts at {_iso(start)} and ends at {_iso(end)}. Give a start before the "
            "end (and before now), or last='15m'. Nothing was sent."
        )
    if end - start > MAX_WINDOW_S:
        raise InvalidArgument(
            f"The window spans {(end - start) / 86_400:.1f} days; at most {MAX_WINDOW_S // 86_400} days per call. "
            "Ask for a shorter one. Nothing was sent."
        )
    step = max(1.0, math.ceil((end - start) / RANGE_POINTS))
    return Window(start, end, step)


def between(start: float, end: float) -> Window:
    """The window from ``start`` to ``end`` (seconds since the epoch, whole), RANGE_POINTS steps at most: for
    answers that pick their own window (the diagnosis's trends, compare_jobs' runs)."""
    start, end = float(math.floor(start)), float(math.floor(end))
    return Window(start, end, max(1.0, math.ceil((end - start) / RANGE_POINTS)))


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def string(value: str) -> str:
    """A PromQL string literal: double quotes, with backslashes, quotes and newlines escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def regex_literal(value: str) -> str:
    """``value`` matched literally inside an RE2 pattern."""
    return _REGEX_META.sub(r"\\\1", value)


def equals(label: str, value: str) -> str:
    return f"{label}={string(value)}"


def matches(label: str, pattern: str) -> str:
    return f"{label}=~{string(pattern)}"


def node_matcher(ip: str) -> str:
    """A node's series, by the address Prometheus scraped it at (``instance`` = ``ip:port``, ``[ip]:port``)."""
    host = f"[{ip}]" if ":" in ip else ip
    return matches("instance", regex_literal(host) + ":[0-9]+")


def contains_matcher(label: str, text: str) -> str:
    return matches(label, ".*" + regex_literal(text) + ".*")


def names_matcher(label: str, prefix: str, names: list[str]) -> str:
    """A label that is ``prefix`` then one of ``names``, alone or followed by ``.`` and more (ray::A, ray::A.f)."""
    alternatives = "|".join(regex_literal(n) for n in sorted(set(names)))
    return matches(label, f"{regex_literal(prefix)}({alternatives})([.].*)?")
