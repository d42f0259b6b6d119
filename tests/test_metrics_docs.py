"""docs/metrics.md lists every named question of get_metrics with the PromQL behind it, as the code asks it, and
the tool's choices are the questions."""

from __future__ import annotations

import typing
from pathlib import Path

from ray_mcp.answers.metric_questions import QUESTIONS
from ray_mcp.tools.metrics import Question

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def test_the_doc_lists_each_question_and_the_promql_behind_each_panel() -> None:
    text = DOC.read_text(encoding="utf-8").replace("\\|", "|")
    for question in QUESTIONS.values():
        assert f"### `{question.name}`: {question.about}" in text, question.name
        for query in question.queries:
            assert f"`{query.promql.format(sel='<scope>', w='<w>')}`" in text, (question.name, query.title)


def test_the_tool_offers_exactly_the_named_questions() -> None:
    assert list(typing.get_args(Question)) == list(QUESTIONS)
