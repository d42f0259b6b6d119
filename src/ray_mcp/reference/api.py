"""The live API reference (``ray-docs://api/<dotted.name>``), read statically from the installed Ray.

A docs read never imports or runs anything: importing a module chosen by the caller would run its top-level
code (``ray.util.client.client_app`` connects to a Ray Client server and runs actors; other modules print,
or block for seconds under the import lock). Instead the installed sources are parsed with ``ast``:

- the ``ray`` package directory is found on ``sys.path`` without importing it (``PathFinder``), and each
  dotted name is walked through the files: a package's ``__init__.py``, a module's ``.py`` (or the ``.pyi``
  stub of a compiled module), then the names bound in it (``def``, ``class``, assignments and ``from x import
  y`` re-exports, followed across modules), then class members;
- scripts, examples, tests, Ray Client and dashboard modules are refused, as are private names;
- an unknown or unreadable name raises ``LookupError`` with the reason and close matches (the resource
  handler turns it into MCP error -32602).

``read_symbol`` runs the lookup in a worker process (parsing holds the GIL) under its own small limiter and
a timeout, so that many concurrent reads can neither stall the event loop nor take the worker threads the
transports and the tools need; cancelling a read (or the timeout) kills its worker.
"""

from __future__ import annotations

import ast
import difflib
import inspect
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import anyio
import anyio.to_process
from anyio.lowlevel import RunVar

from ray_mcp.limits import (
    API_ANSWERS_CACHED,
    API_DOC_CHARS,
    API_LOOKUP_TIMEOUT_S,
    API_LOOKUP_WORKERS,
    API_MEMBERS_SHOWN,
    API_NAME_CHARS,
)
from ray_mcp.reference.source import (
    REFUSED_PARTS,
    REFUSED_PREFIXES,
    binding_of,
    class_members,
    dotted_name,
    is_compiled,
    module_file,
    module_members,
    parse_source,
    ray_root,
    refused_prefix,
    source_tree,
    submodules,
)
from ray_mcp.text import cut_counted, truncate_text

MAX_HOPS = 40  # re-exports followed for one name (cycles end here)

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("ray_mcp_docs_limiter")  # one per event loop
_answers: dict[str, tuple[bool, str]] = {}  # name -> (described?, markdown or reason), oldest first


@dataclass(frozen=True)
class Found:
    """What a dotted name resolved to: a module, or a node (def, class, assignment) in a module's source."""

    module: str
    path: Path
    node: ast.AST | None  # None: the module itself

    @property
    def is_module(self) -> bool:
        return self.node is None


# == public entry points ====================================================================================


async def read_symbol(qualified_name: str) -> str:
    """``describe_symbol`` in a worker process, at most API_LOOKUP_WORKERS at once, within API_LOOKUP_TIMEOUT_S.

    A process, not a thread: parsing a large module holds the GIL for up to a second, which would stall the
    event loop (and with it the transports and every other session). Answers are cached here too.
    """
    cached = _answers.get(qualified_name)
    if cached is None:
        try:
            limiter = _LIMITER.get()
        except LookupError:
            _LIMITER.set(limiter := anyio.CapacityLimiter(API_LOOKUP_WORKERS))
        try:
            with anyio.fail_after(API_LOOKUP_TIMEOUT_S):
                cached = await anyio.to_process.run_sync(
                    _describe_or_reason, qualified_name, cancellable=True, limiter=limiter
                )
        except TimeoutError:
            raise TimeoutError(
                f"Reading the reference of {qualified_name[:80]!r} took more than {API_LOOKUP_TIMEOUT_S:g} s (the "
                "server is busy); retry in a moment."
            ) from None
        if len(_answers) >= API_ANSWERS_CACHED:
            _answers.pop(next(iter(_answers)))
        _answers[qualified_name] = cached
    ok, text = cached
    if not ok:
        raise LookupError(text)
    return text


def _describe_or_reason(qualified_name: str) -> tuple[bool, str]:
    """Runs in the worker process: (True, markdown) or (False, why the name cannot be described)."""
    try:
        return True, describe_symbol(qualified_name)
    except LookupError as exc:
        return False, str(exc)


@lru_cache(maxsize=512)
def describe_symbol(qualified_name: str) -> str:
    """Markdown with the signature, docstring and members of a public Ray name, parsed from its source.

    Raises LookupError, whose message says why and lists close matches, for a name that cannot be described.
    """
    name = qualified_name.strip()
    parts = _check_name(qualified_name, name)
    found = _resolve_module("ray", parts[1:], 0)
    if isinstance(found, _Miss):
        raise LookupError(found.message(name))
    return _render(name, found)


# == checking the name ======================================================================================


def _check_name(given: str, name: str) -> list[str]:
    shown = truncate_text(given, 80)
    if len(name) > API_NAME_CHARS:
        raise LookupError(f"{shown!r} is too long for a Ray name (at most {API_NAME_CHARS} characters).")
    parts = name.split(".")
    if parts[0] != "ray" or not all(p.isidentifier() for p in parts):
        raise LookupError(f"{shown!r} is not a Ray name. Ask for a dotted name such as ray.remote.")
    if any(p.startswith("_") for p in parts[1:]):
        raise LookupError(f"{shown!r} is private; only public Ray names are described.")
    for part in parts[1:]:
        if part in REFUSED_PARTS:
            raise LookupError(
                f"{shown!r} is part of Ray's {REFUSED_PARTS[part]}, not its API; it is not described. "
                "Read ray-docs://reference/index for the documented APIs."
            )
    for prefix, why in REFUSED_PREFIXES.items():
        if name == prefix or name.startswith(prefix + "."):
            raise LookupError(f"{shown!r} is refused: it is {why}.")
    return parts


# == resolving a dotted name ================================================================================


@dataclass
class _Miss:
    """Where resolution stopped: the deepest name that exists, the part that does not, and the reason."""

    prefix: str
    missing: str
    choices: list[str]
    reason: str = ""

    def message(self, name: str) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            where = f"Ray {version('ray')}"
        except PackageNotFoundError:
            where = "the installed Ray"
        if self.reason:
            return f"{name} cannot be described: {self.reason.rstrip('.')}."
        close = difflib.get_close_matches(self.missing, self.choices, n=5, cutoff=0.5)
        hint = ", ".join(f"{self.prefix}.{c}" for c in close) or (
            f"none; read ray-docs://api/{self.prefix} for its members"
        )
        return f"{name} does not exist in {where}. Close matches: {hint}."


def _resolve_module(module: str, rest: list[str], hops: int) -> Found | _Miss:
    tree = source_tree(module)
    if tree is None:
        reason = (
            f"{module} is compiled code without a readable source or stub"
            if is_compiled(module)
            else f"the source of {module} cannot be read"
            if module_file(module)[0] is not None
            else "Ray's installed source cannot be found next to the server"
            if ray_root() is None
            else ""
        )
        return _Miss(module, rest[0] if rest else "", [], reason)
    path, module_tree = tree
    body = module_tree.body
    removed = _raises_on_import(body)
    if removed:
        return _Miss(module, rest[0] if rest else "", [], f"importing {module} raises {removed}")
    if not rest:
        return Found(module, path, None)
    head, tail = rest[0], rest[1:]
    if hops > MAX_HOPS:
        return _Miss(module, head, [], f"the name is re-exported more than {MAX_HOPS} times")
    miss: _Miss | None = None
    binding = binding_of(body, head)
    if binding is not None:
        result = _follow(module, path, binding, head, tail, hops + 1)
        if isinstance(result, Found):
            return result
        miss = result
    submodule = f"{module}.{head}"
    if module_file(submodule)[0] is not None or is_compiled(submodule):
        if refused_prefix(submodule):
            return _Miss(module, head, [], f"{submodule} is refused")
        result = _resolve_module(submodule, tail, hops + 1)
        if isinstance(result, Found) or miss is None:
            return result
    return miss or _Miss(module, head, module_members(module, body))


def _raises_on_import(body: list[ast.stmt]) -> str | None:
    """The error a module raises unconditionally at import (a removed library), as text; else None."""
    for stmt in body:
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc
            if isinstance(exc, ast.Call) and exc.args:
                message = " ".join(
                    str(a.value) for a in exc.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                )
                return f"{ast.unparse(exc.func)}: {message or ast.unparse(exc.args[0])}".strip()
            return ast.unparse(exc)
    return None


def _follow(module: str, path: Path, node: ast.AST, name: str, rest: list[str], hops: int) -> Found | _Miss:
    """Continue resolving ``rest`` from a binding of ``name`` found in ``module``."""
    if isinstance(node, ast.ImportFrom):
        source = _absolute(module, node, path)
        original = next(a.name for a in node.names if (a.asname or a.name) == name)
        if source is None or (source != "ray" and not source.startswith("ray.")):
            return _Miss(module, name, [], f"it is {source or '?'}.{original}, defined outside Ray")
        if source == module:  # `from ray import data` inside ray/__init__.py: the submodule
            return _resolve_module(f"{source}.{original}", rest, hops)
        return _resolve_module(source, [original, *rest], hops)
    if isinstance(node, ast.Import):
        target = next(
            a.name if a.asname else a.name.split(".")[0]
            for a in node.names
            if (a.asname or a.name.split(".")[0]) == name
        )
        if target != "ray" and not target.startswith("ray."):
            return _Miss(module, name, [], f"it is the module {target}, outside Ray")
        return _resolve_module(target, rest, hops)
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and not rest:
        return Found(module, path, node)
    if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Name | ast.Attribute):
        dotted = dotted_name(node.value)  # an alias: X = other.name
        if dotted:
            tree = source_tree(module)
            first = binding_of(tree[1].body, dotted[0]) if tree else None
            if first is not None and first is not node:
                return _follow(module, path, first, dotted[0], [*dotted[1:], *rest], hops + 1)
    if isinstance(node, ast.ClassDef):
        if not rest:
            return Found(module, path, node)
        member = binding_of(node.body, rest[0])
        if member is None or rest[0].startswith("_"):
            return _Miss(f"{module}.{node.name}", rest[0], class_members(node))
        if isinstance(member, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and len(rest) == 1:
            return Found(module, path, member)
        return _follow(module, path, member, rest[0], rest[1:], hops + 1)
    if not rest:
        return Found(module, path, node)
    return _Miss(module, rest[0], [], f"{name} is a {_kind(node)}, which has no member {rest[0]!r}")


def _absolute(module: str, node: ast.ImportFrom, path: Path) -> str | None:
    if not node.level:
        return node.module
    package = module.split(".") if path.name.startswith("__init__.") else module.split(".")[:-1]
    if node.level > 1:
        package = package[: len(package) - (node.level - 1)]
    if not package:
        return None
    return ".".join(package + ([node.module] if node.module else []))


# == rendering ==============================================================================================


def _kind(node: ast.AST | None) -> str:
    if node is None:
        return "module"
    if isinstance(node, ast.ClassDef):
        return "class"
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        decorators = {(dotted_name(d) or [""])[-1] for d in node.decorator_list}
        if "property" in decorators or "cached_property" in decorators:
            return "property"
        if "staticmethod" in decorators:
            return "static method"
        if "classmethod" in decorators:
            return "class method"
        return "async function" if isinstance(node, ast.AsyncFunctionDef) else "function"
    return "attribute"


def _signature(node: ast.AST, name: str) -> str | None:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if _kind(node) == "property":
            return f"{name}: {ast.unparse(node.returns)}" if node.returns else None
        args = node.args
        if args.posonlyargs or args.args:
            first = (args.posonlyargs or args.args)[0].arg
            if first in ("self", "cls"):
                args = _drop_first(args)
        text = f"{name}({ast.unparse(args)})"
        return text + (f" -> {ast.unparse(node.returns)}" if node.returns else "")
    if isinstance(node, ast.ClassDef):
        init = binding_of(node.body, "__init__")
        if isinstance(init, ast.FunctionDef | ast.AsyncFunctionDef):
            return f"{name}({ast.unparse(_drop_first(init.args))})"
        bases = ", ".join(ast.unparse(b) for b in node.bases)
        return f"class {name}({bases})" if bases else None
    if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        annotation = f": {ast.unparse(node.annotation)}" if isinstance(node, ast.AnnAssign) else ""
        value = ast.unparse(node.value)
        return f"{name}{annotation} = {truncate_text(value, 300)}"
    return None


def _drop_first(args: ast.arguments) -> ast.arguments:
    copy = ast.arguments(**{f: getattr(args, f) for f in args._fields})
    if copy.posonlyargs:
        copy.posonlyargs = copy.posonlyargs[1:]
    elif copy.args:
        copy.args = copy.args[1:]
        copy.defaults = copy.defaults[-len(copy.args) :] if copy.args else []
    return copy


def _render(name: str, found: Found) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ray_version = version("ray")
    except PackageNotFoundError:
        ray_version = "?"
    node = found.node
    tree = parse_source(found.path)
    kind = _kind(node)
    lines = [f"# {name}", "", f"{kind} in Ray {ray_version} (read from the installed package's source)", ""]
    last = name.rsplit(".", 1)[-1]
    signature = _signature(node, last) if node is not None else None
    if signature:
        lines += ["```python", signature, "```", ""]
    relative = found.path.relative_to(ray_root().parent) if ray_root() else found.path  # type: ignore[union-attr]
    where = f"Defined in `{relative}`" + (
        f" line {node.lineno}" if node is not None and hasattr(node, "lineno") else ""
    )
    lines += [where + ".", ""]
    doc_node = tree if node is None else node
    doc = None
    if isinstance(doc_node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        doc = ast.get_docstring(doc_node)
    doc = inspect.cleandoc(doc) if doc else "(no docstring)"
    if len(doc) > API_DOC_CHARS:
        doc = cut_counted(doc, API_DOC_CHARS)
    lines += [doc, ""]
    members: list[str] = []
    if node is None and tree is not None:
        members = module_members(found.module, tree.body)
    elif isinstance(node, ast.ClassDef):
        members = class_members(node)
    lines += _listing("Public members", name, members)
    if node is None:
        lines += _listing("Submodules", name, [s for s in submodules(found.module) if s not in members])
    return "\n".join(lines).rstrip() + "\n"


def _listing(title: str, name: str, members: list[str]) -> list[str]:
    if not members:
        return []
    shown = members[:API_MEMBERS_SHOWN]
    out = [f"## {title} ({len(members)})"] + [f"- `{name}.{m}`" for m in shown]
    if len(members) > len(shown):
        out.append(f"- … {len(members) - len(shown)} more")
    return [*out, ""]
