"""The output models of get_metrics: each series as a summary over a window, not its points."""

from typing import Literal, Self

from pydantic import BaseModel, Field

from ray_mcp.models.core import Listed

# What a series did over the window (shaping/metrics.py: summarize). Our words for it are rendered from this.
Trend = Literal["steady", "rising", "falling", "stepped_up", "stepped_down", "fluctuating", "instant"]
# The unit of a panel's values, for formatting (percent: 0-100).
Unit = Literal["percent", "bytes", "bytes_per_s", "per_s", "per_min", "ms", "count"]
# Where the numbers come from: a Prometheus (history), or the nodes' own metrics endpoints (now only).
MetricsSource = Literal["prometheus", "node_endpoints", "none"]


class ChangePoint(BaseModel):
    """Where the series moved from one level to another (the split that best explains it, see summarize)."""

    at: str = Field(description="UTC time of the first point at the new level (ISO 8601).")
    before: float = Field(description="Mean before it.")
    after: float = Field(description="Mean from it on.")


class SeriesSummary(BaseModel):
    """One series over the window: first, min, max, last, mean, rate of change, and when it changed."""

    name: str = Field(
        description="What the series is (a node, a state, a deployment...): its telling labels."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="The labels that tell it apart.")
    trend: Trend
    first: float | None = None
    min: float | None = None
    max: float | None = None
    last: float | None = None
    mean: float | None = None
    slope_per_s: float | None = Field(
        default=None, description="Rate of change: least-squares slope, in the panel's unit per second."
    )
    change: ChangePoint | None = None
    points: int = 0
    gaps: int = Field(
        default=0, description="Steps inside its span with no value (a missed or failed scrape)."
    )
    began_at: str | None = Field(
        default=None, description="Set when the series appeared after the window began."
    )
    ended_at: str | None = Field(
        default=None, description="Set when it stopped reporting before the window ended (gone stale)."
    )
    spark: str | None = Field(default=None, description="A text sparkline of the window (a space is a gap).")


class Panel(BaseModel):
    """One quantity of the question (CPU use, p99 latency...), its series most significant first."""

    title: str
    unit: Unit
    promql: str = Field(description="The query sent, as sent (ask it raw with promql=...).")
    total: int = Field(description="Series that matched.")
    series: list[SeriesSummary] = Field(default_factory=list)


class MetricsWindow(BaseModel):
    start: str
    end: str
    step_s: float


class MetricsAnswer(Listed):
    """Its items are the series of its panels, each panel's most significant first: the edge leaves out the
    least significant, from the panel that shows the most, and every panel keeps its first."""

    items_field = "panels"
    items_noun = "series"
    next_step = "narrow the question (node, job, deployment, operator) or lower limit"

    verdict: str
    question: str = Field(description="The named question, or 'promql' for a raw query.")
    source: MetricsSource
    prometheus: str | None = Field(default=None, description="The Prometheus read, and how it was found.")
    window: MetricsWindow | None = None
    panels: list[Panel] = Field(default_factory=list)
    shown: int = Field(default=0, description="Series summarized in this answer.")
    total: int = Field(default=0, description="Series that matched, in all panels.")
    notes: list[str] = Field(default_factory=list, description="What could not be read or was left out.")
    hints: list[str] = Field(default_factory=list)

    def item_count(self) -> int:
        return sum(len(p.series) for p in self.panels)

    def first(self, k: int) -> Self:
        panels = [p.model_copy() for p in self.panels]
        most = sum(max(0, len(p.series) - 1) for p in panels)  # every panel keeps its most significant series
        for _ in range(min(most, self.item_count() - k)):
            longest = max(panels, key=lambda p: len(p.series))
            longest.series = longest.series[:-1]
        return self.model_copy(update={"panels": panels, "shown": sum(len(p.series) for p in panels)})


__all__ = [
    "ChangePoint",
    "MetricsAnswer",
    "MetricsSource",
    "MetricsWindow",
    "Panel",
    "SeriesSummary",
    "Trend",
    "Unit",
]
