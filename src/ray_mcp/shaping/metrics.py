"""get_metrics, pure: a series' points -> its summary (first, min, max, last, mean, slope, change point, gaps,
sparkline); series ranked by significance; the verdict, the text, the budget.

Prometheus did the counting (rate(), increase(), histogram_quantile() server-side, with its own handling of
counter resets and staleness): here the points are only described, never re-derived.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ray_mcp import models
from ray_mcp.amounts import byte_size, percent
from ray_mcp.limits import (
    CHANGE_MIN_EXPLAINED,
    CHANGE_MIN_SHIFT,
    SERIES_NAME_CHARS,
    SPARK_CHARS,
)
from ray_mcp.models.metrics import Trend, Unit
from ray_mcp.text import quoted

Points = Sequence[tuple[float, float]]
SPARK_LEVELS = "▁▂▃▄▅▆▇█"
# A series whose range is under this share of its size moved by rounding only: it is steady.
STEADY_SHARE = 0.01
# Labels Prometheus or Ray put on every series: they never tell two series of one question apart.
PLUMBING_LABELS = frozenset(
    {"SessionName", "Version", "job", "otel_scope_name", "otel_scope_schema_url", "otel_scope_version"}
)


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock(at: float, span_s: float) -> str:
    """A time in our text: the clock within a day's window, the date too beyond it (always UTC)."""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%H:%M:%S") if span_s <= 86_400 else moment.strftime("%m-%d %H:%M")


def series_name(labels: Mapping[str, str], by: Sequence[str] = ()) -> tuple[str, dict[str, str]]:
    """The name of a series from the labels that tell it apart (``by`` first, in order), and those labels."""
    telling = {k: v for k, v in labels.items() if k not in PLUMBING_LABELS and k != "__name__"}
    keys = [k for k in by if k in telling] or sorted(telling)
    shown = {k: telling[k] for k in keys}
    name = "/".join(shown.values()) if shown else labels.get("__name__", "value")
    return name[:SERIES_NAME_CHARS], shown


# -- one series ------------------------------------------------------------------------------------------


def _finite(points: Points) -> list[tuple[float, float]]:
    return [(t, v) for t, v in points if math.isfinite(v)]


def _linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope (per second) and the share of the variance a straight line explains (R²)."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    stt = sum((t - mean_t) ** 2 for t, _ in points)
    svv = sum((v - mean_v) ** 2 for _, v in points)
    stv = sum((t - mean_t) * (v - mean_v) for t, v in points)
    if stt == 0:
        return 0.0, 0.0
    slope = stv / stt
    explained = (stv * stv) / (stt * svv) if svv > 0 else 0.0
    return slope, explained


def change_point(values: Sequence[float]) -> tuple[int, float, float, float] | None:
    """The one split of the series into a before and an after that best explains it, as (index of the first
    point after, mean before, mean after, share of the variance explained).

    Simple on purpose: for every split k, the sum of squared distances of each part from its own mean; the
    best k leaves the least (a running sum of values and of squares makes each split O(1)). A level shift
    (a deploy, a leak that started, a node that filled up) is what such a split explains well; each part keeps
    at least a tenth of the points (and two), so one outlier at an end is not a change.
    """
    n = len(values)
    least = max(2, n // 10)
    if n < 2 * least:
        return None
    sums, squares = [0.0], [0.0]
    for v in values:
        sums.append(sums[-1] + v)
        squares.append(squares[-1] + v * v)
    total_sse = squares[n] - sums[n] ** 2 / n
    if total_sse <= 0:
        return None
    best: tuple[float, int] | None = None
    for k in range(least, n - least + 1):
        left = squares[k] - sums[k] ** 2 / k
        right = (squares[n] - squares[k]) - (sums[n] - sums[k]) ** 2 / (n - k)
        if best is None or left + right < best[0]:
            best = (left + right, k)
    assert best is not None
    sse, k = best
    return k, sums[k] / k, (sums[n] - sums[k]) / (n - k), 1 - sse / total_sse


def classify(points: list[tuple[float, float]]) -> tuple[Trend, float, tuple[int, float, float] | None]:
    """The trend, the slope per second, and the change point when the trend is a step.

    A step and a ramp both split well, so the two models are compared: a straight line that explains at least
    as much as the best split is a ramp (rising, falling), with no change point; a split that explains more
    (and at least CHANGE_MIN_EXPLAINED of the variance, moving by at least CHANGE_MIN_SHIFT of the series'
    size) is a step at that point. A series that neither explains well is fluctuating."""
    values = [v for _, v in points]
    slope, line_r2 = _linear_fit(points) if len(points) >= 2 else (0.0, 0.0)
    size = max(abs(v) for v in values)
    if size == 0 or max(values) - min(values) <= STEADY_SHARE * size:
        return "steady", slope, None
    split = change_point(values)
    if split is not None:
        k, before, after, explained = split
        if (
            explained > line_r2
            and explained >= CHANGE_MIN_EXPLAINED
            and abs(after - before) >= CHANGE_MIN_SHIFT * size
        ):
            return ("stepped_up" if after > before else "stepped_down"), slope, (k, before, after)
    if line_r2 >= CHANGE_MIN_EXPLAINED:
        return ("rising" if slope > 0 else "falling"), slope, None
    return "fluctuating", slope, None


def sparkline(points: Points, start: float, end: float, width: int = SPARK_CHARS) -> str:
    """The window in ``width`` characters: each the mean of its slice of time, scaled from the series' min to
    its max; a slice with no point is a space (a gap, or before the series began)."""
    finite = _finite(points)
    if not finite or end <= start:
        return ""
    buckets: list[list[float]] = [[] for _ in range(width)]
    for t, v in finite:
        buckets[min(width - 1, max(0, int((t - start) / (end - start) * width)))].append(v)
    low, high = min(v for _, v in finite), max(v for _, v in finite)
    chars = []
    for bucket in buckets:
        if not bucket:
            chars.append(" ")
            continue
        level = 0 if high == low else (sum(bucket) / len(bucket) - low) / (high - low)
        chars.append(SPARK_LEVELS[min(len(SPARK_LEVELS) - 1, int(level * len(SPARK_LEVELS)))])
    return "".join(chars)


def summarize(
    labels: Mapping[str, str],
    points: Points,
    *,
    by: Sequence[str],
    start: float,
    end: float,
    step_s: float,
) -> models.SeriesSummary:
    """One series of a range query as its summary. Values that are not numbers (NaN: a quantile of no
    requests, a 0/0) are left out; a series with none left is steady with no values."""
    name, shown = series_name(labels, by)
    finite = _finite(points)
    if not finite:
        return models.SeriesSummary(name=name, labels=shown, trend="steady", points=0)
    values = [v for _, v in finite]
    trend, slope, step = classify(finite)
    expected = round((finite[-1][0] - finite[0][0]) / step_s) + 1 if step_s > 0 else len(points)
    change = None
    if step is not None:
        k, before, after = step
        change = models.ChangePoint(at=iso(finite[k][0]), before=before, after=after)
    return models.SeriesSummary(
        name=name,
        labels=shown,
        trend=trend,
        first=values[0],
        min=min(values),
        max=max(values),
        last=values[-1],
        mean=sum(values) / len(values),
        slope_per_s=slope,
        change=change,
        points=len(finite),
        gaps=max(0, expected - len(points)),
        began_at=iso(finite[0][0]) if finite[0][0] > start + 2 * step_s else None,
        ended_at=iso(finite[-1][0]) if finite[-1][0] < end - 2 * step_s else None,
        spark=sparkline(finite, start, end),
    )


def instant_summary(labels: Mapping[str, str], value: float, *, by: Sequence[str]) -> models.SeriesSummary:
    """One value read now (no history): only ``last`` is known."""
    name, shown = series_name(labels, by)
    return models.SeriesSummary(name=name, labels=shown, trend="instant", last=value, points=1)


def significance(s: models.SeriesSummary) -> float:
    """How much a series says, in its panel's unit: how far it moved (max - min) plus how big it is (|mean|).

    Series of one panel share a unit, so this ranks them: a node that filled up, or one always full, before one
    idling flat. A step counts its shift once more, so a change stands above noise of the same range."""
    if s.last is None:
        return -1.0
    if s.min is None or s.max is None or s.mean is None:
        return abs(s.last)
    shift = abs(s.change.after - s.change.before) if s.change is not None else 0.0
    return (s.max - s.min) + abs(s.mean) + shift


def ranked(series: list[models.SeriesSummary]) -> list[models.SeriesSummary]:
    return sorted(series, key=lambda s: (-significance(s), s.name))


# -- words -------------------------------------------------------------------------------------------------

UNIT_SUFFIX: dict[Unit, str] = {
    "percent": "%",
    "bytes": "",
    "bytes_per_s": "/s",
    "per_s": "/s",
    "per_min": "/min",
    "ms": " ms",
    "count": "",
}


def amount(value: float | None, unit: Unit) -> str:
    """The one formatter of a value in its unit: 3 significant digits, bytes in binary units."""
    if value is None or not math.isfinite(value):
        return "?"
    if unit in ("bytes", "bytes_per_s"):
        return f"{byte_size(value)}{UNIT_SUFFIX[unit]}"
    if unit == "percent":
        return percent(value)
    return f"{value:.3g}{UNIT_SUFFIX[unit]}"


def rate_words(slope_per_s: float | None, unit: Unit, span_s: float) -> str | None:
    """The slope per minute in a window up to two hours, per hour beyond."""
    if slope_per_s is None or slope_per_s == 0:
        return None
    per, factor = ("min", 60.0) if span_s <= 7_200 else ("h", 3_600.0)
    sign = "+" if slope_per_s > 0 else ""
    return f"{sign}{amount(slope_per_s * factor, unit)}/{per}"


TREND_WORDS: dict[Trend, str] = {
    "steady": "steady",
    "rising": "rising",
    "falling": "falling",
    "stepped_up": "stepped up",
    "stepped_down": "stepped down",
    "fluctuating": "fluctuating",
    "instant": "now",
}


def series_line(s: models.SeriesSummary, unit: Unit, span_s: float, *, instant: bool = False) -> str:
    """One line per series: name, sparkline, the figures, and when it changed."""
    if instant:
        return f"  {quoted(s.name)}: {amount(s.last, unit)}"
    if s.points == 0:
        return f"  {quoted(s.name)}: no value in the window (no requests, or not a number)"
    parts = [f"  {quoted(s.name)} {s.spark or ''} {TREND_WORDS[s.trend]}"]
    parts.append(
        f"first {amount(s.first, unit)}, min {amount(s.min, unit)}, max {amount(s.max, unit)}, "
        f"last {amount(s.last, unit)}, mean {amount(s.mean, unit)}"
    )
    if (rate := rate_words(s.slope_per_s, unit, span_s)) and s.trend in ("rising", "falling"):
        parts.append(rate)
    if s.change is not None:
        at = clock(datetime.fromisoformat(s.change.at).timestamp(), span_s)
        parts.append(f"{amount(s.change.before, unit)} → {amount(s.change.after, unit)} at {at}")
    if s.gaps:
        parts.append(f"{s.gaps} missing step(s)")
    if s.began_at:
        parts.append(f"began {clock(datetime.fromisoformat(s.began_at).timestamp(), span_s)}")
    if s.ended_at:
        parts.append(f"stopped reporting {clock(datetime.fromisoformat(s.ended_at).timestamp(), span_s)}")
    return "; ".join(parts)


# -- the answer ----------------------------------------------------------------------------------------------


def span_of(answer: models.MetricsAnswer) -> float:
    if answer.window is None:
        return 0.0
    start = datetime.fromisoformat(answer.window.start).timestamp()
    return datetime.fromisoformat(answer.window.end).timestamp() - start


def verdict(question: str, what: str, panels: list[models.Panel], span_s: float, *, instant: bool) -> str:
    """The most significant series of the question's first panel with a value, in one sentence."""
    for panel in panels:
        top = next((s for s in panel.series if s.last is not None), None)
        if top is None:
            continue
        others = panel.total - 1
        rest = f"; {others} other series in this panel" if others else ""
        if instant:
            return f"{question} now ({what}): {quoted(top.name)} {amount(top.last, panel.unit)} ({panel.title.lower()}){rest}."
        moved = f"{amount(top.first, panel.unit)} → {amount(top.last, panel.unit)}"
        if top.change is not None:
            at = clock(datetime.fromisoformat(top.change.at).timestamp(), span_s)
            how = f"stepped {'up' if top.trend == 'stepped_up' else 'down'} {amount(top.change.before, panel.unit)} → {amount(top.change.after, panel.unit)} at {at}"
        elif top.trend in ("rising", "falling"):
            how = f"{TREND_WORDS[top.trend]} {moved} ({rate_words(top.slope_per_s, panel.unit, span_s)})"
        elif top.trend == "steady":
            how = f"steady at {amount(top.last, panel.unit)}"
        else:
            how = f"fluctuating between {amount(top.min, panel.unit)} and {amount(top.max, panel.unit)}, last {amount(top.last, panel.unit)}"
        return f"{question} ({what}): {quoted(top.name)} {how} ({panel.title.lower()}){rest}."
    return f"{question} ({what}): no series has a value in the window."


def render(answer: models.MetricsAnswer) -> str:
    span_s = span_of(answer)
    instant = answer.source == "node_endpoints"
    lines = [answer.verdict]
    if answer.window is not None:
        start = datetime.fromisoformat(answer.window.start).timestamp()
        end = datetime.fromisoformat(answer.window.end).timestamp()
        lines.append(
            f"Window {clock(start, span_s)} to {clock(end, span_s)} UTC, one point per {answer.window.step_s:g} s; "
            f"Prometheus {answer.prometheus}."
        )
    for panel in answer.panels:
        count = (
            f"{len(panel.series)} of {panel.total} series"
            if panel.total > len(panel.series)
            else f"{panel.total} series"
        )
        lines.append(f"{panel.title} ({count}):")
        lines += [series_line(s, panel.unit, span_s, instant=instant) for s in panel.series]
    lines += [f"Note: {n}" for n in answer.notes]
    lines += [f"Next: {h}" for h in answer.hints]
    return "\n".join(lines)
