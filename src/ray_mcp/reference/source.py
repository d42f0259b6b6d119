"""Ray's installed sources, found and parsed without importing anything: the ``ray`` package directory on
``sys.path``, a module's file (``.py``, or the ``.pyi`` stub of a compiled module), its parsed tree, its submodules,
and the names its statements bind (``def``, ``class``, assignments, imports, ``__all__``). The parts of Ray that are
programs or test material are named here and never listed. Used by api_reference (``ray-docs://api/...``)."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from functools import cache, lru_cache
from importlib.machinery import PathFinder
from pathlib import Path

from ray_mcp.limits import API_SOURCE_BYTES

# Parts of Ray that are programs or test material, not API: never described.
REFUSED_PARTS = {
    "tests": "tests",
    "test": "tests",
    "test_utils": "tests",
    "conftest": "tests",
    "examples": "examples",
    "example": "examples",
    "scripts": "scripts (command-line programs)",
    "dashboard": "the dashboard server",
    "__main__": "scripts (command-line programs)",
    "setup-dev": "scripts (command-line programs)",
    "thirdparty_files": "vendored third-party code",
    "benchmarks": "benchmarks",
    "release": "release tooling",
}
REFUSED_PREFIXES = {
    "ray.util.client": "Ray Client internals (ray.util.client): use ray.init('ray://...') and read ray.init",
    "ray.core.generated": "generated protocol code",
}


# == finding and parsing sources (never importing) ==========================================================


@cache
def ray_root() -> Path | None:
    """The installed ``ray`` package directory, found on sys.path without importing anything."""
    spec = PathFinder.find_spec("ray", sys.path)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def module_file(module: str) -> tuple[Path | None, bool]:
    """(source file of a ``ray.*`` module, is it a package). A compiled module counts through its ``.pyi``."""
    root = ray_root()
    if root is None or (module != "ray" and not module.startswith("ray.")):
        return None, False
    base = root.joinpath(*module.split(".")[1:])
    for candidate, package in (
        (base / "__init__.py", True),
        (base / "__init__.pyi", True),
        (base.with_name(base.name + ".py"), False),
        (base.with_name(base.name + ".pyi"), False),
    ):
        if candidate.is_file():
            return candidate, package
    return None, False


def is_compiled(module: str) -> bool:
    root = ray_root()
    if root is None:
        return False
    base = root.joinpath(*module.split(".")[1:])
    return any(base.parent.glob(base.name + ".*.so")) or (base.with_name(base.name + ".so")).is_file()


@lru_cache(maxsize=64)
def parse_source(path: Path) -> ast.Module | None:
    try:
        if path.stat().st_size > API_SOURCE_BYTES:
            return None
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def source_tree(module: str) -> tuple[Path, ast.Module] | None:
    path, _ = module_file(module)
    if path is None:
        return None
    tree = parse_source(path)
    return (path, tree) if tree is not None else None


def submodules(module: str) -> list[str]:
    path, package = module_file(module)
    if path is None or not package:
        return []
    names = set()
    for child in path.parent.iterdir():
        stem = child.name.split(".")[0]
        if not stem.isidentifier() or stem.startswith("_") or stem in REFUSED_PARTS:
            continue
        if (child.is_dir() and (child / "__init__.py").is_file()) or child.suffix in (".py", ".pyi"):
            names.add(stem)
    return sorted(n for n in names if not refused_prefix(f"{module}.{n}"))


def refused_prefix(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in REFUSED_PREFIXES)


# == bindings in a module's statements ========================================================================


def dotted_name(expr: ast.expr) -> list[str] | None:
    if isinstance(expr, ast.Name):
        return [expr.id]
    if isinstance(expr, ast.Attribute):
        base = dotted_name(expr.value)
        return [*base, expr.attr] if base else None
    return None


def statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, including those inside if/try/with blocks (a conditional definition)."""
    for stmt in body:
        if isinstance(stmt, ast.If | ast.Try | ast.With | ast.TryStar):
            blocks = [stmt.body, getattr(stmt, "orelse", []), getattr(stmt, "finalbody", [])]
            blocks += [h.body for h in getattr(stmt, "handlers", [])]
            for block in blocks:
                yield from statements(block)
        else:
            yield stmt


def bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return [stmt.target.id]
    if isinstance(stmt, ast.ImportFrom):
        return [a.asname or a.name for a in stmt.names if a.name != "*"]
    if isinstance(stmt, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in stmt.names]
    return []


def binding_of(body: list[ast.stmt], name: str) -> ast.stmt | None:
    """The statement that binds ``name`` last (the one Python keeps), skipping typing overloads."""
    found = None
    for stmt in statements(body):
        if name in bound_names(stmt) and not is_overload(stmt):
            found = stmt
    return found


def is_overload(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    return any((dotted_name(d) or [""])[-1] == "overload" for d in stmt.decorator_list)


# == members ================================================================================================


def literal_all(body: list[ast.stmt]) -> list[str] | None:
    names: list[str] | None = None
    for stmt in statements(body):
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
        ):
            names, value = [], stmt.value
        elif (
            isinstance(stmt, ast.AugAssign)
            and isinstance(stmt.target, ast.Name)
            and stmt.target.id == "__all__"
        ):
            value = stmt.value
        if value is None:
            continue
        strings = string_list(value)
        if strings is None or names is None:
            return None  # built at run time: fall back to the bound names
        names += strings
    return names


def string_list(expr: ast.expr) -> list[str] | None:
    if isinstance(expr, ast.List | ast.Tuple):
        items = [e.value for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return items if len(items) == len(expr.elts) else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = string_list(expr.left), string_list(expr.right)
        return left + right if left is not None and right is not None else None
    return None


def module_members(module: str, body: list[ast.stmt]) -> list[str]:
    listed = literal_all(body)
    if listed is not None:
        return sorted(set(listed))
    names = {n for stmt in statements(body) if not isinstance(stmt, ast.Import) for n in bound_names(stmt)}
    return sorted(n for n in names if not n.startswith("_"))


def class_members(node: ast.ClassDef) -> list[str]:
    names = {n for stmt in statements(node.body) for n in bound_names(stmt)}
    return sorted(n for n in names if not n.startswith("_"))
