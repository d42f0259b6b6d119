"""What a server lists before it has imported its tools: catalog.json, written by ``python -m ray_mcp.catalog``.

Building every tool at startup (importing the 12 tool areas with the adapter and the models under them, and
the SDK making an arguments model and a schema for each of 25 tools) was most of ray-mcp's cold start. The
catalog holds, for every tool, what tools/list shows of it and where it lives; the server lists the tools from
it and builds a tool when it is first called (or when the warm-up gets to it). It also holds the prompts'
front matter, keyed by its exact text, so that listing them needs no YAML parser.

The catalog is used only if its fingerprint matches this copy of ray-mcp (every source file of the package,
the prompt files, and the versions of the SDK and pydantic, which shape the schemas): a catalog that does not
match is ignored and every tool is built at startup, as before. tests/test_catalog.py checks that the
catalog in the repository matches, and that a server listing from it lists exactly what building every
tool lists.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from ray_mcp.guard.modes import ToolKind

log = logging.getLogger(__name__)

PATH = Path(__file__).with_name("catalog.json")
# The tool areas (modules of ray_mcp.tools), in the order their tools are listed.
AREAS = (
    "cluster", "diagnose", "jobs", "logs", "actors", "placement_groups", "nodes", "tasks", "serve",
    "topology", "train", "stacks",
)  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """One tool: its area (a module of ray_mcp.tools), and its tools/list entry, as built with every tool."""

    area: str
    kind: ToolKind  # read, write or destructive (the listed annotations leave out the spec's defaults)
    listed: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.listed["name"])


@dataclass(frozen=True)
class Catalog:
    tools: tuple[Entry, ...]


def fingerprint() -> str:
    """What the listed tools depend on: every source file of ray_mcp, the prompts, the SDK and pydantic."""
    import pydantic

    from ray_mcp.reference.pages import data_dir

    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"mcp {version('mcp')} pydantic {pydantic.VERSION}\n".encode())
    package = Path(__file__).parent
    prompts = data_dir("prompts")
    named = [("ray_mcp/" + name, package / name) for name in _sources(package)]
    named += [("prompts/" + p.name, p) for p in sorted(prompts.glob("*.md"))]
    for name, path in named:
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _sources(top: Path, prefix: str = "") -> list[str]:
    """The .py files under ``top``, as sorted relative names (os.scandir: a third of pathlib.rglob's time)."""
    names = []
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.is_dir() and entry.name != "__pycache__":
                names += _sources(Path(entry.path), f"{prefix}{entry.name}/")
            elif entry.name.endswith(".py"):
                names.append(prefix + entry.name)
    return sorted(names)


@functools.cache
def _data(path: Path = PATH) -> dict[str, Any]:
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        log.info("ray-mcp: cannot read %s (%s); every tool is built at startup", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


@functools.cache
def load(path: Path = PATH) -> Catalog | None:
    """The catalog, if it is there and matches this copy of ray-mcp; else None (every tool is built)."""
    data = _data(path)
    if not data or data.get("fingerprint") != fingerprint():
        if data:
            log.info("ray-mcp: %s does not match the sources; every tool is built at startup", path)
        return None
    try:
        tools = tuple(Entry(str(t["area"]), _kind(t["kind"]), dict(t["listed"])) for t in data["tools"])
        if any(entry.area not in AREAS for entry in tools):
            raise ValueError("a tool of an unknown area")
    except (KeyError, TypeError, ValueError) as exc:
        log.info("ray-mcp: %s is malformed (%s); every tool is built at startup", path, exc)
        return None
    return Catalog(tools)


def _kind(value: Any) -> ToolKind:
    if value not in ("read", "write", "destructive"):
        raise ValueError(f"unknown tool kind {value!r}")
    return cast("ToolKind", value)


def known_front_matter() -> dict[str, dict[str, Any]]:
    """The prompts' front matter parsed when the catalog was written, keyed by its exact text (the YAML between
    the fences), so that it cannot be stale."""
    known = _data().get("front_matter")
    return known if isinstance(known, dict) else {}


class Recorder:
    """Stands in for the server while an area's ``register(server)`` runs: keeps each tool's function and the
    arguments of ``server.tool(...)``, so that one tool can be built without building its neighbours."""

    def __init__(self) -> None:
        self.tools: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}

    def tool(
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def record(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.tools[name or fn.__name__] = (fn, {"name": name, **kwargs})
            return fn

        return record


@functools.cache
def area_tools(area: str) -> dict[str, tuple[Callable[..., Any], dict[str, Any]]]:
    """The tools an area registers, by name (imports the area: call it off the event loop)."""
    import importlib

    if area not in AREAS:
        raise ValueError(f"unknown tool area {area!r}")
    recorder = Recorder()
    importlib.import_module(f"ray_mcp.tools.{area}").register(recorder)
    return recorder.tools


def build() -> dict[str, Any]:
    """The catalog of this copy of ray-mcp: a server that builds every tool (destructive ones included) lists
    them, and each is mapped to its area."""
    import anyio

    from ray_mcp.reference.pages import data_dir, front_matter_text, parse_yaml
    from ray_mcp.server.build import build_server
    from ray_mcp.settings import Settings

    server = build_server(Settings(address="http://127.0.0.1:8265", allow_destructive=True), catalog=None)
    listed = anyio.run(server.list_tools)
    area_of = {name: area for area in AREAS for name in area_tools(area)}
    tools = [
        {
            "area": area_of[t.name],
            "kind": server.tool_kinds[t.name],
            "listed": t.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
        for t in listed
    ]
    front_matter = {}
    for path in sorted(data_dir("prompts").glob("*.md")):
        header = front_matter_text(path.read_text(encoding="utf-8"))
        if header is not None:
            front_matter[header] = parse_yaml(header)
    return {"fingerprint": fingerprint(), "tools": tools, "front_matter": front_matter}


def main() -> None:
    PATH.write_text(
        json.dumps(build(), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
