"""Expert guidance for Ray work, served as MCP prompts from ``prompts/*.md`` (package data).

Each file has front matter: ``name``, ``title``, ``description``, ``arguments`` (name, description,
required), ``tools`` (the ray-mcp tools it tells the agent to call) and ``resources`` (reference pages that
are embedded in the rendered prompt). The body uses ``{{argument}}`` placeholders.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, Prompt, PromptArgument, UserMessage
from mcp.types import EmbeddedResource, TextResourceContents

from ray_mcp.reference.pages import data_dir, page_text, parse_front_matter
from ray_mcp.server.icons import RAY_ICONS


@dataclass(frozen=True)
class PromptFile:
    name: str
    title: str
    description: str
    arguments: tuple[PromptArgument, ...]
    tools: tuple[str, ...]
    resources: tuple[str, ...]
    body: str
    path: Path

    def render(self, values: dict[str, Any]) -> list[Message]:
        text = self.body
        for argument in self.arguments:
            value = str(values.get(argument.name) or "").strip() or "(not given)"
            text = text.replace("{{" + argument.name + "}}", value)
        messages: list[Message] = [UserMessage(text.strip())]
        for uri in self.resources:
            topic = uri.removeprefix("ray-docs://reference/")
            contents = TextResourceContents(uri=uri, mime_type="text/markdown", text=page_text(topic))
            messages.append(UserMessage(EmbeddedResource(type="resource", resource=contents)))
        return messages


@cache
def prompt_files() -> tuple[PromptFile, ...]:
    files = []
    for path in sorted(data_dir("prompts").glob("*.md")):
        meta, body = parse_front_matter(path.read_text(encoding="utf-8"))
        if "name" not in meta:
            continue  # e.g. prompts/README.md
        arguments = tuple(
            PromptArgument(
                name=a["name"], description=a.get("description"), required=bool(a.get("required", False))
            )
            for a in meta.get("arguments") or []
        )
        files.append(
            PromptFile(
                name=str(meta["name"]),
                title=str(meta.get("title", meta["name"])),
                description=str(meta.get("description", "")),
                arguments=arguments,
                tools=tuple(meta.get("tools") or ()),
                resources=tuple(meta.get("resources") or ()),
                body=body,
                path=path,
            )
        )
    return tuple(files)


def register(server: MCPServer) -> None:
    for prompt in prompt_files():

        def render(prompt: PromptFile = prompt, **values: Any) -> list[Message]:
            return prompt.render(values)

        server.add_prompt(
            Prompt(
                name=prompt.name,
                title=prompt.title,
                description=prompt.description,
                arguments=list(prompt.arguments),
                fn=render,
                context_kwarg=None,
                icons=RAY_ICONS,
            )
        )
