"""The live API reference: signature and docstring of a public Ray symbol, read from the installed Ray.

Talks to no cluster; serves the ray-docs://api/{qualified_name} resource."""

from __future__ import annotations

import contextlib
import difflib
from typing import Any

from ray_mcp.limits import API_DOC_CHARS, API_MEMBERS_SHOWN


def describe_symbol(qualified_name: str) -> str:
    """Markdown with the signature and docstring of a public Ray symbol, read from the installed Ray.

    Raises LookupError, whose message lists close matches, for a name that does not exist.
    """
    import importlib
    import inspect

    name = qualified_name.strip()
    parts = name.split(".")
    if parts[0] != "ray" or not all(p.isidentifier() for p in parts):
        raise LookupError(f"{qualified_name!r} is not a Ray name. Ask for a dotted name such as ray.remote.")
    if any(p.startswith("_") for p in parts[1:]):
        raise LookupError(f"{qualified_name!r} is private; only public Ray names are described.")

    try:
        obj: Any = importlib.import_module("ray")
    except ImportError as exc:
        raise LookupError(f"Ray cannot be imported here: {exc}") from exc
    obj = _resolve(obj, parts, 1)
    if obj is _MISSING:
        parent, i = _deepest_parent(parts)
        public = [m for m in dir(parent) if not m.startswith("_")]
        close = difflib.get_close_matches(parts[i], public, n=5, cutoff=0.5)
        prefix = ".".join(parts[:i])
        hint = (
            ", ".join(f"{prefix}.{c}" for c in close) or f"none; read ray-docs://api/{prefix} for its members"
        )
        raise LookupError(f"{name} does not exist in Ray {_ray_version()}. Close matches: {hint}.")

    kind = "module" if inspect.ismodule(obj) else "class" if inspect.isclass(obj) else "function"
    if not inspect.ismodule(obj) and not inspect.isclass(obj) and not callable(obj):
        kind = type(obj).__name__
    lines = [f"# {name}", "", f"{kind} in Ray {_ray_version()} (read from the installed package)", ""]
    target = getattr(obj, "__wrapped__", obj)
    with contextlib.suppress(TypeError, ValueError):
        if callable(obj) and not inspect.ismodule(obj):
            lines += ["```python", f"{parts[-1]}{inspect.signature(target)}", "```", ""]
    with contextlib.suppress(TypeError, OSError):
        source = inspect.getsourcefile(target)
        if source:
            _, line = inspect.getsourcelines(target)
            lines += [f"Defined in `{source.split('site-packages/')[-1]}` line {line}.", ""]
    doc = inspect.getdoc(obj) or "(no docstring)"
    if len(doc) > API_DOC_CHARS:
        doc = doc[:API_DOC_CHARS] + f"\n\n[docstring cut at {API_DOC_CHARS} characters]"
    lines += [doc, ""]
    if inspect.ismodule(obj) or inspect.isclass(obj):
        members = getattr(obj, "__all__", None) if inspect.ismodule(obj) else None
        members = sorted(members or (m for m in vars(obj) if not m.startswith("_")))
        if members:
            shown = members[:API_MEMBERS_SHOWN]
            lines.append(f"## Public members ({len(members)})")
            lines += [f"- `{name}.{m}`" for m in shown]
            if len(members) > len(shown):
                lines.append(f"- … {len(members) - len(shown)} more")
    return "\n".join(lines).rstrip() + "\n"


_MISSING = object()


def _resolve(obj: Any, parts: list[str], i: int) -> Any:
    """Walk ``parts[i:]`` from ``obj``. The package namespace wins over a submodule of the same name
    (``ray.serve.deployment`` is the decorator), with a fall back to the submodule when the rest of the
    name only exists there (``ray.util.placement_group.placement_group``)."""
    import importlib

    if i == len(parts):
        return obj
    candidates = []
    if hasattr(obj, parts[i]):
        candidates.append(getattr(obj, parts[i]))
    try:
        module = importlib.import_module(".".join(parts[: i + 1]))
        if all(module is not c for c in candidates):
            candidates.append(module)
    except ImportError:
        pass
    for candidate in candidates:
        found = _resolve(candidate, parts, i + 1)
        if found is not _MISSING:
            return found
    return _MISSING


def _deepest_parent(parts: list[str]) -> tuple[Any, int]:
    """The object of the longest prefix of ``parts`` that resolves, and the index of the first part that does not."""
    import importlib

    obj: Any = importlib.import_module("ray")
    for i in range(1, len(parts)):
        found = _resolve(obj, parts[: i + 1], i)
        if found is _MISSING:
            return obj, i
        obj = found
    return obj, len(parts) - 1


def _ray_version() -> str:
    from importlib.metadata import version

    return version("ray")
