"""The floors hold (docs/architecture.md): the sources talk to Ray and shape nothing, the answers join records
and send no request of their own.

- sources/ imports no shaping, no guard, no answer, no diagnosis, no server and no tool;
- answers/ and diagnosis/ import no httpx (nor Ray: tests/test_parallel_first_calls.py) and call none of the
  dashboard client's request methods: every request is a source's named read."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src" / "ray_mcp"
ABOVE_THE_SOURCES = ("shaping", "guard", "answers", "diagnosis", "server", "tools")
REQUEST_METHODS = {
    "http",
    "get_json",
    "get_data",
    "get_answer",
    "write",
    "write_json",
    "fetch_log",
    "log_stream",
}


def imported(tree: ast.AST) -> list[str]:
    """The modules a module imports to run (not those it names for the type checker only)."""
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for n in ast.walk(block)
    }
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return names


def modules(package: str) -> list[tuple[str, ast.AST]]:
    return [
        (p.relative_to(ROOT).as_posix(), ast.parse(p.read_text())) for p in (ROOT / package).rglob("*.py")
    ]


def test_the_sources_import_nothing_that_shapes_guards_or_answers() -> None:
    above = tuple(f"ray_mcp.{floor}" for floor in ABOVE_THE_SOURCES)
    found = [
        f"{path} imports {name}"
        for path, tree in modules("sources")
        for name in imported(tree)
        if name.startswith(above)
    ]
    assert not found, found


def test_the_answers_and_the_diagnosis_send_no_request_of_their_own() -> None:
    found = []
    for package in ("answers", "diagnosis"):
        for path, tree in modules(package):
            found += [f"{path} imports {n}" for n in imported(tree) if n == "httpx" or n.startswith("httpx.")]
            found += [
                f"{path}:{node.lineno} calls .{node.attr}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and node.attr in REQUEST_METHODS
            ]
    assert not found, found
