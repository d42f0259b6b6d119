"""The Ray reference pages (docs/reference/*.md, package data): their front matter, text and index.

URIs: ray-docs://reference/index (every page with its one-line summary) and ray-docs://reference/{topic}.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

MARKDOWN = "text/markdown"
INDEX_URI = "ray-docs://reference/index"


def data_dir(kind: str) -> Path:
    """``docs`` or ``prompts``: inside the installed wheel, or at the top of a source checkout."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_data" / kind
    return packaged if packaged.is_dir() else package.parents[1] / kind


@dataclass(frozen=True)
class Page:
    topic: str
    title: str
    summary: str
    path: Path

    @property
    def uri(self) -> str:
        return f"ray-docs://reference/{self.topic}"


@cache
def reference_pages() -> tuple[Page, ...]:
    pages = []
    for path in sorted((data_dir("docs") / "reference").glob("*.md")):
        meta = parse_front_matter(path.read_text(encoding="utf-8"))[0]
        pages.append(
            Page(
                topic=path.stem,
                title=str(meta.get("title", path.stem)),
                summary=str(meta.get("summary", "")),
                path=path,
            )
        )
    return tuple(pages)


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


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown file into its YAML front matter (between ``---`` fences) and its body."""
    if not text.startswith("---"):
        return {}, text
    header, fence, rest = text.partition("\n")[2].partition("\n---")
    if not fence:
        return {}, text
    # libyaml's safe loader when PyYAML was built with it: the same documents, ten times faster
    meta = yaml.load(header, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return (meta if isinstance(meta, dict) else {}), rest.partition("\n")[2]
