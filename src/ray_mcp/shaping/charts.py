"""get_metrics' picture on request: one small PNG of the series an answer shows, a subplot per panel.

matplotlib is an optional extra (``pip install 'ray-mcp[charts]'``): without it, ``png`` raises ChartUnavailable
and the answer says so. Only the object-oriented API (a Figure and its Agg canvas, no pyplot state) is used, so
charts drawn in worker threads for concurrent calls never share a figure.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ray_mcp import models
from ray_mcp.limits import CHART_DPI, CHART_INCHES, CHART_LABEL_CHARS, CHART_SERIES, CHART_TITLE_CHARS
from ray_mcp.shaping.metrics import UNIT_SUFFIX

INSTALL = "pip install 'ray-mcp[charts]' (matplotlib)"


class ChartUnavailable(Exception):
    """No plotting library: the answer carries its summaries and says how to get charts."""


def png(
    panels: Sequence[models.Panel],
    points: Mapping[tuple[int, str], Sequence[tuple[float, float]]],
    title: str,
) -> bytes:
    """The panels' shown series (at most CHART_SERIES each) as one PNG, time on the x axis (UTC)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.dates import DateFormatter
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartUnavailable(f"chart=true needs matplotlib, which is not installed: {INSTALL}") from exc
    drawn = [(i, p) for i, p in enumerate(panels) if p.series]
    width, height = CHART_INCHES
    figure = Figure(figsize=(width, max(1.6, height * len(drawn) / 2)), dpi=CHART_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(max(1, len(drawn)), 1, squeeze=False)[:, 0]
    for ax, (i, panel) in zip(axes, drawn, strict=False):
        for s in panel.series[:CHART_SERIES]:
            pts = points.get((i, s.name)) or []
            ax.plot(
                [datetime.fromtimestamp(t, UTC) for t, _ in pts],
                [v for _, v in pts],
                label=s.name[:CHART_LABEL_CHARS],
                lw=1,
            )
        ax.set_title(
            f"{panel.title} ({UNIT_SUFFIX[panel.unit].strip() or panel.unit})", fontsize=8, loc="left"
        )
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_formatter(DateFormatter("%H:%M"))
        if len(panel.series) > 1:
            ax.legend(fontsize=6, loc="upper left")
    figure.suptitle(title[:CHART_TITLE_CHARS], fontsize=8)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    return out.getvalue()
