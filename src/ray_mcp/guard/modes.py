"""Which tools exist in which mode: every tool is read, write or destructive, by its annotations;
``--read-only`` lists only read tools, and destructive tools are listed only with ``--allow-destructive``."""

from __future__ import annotations

from typing import Literal

from mcp.types import ToolAnnotations

ToolKind = Literal["read", "write", "destructive"]


def tool_kind(annotations: ToolAnnotations | None) -> ToolKind:
    if annotations is None or annotations.read_only_hint is not True:
        return "destructive" if annotations is not None and annotations.destructive_hint else "write"
    return "read"


def tool_allowed(kind: ToolKind, *, read_only: bool, allow_destructive: bool) -> tuple[bool, str]:
    if kind != "read" and read_only:
        return False, "the server runs with --read-only"
    if kind == "destructive" and not allow_destructive:
        return False, "destructive tools need --allow-destructive"
    return True, ""
