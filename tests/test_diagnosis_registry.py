"""The diagnosis's rules, registered: each row of docs/diagnosis.md's rule table is the registry's, the rules of one kind agree
on its references, each rule says what it states and reads only what the gather reads, and no code of the engine
reads our own sentences back (it decides on facts: a statement, a kind, a value)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from ray_mcp.diagnosis import registry
from ray_mcp.diagnosis.facts import Kind
from ray_mcp.diagnosis.graph import GraphInputs

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "diagnosis.md"
ENGINE = ROOT / "src" / "ray_mcp" / "diagnosis"


def test_every_row_of_the_docs_rule_table_is_the_registrys() -> None:
    lines = DOC.read_text().splitlines()
    start = lines.index(registry.TABLE_HEADER[0])
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    shown, made = lines[start:end], registry.table()
    stale = [row for row in shown if row not in made]
    assert not stale, (
        "rows of docs/diagnosis.md's rule table that the registry no longer prints (a rule renamed, changed "
        f"or removed): {stale}; run `python -m ray_mcp.diagnosis.registry` and paste its rows"
    )
    assert shown[: len(registry.TABLE_HEADER)] == registry.TABLE_HEADER and len(shown) > len(
        registry.TABLE_HEADER
    )


def test_the_rules_of_one_kind_declare_the_same_references() -> None:
    registry.discover()
    declared: dict[str, set[tuple[str, ...]]] = {}
    for r in registry.RULES.values():
        for kind in r.kinds:
            if r.refs:
                declared.setdefault(kind, set()).add(r.refs)
    assert {k: v for k, v in declared.items() if len(v) > 1} == {}


def test_every_kind_has_a_rule_and_every_rule_says_what_it_states_and_what_it_reads() -> None:
    registry.discover()
    made = {k for r in registry.RULES.values() for k in r.kinds}
    assert set(Kind) - made == set(), "a kind no rule declares"
    fields = {f.name for f in dataclasses.fields(GraphInputs)}
    for r in registry.RULES.values():
        assert r.states and r.reads, r.key
        assert set(r.reads) <= fields, (r.key, set(r.reads) - fields)


# What a fact is rendered into: our own words. The engine may carry them (a quote, a detail) but never test them.
WORDS = {"text", "cause", "verdict", "symptom", "title"}
READERS = {"startswith", "endswith", "find", "index", "count", "split", "search", "match", "fullmatch", "sub"}


# KubeFinding.verdict is a label of a fixed set ("unschedulable", "OOMKilled"), not a sentence.
LABELS = {("kubernetes.py", "verdict")}


def _reads_words(node: ast.AST, module: str) -> bool:
    return any(
        isinstance(n, ast.Attribute) and n.attr in WORDS and (module, n.attr) not in LABELS
        for n in ast.walk(node)
    )


def test_no_rule_reads_our_own_sentences_back() -> None:
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        if path.name in (
            "render.py",
            "evidence.py",
            "job_evidence.py",
        ):  # the edge's text budget; the gather's own notes
            continue
        module = path.name
        for node in ast.walk(ast.parse(path.read_text())):
            tested = (
                isinstance(node, ast.Compare)
                and any(_reads_words(x, module) for x in [node.left, *node.comparators])
            ) or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in READERS
                and (_reads_words(node.func.value, module) or any(_reads_words(a, module) for a in node.args))
            )
            if tested:
                found.append(f"{path.relative_to(ENGINE)}:{node.lineno}")
    assert found == [], "decide on facts (link.say, chain.kind, a value), not on the words they render to"
