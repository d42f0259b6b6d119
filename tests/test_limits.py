"""limits.py: every bound on what ray-mcp reads, keeps and shows is named there, and only there.

The scan reads the sources (no Ray head): a module-level number named like a bound outside limits.py fails,
and so does, in shaping/, diagnosis/ and answers/, a number written where a bound goes (``limit=6``, ``[:5]``,
``one_line(text, 160)``, a parameter's default ``limit: int = 3``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import ray_mcp
from ray_mcp.limits import Bound

SRC = Path(ray_mcp.__file__).parent

# A constant whose name says it bounds a size or a count.
BOUND_NAME = re.compile(
    r"(^|_)(MAX|MIN|LIMIT|LINES|BYTES|CHARS|ROWS|SHOWN|ITEMS|KEYS|ENTRIES|COUNT|SIZE)(_|$)"
)
# Module-level constants named like bounds that are not output bounds, and why.
NOT_BOUNDS = {
    ("settings.py", "DEFAULT_HTTP_MAX_CONNECTIONS"): "a setting's default (Settings.http_max_connections)",
    ("settings.py", "DEFAULT_HTTP_MAX_SESSIONS"): "a setting's default (Settings.http_max_sessions)",
    ("settings.py", "DEFAULT_HTTP_MAX_REQUEST_KIB"): "a setting's default (Settings.http_max_request_kib)",
    ("guard/redaction/masking.py", "MEMO_MAX_CHARS"): "a cache of cleaned strings",
    ("guard/redaction/masking.py", "MEMO_MAX_ENTRIES"): "a cache of cleaned strings",
    ("guard/redaction/known.py", "SHORT_SECRET_CHARS"): "when a value is masked, not how much is shown",
    ("sources/local_logs.py", "SCAN_BYTES"): "when a local read hands over to the dashboard (same answer)",
    ("answers/stacks.py", "MAX_CONCURRENT_SAMPLES"): "py-spy processes run at once",
    ("reference/api.py", "MAX_HOPS"): "re-exports followed for one name: a guard against cycles",
    ("server/mcp_tasks.py", "SEAL_DIGEST_CHARS"): "the strength of a task id's HMAC, not a size shown",
    ("cluster.py", "RESTART_BACKOFF_MAX_S"): "the longest wait between embedded starts: a time, not a size",
}
# Where a bound goes in shaping/, diagnosis/ and answers/: these keywords, these cutters' sizes, these parameters.
BOUND_KEYWORD = re.compile(r"^(limit|lines|log_lines|chars|max_\w+)$")
CUTTERS = {"one_line", "cut_text", "fit_bytes", "truncate_text", "head_text", "tail_text", "first_line"}
CUTTERS |= {"cut_counted", "utf8_prefix", "error_lines", "names", "event_lines", "excerpt"}
# Numbers in those places that are not bounds, and why.
NOT_BOUND_USES = {
    (
        "diagnosis/facts.py",
        "link.subject.split()[:2]",
    ): "the entity a statement opens with: its first two words",
    ("shaping/stacks.py", "t.frames[:3]"): "what makes two stacks without user code the same group",
    (
        "answers/fleet.py",
        "hashlib.sha256(text.encode()).hexdigest()[:12]",
    ): "a digest's length: a key, not text",
    (
        "answers/serve.py",
        "hashlib.sha256(config.encode()).hexdigest()[:16]",
    ): "a digest's length: a key, not text",
    ("answers/stacks.py", '(self.node_id or "?")[:12]'): "a node id's prefix, as Ray's CLI shortens it",
    (
        "answers/logs.py",
        '.split(".")[0])[:40]',
    ): "a file name's stem searched for among the node's files: a key",
}


def literal(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal(node.operand)
        return None if inner is None else -inner
    return None


def is_number(node: ast.expr) -> bool:
    """A number, arithmetic on numbers, or another module's bound under a second name."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.BinOp):
        return is_number(node.left) and is_number(node.right)
    if isinstance(node, ast.UnaryOp):
        return is_number(node.operand)
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "limits"


def sources() -> Iterator[tuple[str, ast.Module, str]]:
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        yield path.relative_to(SRC).as_posix(), ast.parse(text), text


def bounds_named_outside(rel: str, tree: ast.Module) -> Iterator[str]:
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        for target in targets:
            named = isinstance(target, ast.Name) and BOUND_NAME.search(target.id) is not None
            if named and value is not None and is_number(value) and (rel, target.id) not in NOT_BOUNDS:
                yield f"{rel}:{node.lineno}: {target.id} = {ast.unparse(value)}"


def numbers_where_bounds_go(rel: str, tree: ast.Module, text: str) -> Iterator[str]:
    lines = text.splitlines()
    for node in ast.walk(tree):
        found = ""
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and node.slice.step is None:
            upper, lower = literal(node.slice.upper), literal(node.slice.lower)
            keeps_head = node.slice.lower is None and upper is not None and upper >= 2
            keeps_tail = node.slice.upper is None and lower is not None and lower <= -2
            found = ast.unparse(node) if keeps_head or keeps_tail else ""
        elif isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            sizes = [a for a in node.args[0 if name == "excerpt" else 1 :] if name in CUTTERS]
            sizes += [k.value for k in node.keywords if k.arg and BOUND_KEYWORD.match(k.arg)]
            if any((literal(v) or 0) >= 2 for v in sizes):
                found = ast.unparse(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [*a.posonlyargs, *a.args]
            pairs = [
                *zip(params[len(params) - len(a.defaults) :], a.defaults, strict=True),
                *zip(a.kwonlyargs, a.kw_defaults, strict=True),
            ]
            if any(BOUND_KEYWORD.match(p.arg) and (literal(d) or 0) >= 2 for p, d in pairs):
                found = f"def {node.name}(...)"
        if found and not any(r == rel and snippet in lines[node.lineno - 1] for r, snippet in NOT_BOUND_USES):
            yield f"{rel}:{node.lineno}: {found[:120]}"


def test_a_bound_refuses_a_default_outside_its_range() -> None:
    assert Bound(default=5, low=1, high=30).high == 30
    with pytest.raises(ValueError, match="between low and high"):
        Bound(default=0, low=1, high=30)
    with pytest.raises(ValueError, match="between low and high"):
        Bound(default=64_001, low=1_000, high=64_000)


def test_no_module_but_limits_names_a_bound() -> None:
    named = [
        hit for rel, tree, _ in sources() if rel != "limits.py" for hit in bounds_named_outside(rel, tree)
    ]
    assert not named, (
        "Move these bounds into limits.py (or say in NOT_BOUNDS why they are none):\n" + "\n".join(named)
    )


def test_shaping_and_diagnosis_write_no_bound_as_a_number() -> None:
    written = [
        hit
        for rel, tree, text in sources()
        if rel.startswith(("shaping/", "diagnosis/", "answers/"))
        for hit in numbers_where_bounds_go(rel, tree, text)
    ]
    assert not written, (
        "Name these bounds in limits.py (or say in NOT_BOUND_USES why they are none):\n" + "\n".join(written)
    )


def test_the_scan_sees_a_bound_written_as_a_number() -> None:
    text = "X_SHOWN = 5\nY = 2\n\ndef f(rows, limit=3):\n    return one_line(rows[:4], 160), g(limit=6), rows[-2:], rows[1:]\n"
    tree = ast.parse(text)
    assert [h.split(": ")[1] for h in bounds_named_outside("shaping/x.py", tree)] == ["X_SHOWN = 5"]
    found = [h.split(": ", 1)[1] for h in numbers_where_bounds_go("shaping/x.py", tree, text)]
    assert sorted(found) == sorted(
        ["def f(...)", "one_line(rows[:4], 160)", "rows[:4]", "g(limit=6)", "rows[-2:]"]
    )
