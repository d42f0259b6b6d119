"""diagnose_job and cluster_health stay within their byte budget by construction, whatever the findings, events
and notes: the budget holds for the whole text, the verdict stays first, and what is left out is said."""

from __future__ import annotations

import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from ray_mcp import models
from ray_mcp.diagnosis import report
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.diagnosis.render import render_findings
from ray_mcp.text import single_line

NOW = 1_764_500_000_000
HEAD = "a" * 56

text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=600)
findings = st.lists(
    st.builds(
        models.Finding,
        severity=st.integers(0, 100),
        kind=st.sampled_from(["raised", "failed", "oom", ""]),
        title=text,
        evidence=st.lists(text, max_size=14),
        next_steps=st.lists(text, max_size=3),
        refs=st.lists(text, max_size=3),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(findings=findings, budget=st.integers(400, 8000))
# Found by Hypothesis: a first finding cut to its title kept a raw line break of the cluster's (\x1e) in it.
@example(findings=[models.Finding(severity=0, kind="raised", title="a\x1eb", refs=["0" * 400])], budget=400)
def test_rendered_findings_never_pass_the_budget_and_say_what_was_left_out(findings, budget) -> None:
    header = ["Verdict: something", ""]
    out = render_findings(header, findings, budget)
    assert len(out.encode()) <= budget and out.startswith("Verdict: something")
    shown = sum(1 for i, f in enumerate(findings, 1) if f"\n{i}. {single_line(f.title)}" in "\n" + out)
    if findings and shown < len(findings):
        assert f"{len(findings) - shown} lower-ranked finding(s) left out" in out


def crowded_cluster() -> GraphInputs:
    """Many failures with long messages, many events and unreadable sources: more than any budget holds."""
    events = [
        {
            "severity": "ERROR",
            "source_type": "RAYLET",
            "time": f"{NOW // 1000 - i}",
            "message": f"Driver {i:08x} died " + "z" * 400,
        }
        for i in range(40)
    ]
    tasks = [
        {
            "task_id": f"t{i}",
            "attempt_number": 0,
            "name": f"step_{i}",
            "job_id": f"{i % 5:02x}000000",
            "state": "FAILED",
            "type": "NORMAL_TASK",
            "node_id": HEAD,
            "required_resources": {"CPU": 1.0},
            "error_type": "TASK_EXECUTION_EXCEPTION",
            "start_time_ms": NOW - 10_000,
            "end_time_ms": NOW - 5_000,
            "error_message": f"ray::step_{i}() (pid=1, ip=10.0.0.1)\nValueError: {'w' * 700}",
        }
        for i in range(60)
    ]
    return GraphInputs(
        now_ms=NOW,
        nodes=[
            {
                "node_id": HEAD,
                "state": "ALIVE",
                "is_head_node": True,
                "node_ip": "10.0.0.1",
                "resources_total": {"CPU": 2.0},
            }
        ],
        jobs=[],
        pgs=[],
        actors=[],
        tasks=tasks,
        events=events,
        unreadable=[f"source {i}: timed out " + "u" * 300 for i in range(6)],
    )


def test_cluster_health_of_a_crowded_cluster_stays_within_its_budget_with_the_verdict_first() -> None:
    for budget in (1_000, 2_500, 6_000):
        ev = crowded_cluster()
        ev.notes = ["n" * 500] * 5
        model, out = report.health_report("http://x:8265", ev, max_bytes=budget)
        assert len(out.encode()) <= budget, budget
        assert out.splitlines()[1] == f"Verdict: {model.verdict}" and model.findings


def whole(model: BaseModel, text: str) -> int:
    """What a client receives: the text and the structured content (compact JSON)."""
    structured = json.dumps(
        model.model_dump(mode="json", exclude_none=True), separators=(",", ":"), ensure_ascii=False
    )
    return len(text.encode()) + len(structured.encode())


def test_text_and_structured_content_of_a_crowded_cluster_stay_within_a_third_more_than_the_text_budget() -> (
    None
):
    for budget in (2_500, 6_000, 12_000):
        ev = crowded_cluster()
        ev.notes = ["n" * 500] * 5
        model, out = report.health_report("http://x:8265", ev, max_bytes=budget)
        assert len(out.encode()) <= budget and whole(model, out) <= budget * 4 // 3, budget
        assert_structured_repeats_the_text(model, out)


def assert_structured_repeats_the_text(model: models.ClusterHealth, out: str) -> None:
    """The same findings, by title, in both; each finding's quotes in the structured content are the first
    of those in the text, or their beginnings (the structured content gives its quotes up first)."""
    blocks = re.split(r"\n(?=\d+\. )", out)[1:]
    assert [b.split("\n")[0].split(". ", 1)[1] for b in blocks] == [f.title for f in model.findings]
    for block, f in zip(blocks, model.findings, strict=True):
        quotes = [line.removeprefix("   > ") for line in block.split("\n") if line.startswith("   > ")]
        for quote, said in zip(quotes, f.evidence, strict=False):
            assert said == quote or (said.endswith("…") and quote.startswith(said[:-1]))
        assert len(f.evidence) <= len(quotes)


printable = st.text(st.characters(codec="utf-8", categories=["L", "N", "P", "Zs"]), max_size=600)
plain_findings = st.lists(
    st.builds(
        models.Finding,
        severity=st.integers(0, 100),
        title=printable,
        evidence=st.lists(printable, max_size=14),
        next_steps=st.lists(printable, max_size=3),
    ),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(found=plain_findings, notes=st.lists(printable, max_size=8), budget=st.integers(2_500, 16_000))
def test_a_health_report_never_passes_its_whole_budget_and_shows_the_same_findings_twice(
    found: list[models.Finding], notes: list[str], budget: int
) -> None:
    ev = GraphInputs(now_ms=NOW, notes=notes)
    model, out = report.health_answer(
        "http://x:8265", ev, sorted(found, key=lambda f: -f.severity), max_bytes=budget
    )
    assert len(out.encode()) <= budget and whole(model, out) <= budget * 4 // 3
    assert_structured_repeats_the_text(model, out)
    assert all(f"Note: {n}" in out for n in model.notes)
