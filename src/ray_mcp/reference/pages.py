"""The Ray reference pages (docs/reference/*.md, package data): their front matter, text and index.


URIs: ray-docs://reference/index (every page with its one-line summary) and ray-docs://reference/{topic}.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

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


def parse_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown file into its YAML front matter (between ``---`` fences) and its body."""
    header = front_matter_text(text)
    if header is None:
        return {}, text
    meta = parse_yaml(header)
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
