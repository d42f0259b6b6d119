"""The code reads as laid out (issue 36, "Code as it reads"), checked over src/ without a Ray head:

- no function or method is over 80 lines as the formatter lays it out (decorators included);
- no class has a method named after a builtin it would shadow in its own body (``list``, ``range``, ``open``)."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import ray_mcp

SRC = Path(ray_mcp.__file__).parent
MAX_FUNCTION_LINES = 80
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def parsed() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(SRC).as_posix(), ast.parse(p.read_text())) for p in sorted(SRC.rglob("*.py"))]


def function_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - start + 1


def test_the_sources_are_read_from_this_checkout() -> None:
    files = parsed()
    assert len(files) > 100 and any(path == "shaping/topology.py" for path, _ in files)


def test_no_function_is_over_80_lines() -> None:
    long = [
        f"{path}:{node.lineno} {node.name} ({function_lines(node)} lines)"
        for path, tree in parsed()
        for node in ast.walk(tree)
        if isinstance(node, FUNCTIONS) and function_lines(node) > MAX_FUNCTION_LINES
    ]
    assert not long, f"split these into named steps: {long}"


def test_no_method_is_named_after_a_builtin() -> None:
    shadowing = [
        f"{path}:{stmt.lineno} {cls.name}.{stmt.name}"
        for path, tree in parsed()
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for stmt in cls.body
        if isinstance(stmt, FUNCTIONS) and not stmt.name.startswith("_") and hasattr(builtins, stmt.name)
    ]
    assert not shadowing, f"rename these (a method named after a builtin hides it in its class): {shadowing}"
