"""Ray reference docs as MCP resources, from package data; and the live API reference of the installed Ray.

URIs:
    ray-docs://reference/index            every page with its one-line summary
    ray-docs://reference/{topic}          one page, e.g. ray-docs://reference/12-job-submission
    ray-docs://api/{qualified_name}       signature and docstring of a public Ray symbol, e.g. ray.remote,
                                          parsed from the installed source, never imported (api_reference)
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource

from ray_mcp.lazy import import_module

MARKDOWN = "text/markdown"
INDEX_URI = "ray-docs://reference/index"


def data_dir(kind: str) -> Path:
    """``docs`` or ``prompts``: inside the installed wheel, or at the top of a source checkout."""
    packaged = Path(__file__).parent / "_data" / kind
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / kind


@dataclass(frozen=True)
class Page:
    topic: str
    title: str
    summary: str
    path: Path

    @property
    def uri(self) -> str:
        return f"ray-docs://reference/{self.topic}"

    @property
    def meta(self) -> dict[str, Any]:
        """The whole front matter (YAML), parsed on demand: startup needs only the title and summary."""
        return parse_front_matter(self.path.read_text(encoding="utf-8"))[0]


@cache
def reference_pages() -> tuple[Page, ...]:
    pages = []
    for path in sorted((data_dir("docs") / "reference").glob("*.md")):
        head = front_matter_scalars(path.read_text(encoding="utf-8"), ("title", "summary"))
        if head is None:  # a value the line reader cannot take as it is: let YAML read it
            head = {k: str(v) for k, v in parse_front_matter(path.read_text(encoding="utf-8"))[0].items()}
        pages.append(
            Page(
                topic=path.stem,
                title=head.get("title", path.stem),
                summary=head.get("summary", ""),
                path=path,
            )
        )
    return tuple(pages)


def front_matter_scalars(text: str, keys: tuple[str, ...]) -> dict[str, str] | None:
    """Top-level plain scalars of a page's front matter without a YAML parser (PyYAML costs ~30 ms at start).

    None when one of ``keys`` is not a plain one-line scalar (quoted, a block, a flow collection): the caller
    then parses the YAML.
    """
    if not text.startswith("---\n"):
        return {}
    header = text[4:].partition("\n---")[0]
    found: dict[str, str] = {}
    lines = header.splitlines()
    for i, line in enumerate(lines):
        key, sep, value = line.partition(": ")
        if not sep or key not in keys:
            continue
        value = value.strip()
        continued = i + 1 < len(lines) and lines[i + 1].startswith(" ")
        if not value or value[0] in "'\"|>[{&*!%@`#" or " #" in value or continued:
            return None
        found[key] = value
    return found


def page_text(topic: str) -> str:
    for page in reference_pages():
        if page.topic == topic:
            return page.path.read_text(encoding="utf-8")
    raise ResourceNotFoundError(f"No reference page {topic!r}. Read {INDEX_URI} for the list of pages.")


def index_text() -> str:
    lines = [
        "# Ray reference pages",
        "",
        "Read one with its URI. Live API signatures: ray-docs://api/{dotted.name}.",
        "",
    ]
    lines += [f"- `{p.uri}`: **{p.title}**. {p.summary}" for p in reference_pages()]
    return "\n".join(lines) + "\n"


def register(server: MCPServer) -> None:
    server.add_resource(
        FunctionResource(
            uri=INDEX_URI,
            name="ray-reference-index",
            title="Ray reference: index",
            description="Every Ray reference page with a one-line summary. Start here.",
            mime_type=MARKDOWN,
            fn=index_text,
        )
    )
    for page in reference_pages():
        server.add_resource(
            FunctionResource(
                uri=page.uri,
                name=page.topic,
                title=f"Ray reference: {page.title}",
                description=page.summary,
                mime_type=MARKDOWN,
                fn=functools.partial(page_text, page.topic),
            )
        )

    @server.resource(
        "ray-docs://api/{qualified_name}",
        name="ray-api",
        title="Ray API reference (live)",
        description="Signature, docstring and members of any public Ray symbol, read from the source of the Ray "
        "installed next to the server (nothing is imported or run), e.g. "
        "ray-docs://api/ray.util.placement_group.placement_group.",
        mime_type=MARKDOWN,
    )
    async def api_reference(qualified_name: str) -> str:
        try:  # api_reference is imported on first use, off the event loop (ast, difflib, the source reader)
            return await (await import_module("ray_mcp.api_reference")).read_symbol(qualified_name)
        except LookupError as exc:  # unknown, private, refused or unreadable: invalid params (-32602)
            raise ResourceNotFoundError(str(exc)) from None
        except TimeoutError as exc:
            raise ResourceError(str(exc)) from None


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown file into its YAML front matter (between ``---`` fences) and its body."""
    header = front_matter_text(text)
    if header is None:
        return {}, text
    from ray_mcp.catalog import known_front_matter  # the prompts' front matter, parsed when it was written

    known = known_front_matter().get(header)
    meta = copy.deepcopy(known) if known is not None else parse_yaml(header)
    body = text.partition("\n")[2].partition("\n---")[2]
    return meta, body.partition("\n")[2]


def front_matter_text(text: str) -> str | None:
    """The YAML between a Markdown file's opening ``---`` fence and its closing one; None without both."""
    if not text.startswith("---"):
        return None
    _, _, rest = text.partition("\n")
    header, sep, _ = rest.partition("\n---")
    return header if sep else None


def parse_yaml(header: str) -> dict[str, Any]:
    import yaml  # ships with Ray; only needed when docs are loaded

    # libyaml's safe loader when PyYAML has it: the same documents, 10x faster
    meta = yaml.load(header, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    return meta if isinstance(meta, dict) else {}
