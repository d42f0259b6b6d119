"""get_metrics' pure parts: a series' summary (its change point, its trend, its gaps), the window, PromQL
quoting, the metric names of a raw query, and the budget. No Ray head, no Prometheus."""

from __future__ import annotations

import json
import math

import pytest

from ray_mcp import models
from ray_mcp.answers.metric_questions import QUESTIONS
from ray_mcp.answers.metrics import Request, allot, check_request, metric_names
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import RESPONSE_BUDGET_BYTES
from ray_mcp.settings import Settings, parse_prometheus_headers
from ray_mcp.shaping import metrics as shape
from ray_mcp.shaping.common import tool_result
from ray_mcp.sources import promql

T0 = 1_800_000_000.0


def series(values: list[float], step: float = 10.0) -> list[tuple[float, float]]:
    return [(T0 + i * step, v) for i, v in enumerate(values)]


def summary(values: list[float], step: float = 10.0) -> models.SeriesSummary:
    pts = series(values, step)
    return shape.summarize(
        {"instance": "10.0.0.1:8080"}, pts, by=("instance",), start=T0, end=pts[-1][0], step_s=step
    )


def test_a_level_shift_is_a_step_with_its_time_and_both_levels() -> None:
    s = summary([10.0, 11, 9, 10, 10, 11, 9, 10, 50, 51, 49, 50, 50, 52, 48, 50])
    assert s.trend == "stepped_up"
    assert s.change is not None and s.change.at == shape.iso(T0 + 80)
    assert s.change.before == pytest.approx(10) and s.change.after == pytest.approx(50)
    assert (s.first, s.min, s.max, s.last) == (10, 9, 52, 50)
    assert s.mean == pytest.approx(sum([10, 11, 9, 10, 10, 11, 9, 10, 50, 51, 49, 50, 50, 52, 48, 50]) / 16)


def test_a_steady_ramp_is_rising_with_its_slope_not_a_step() -> None:
    s = summary([float(i) for i in range(30)])
    assert s.trend == "rising" and s.change is None
    assert s.slope_per_s == pytest.approx(0.1)


def test_a_drop_is_a_step_down_and_noise_is_fluctuating_and_flat_is_steady() -> None:
    assert summary([100.0] * 10 + [5.0] * 10).trend == "stepped_down"
    assert summary([5.0, 9, 1, 8, 2, 9, 1, 7, 3, 9, 2, 8, 1, 9]).trend == "fluctuating"
    flat = summary([42.0] * 12)
    assert flat.trend == "steady" and flat.change is None


def test_gaps_and_a_series_that_began_late_and_went_stale_are_said() -> None:
    pts = [(T0 + 100 + i * 10, 1.0) for i in range(10) if i not in (3, 4)]
    s = shape.summarize({"State": "RUNNING"}, pts, by=("State",), start=T0, end=T0 + 400, step_s=10)
    assert s.gaps == 2
    assert s.began_at == shape.iso(T0 + 100) and s.ended_at == shape.iso(T0 + 190)
    assert " " in (s.spark or "") and len(s.spark or "") == 24


def test_values_that_are_not_numbers_are_left_out() -> None:
    s = shape.summarize(
        {"deployment": "d"},
        series([math.nan, 5.0, math.nan, 7.0]),
        by=("deployment",),
        start=T0,
        end=T0 + 30,
        step_s=10,
    )
    assert (s.points, s.first, s.last, s.min) == (2, 5.0, 7.0, 5.0)
    empty = shape.summarize(
        {"deployment": "d"}, series([math.nan]), by=("deployment",), start=T0, end=T0, step_s=10
    )
    assert empty.points == 0 and empty.last is None


def test_series_that_moved_come_first_then_the_biggest() -> None:
    flat_low, moved, flat_high = summary([1.0] * 10), summary([1.0] * 5 + [60.0] * 5), summary([90.0] * 10)
    assert [s.last for s in shape.ranked([flat_low, moved, flat_high])] == [60.0, 90.0, 1.0]


def test_series_names_come_from_their_telling_labels_not_from_ray_plumbing() -> None:
    name, labels = shape.series_name(
        {
            "instance": "1.2.3.4:80",
            "SessionName": "s",
            "Version": "2.60.0",
            "job": "ray",
            "Location": "SPILLED",
        },
        ("instance", "Location"),
    )
    assert name == "1.2.3.4:80/SPILLED" and labels == {"instance": "1.2.3.4:80", "Location": "SPILLED"}


def test_amounts_are_formatted_in_their_unit() -> None:
    assert shape.amount(3 * 1024**3, "bytes") == "3 GiB"
    assert shape.amount(12.345, "percent") == "12.3%"
    assert shape.amount(2048, "bytes_per_s") == "2 KiB/s"
    assert shape.amount(None, "ms") == "?"


def test_the_window_is_last_or_since_until_in_whole_seconds_with_a_step_for_120_points() -> None:
    w = promql.window("2h", None, None, now=T0 + 0.7)
    assert (w.start, w.end, w.step_s) == (T0 - 7200, T0, 60.0)
    assert promql.window(None, "2027-01-15T08:00:00Z", "2027-01-15T09:00:00", now=2e9).span_s == 3600
    assert promql.window("90s", None, None, now=T0).rate_window == "60s"
    assert promql.window("1d", None, None, now=T0).rate_window == "720s"
    for bad in ({"last": "15 minutes"}, {"last": "2h", "since": "1"}, {"since": str(T0 + 5)}, {"until": "1"}):
        with pytest.raises(InvalidArgument):
            promql.window(bad.get("last"), bad.get("since"), bad.get("until"), now=T0)
    with pytest.raises(InvalidArgument, match="at most 31 days"):
        promql.window("60d", None, None, now=T0)


def test_a_label_value_can_only_ever_match_a_label() -> None:
    hostile = 'x"}) or vector(1) # \\'
    matcher = promql.equals("deployment", hostile)
    assert matcher == 'deployment="x\\"}) or vector(1) # \\\\"'
    assert promql.node_matcher("10.0.0.1") == 'instance=~"10\\\\.0\\\\.0\\\\.1:[0-9]+"'
    assert promql.names_matcher("Component", "ray::", ["A", "f.g"]) == (
        'Component=~"ray::(A|f\\\\.g)([.].*)?"'
    )


def test_the_metric_names_of_a_raw_query_leave_out_functions_keywords_labels_and_strings() -> None:
    query = (
        'sum by (instance, le) (rate(ray_serve_latency_bucket{route="/a_b"}[5m])) / on(instance) '
        "ray_node_cpu_count offset 1m > bool 0.5e3"
    )
    assert metric_names(query) == ["ray_serve_latency_bucket", "ray_node_cpu_count"]


def test_a_call_asks_one_thing_and_only_the_narrowing_its_question_takes() -> None:
    with pytest.raises(InvalidArgument, match="Ask one thing"):
        check_request(Request())
    with pytest.raises(InvalidArgument, match="Ask one thing"):
        check_request(Request(question="node_cpu", promql="up"))
    with pytest.raises(InvalidArgument, match="cannot be narrowed by deployment"):
        check_request(Request(question="node_cpu", deployment="d"))
    with pytest.raises(InvalidArgument, match="put the label matchers in the query"):
        check_request(Request(promql="up", node="1.2.3.4"))
    assert check_request(Request(question="serve", deployment="d")) is QUESTIONS["serve"]


def test_the_series_shown_are_shared_out_across_panels() -> None:
    assert allot(12, [30, 30, 30]) == [4, 4, 4]
    assert allot(5, [1, 10]) == [1, 4]
    assert allot(2, [0, 5, 5]) == [0, 1, 1]


def test_every_question_lists_its_promql_with_the_scope_placeholder() -> None:
    for question in QUESTIONS.values():
        for query in question.queries:
            expr = query.promql.format(sel='SessionName="s"', w="60s")
            assert 'SessionName="s"' in expr, (question.name, query.title)
            assert "{" in expr and "{{" not in expr


def test_an_answer_too_big_for_the_budget_is_fitted_at_the_edge_leaving_out_its_least_significant_series() -> (
    None
):
    shown = [summary([float(i % 7)] * 5 + [float(i)] * 5) for i in range(60)]
    for i, s in enumerate(shown):
        s.name = f"node-{i:03d}-" + "x" * 60
    panel = models.Panel(title="CPU use", unit="percent", promql="q", total=60, series=shape.ranked(shown))
    small = models.Panel(title="Memory", unit="bytes", promql="m", total=2, series=shape.ranked(shown[:2]))
    answer = models.MetricsAnswer(
        verdict="v", question="node_cpu", source="prometheus", panels=[panel, small], shown=62, total=62
    )
    # the edge (tool_result) is what fits it: the area sends its whole answer and its renderer
    result = tool_result(answer, shape.render)
    assert len(result.model_dump_json(by_alias=True, exclude_none=True).encode()) <= RESPONSE_BUDGET_BYTES
    fitted = models.MetricsAnswer.model_validate(result.structured_content)
    kept = len(fitted.panels[0].series)
    assert 1 <= kept < 60 and fitted.panels[0].series == panel.series[:kept]  # the most significant first
    assert fitted.panels[1].series == small.series  # the panel that shows the most gives first
    assert fitted.shown == kept + 2
    note = f"{62 - fitted.shown} more of these 62 series left out to keep the whole answer under 8 KB as sent"
    assert [n for n in fitted.notes if "left out" in n] == [fitted.notes[-1]] and note in fitted.notes[-1]
    text = result.content[0].text  # type: ignore[union-attr]
    assert text.count("left out") == 1 and f"CPU use ({kept} of 60 series)" in text


def test_every_panel_keeps_its_most_significant_series_however_small_the_budget() -> None:
    panels = [
        models.Panel(title=f"p{j}", unit="count", promql="q", total=3, series=[summary([1.0] * 4)] * 3)
        for j in range(3)
    ]
    answer = models.MetricsAnswer(verdict="v", question="q", source="prometheus", panels=panels, shown=9)
    assert answer.item_count() == 9
    assert [len(p.series) for p in answer.first(0).panels] == [1, 1, 1]
    assert [len(p.series) for p in answer.first(7).panels] == [2, 2, 3]
    assert answer.first(7).shown == 7


def test_ray_prometheus_headers_are_read_as_ray_reads_them() -> None:
    assert parse_prometheus_headers('{"Authorization": "Bearer abc"}') == [("Authorization", "Bearer abc")]
    assert parse_prometheus_headers('[["X-A", "1"], ["X-A", "2"]]') == [("X-A", "1"), ("X-A", "2")]
    for bad in ("not json", '{"a": 1}', '[["only-one"]]'):
        with pytest.raises(ValueError):
            parse_prometheus_headers(bad)


def test_the_prometheus_url_comes_from_the_flag_or_rays_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_MCP_PROMETHEUS", raising=False)
    monkeypatch.setenv("RAY_PROMETHEUS_HOST", "http://prom:9090/")
    monkeypatch.setenv("RAY_PROMETHEUS_HEADERS", json.dumps({"X-Scope-OrgID": "team-a"}))
    settings = Settings()
    assert settings.prometheus == "http://prom:9090"
    assert settings.prometheus_request_headers() == [("X-Scope-OrgID", "team-a")]
    assert "team-a" not in repr(settings)
    assert Settings(prometheus="https://other:9090").prometheus == "https://other:9090"
    with pytest.raises(ValueError, match="not a Prometheus URL"):
        Settings(prometheus="prom:9090")
    monkeypatch.setenv("RAY_PROMETHEUS_HEADERS", "{oops")
    with pytest.raises(ValueError, match="not JSON"):
        Settings()
