"""docs/diagnosis.md's table of classes is measured, not written by hand: it must be what eval/causal_table.py
computes over tests/recorded/ now (regenerate it with ``python -m eval.causal_table``)."""

from __future__ import annotations

from pathlib import Path

from eval.causal_table import HEADER, rows

DOC = Path(__file__).parent.parent / "docs" / "diagnosis.md"


def test_the_docs_table_of_classes_is_the_measured_one() -> None:
    lines = DOC.read_text().splitlines()
    start = lines.index(HEADER[0])
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert lines[start:end] == rows(), (
        "run `python -m eval.causal_table` and paste its table into docs/diagnosis.md"
    )
