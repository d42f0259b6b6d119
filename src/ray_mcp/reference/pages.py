"""The Ray reference pages (docs/reference/*.md, package data): their front matter, text and index.

URIs: ray-docs://reference/index (every page with its one-line summary) and ray-docs://reference/{topic}.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.types import ResourceLink

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


# The Ray concepts an error message may name, and the page that explains each (first match first).
CONCEPT_PAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), topic)
    for pattern, topic in (
        (r"runtime_env|working_dir|py_modules|\bpip\b|conda", "11-runtime-environment"),
        (r"placement group|\bbundle", "15-scheduling-placement-groups"),
        (r"\bServe\b|deployment|replica", "06-ray-serve"),
        (r"\bactor", "03-ray-core-actors"),
        (r"token|credential|401|403", "20-security"),
        (r"submission id|\bjob\b", "12-job-submission"),
        (r"dashboard|unreachable|could not be reached", "13-dashboard-observability"),
    )
)


def concept_pages(message: str, most: int) -> list[str]:
    """The URIs of the reference pages that explain the Ray concepts ``message`` names, at most ``most``."""
    topics = dict.fromkeys(topic for pattern, topic in CONCEPT_PAGES if pattern.search(message))
    return [f"ray-docs://reference/{topic}" for topic in list(topics)[:most]]


def page_links(uris: Iterable[str]) -> list[ResourceLink]:
    """Resource links to the reference pages among ``uris`` (anything else, a prompt's name, is skipped)."""
    pages = {p.uri: p for p in reference_pages()}
    return [
        ResourceLink(uri=p.uri, name=p.topic, title=p.title, description=p.summary, mime_type=MARKDOWN)
        for p in (pages.get(uri) for uri in uris)
        if p is not None
    ]


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
