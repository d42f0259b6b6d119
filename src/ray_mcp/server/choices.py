"""Fixed-choice arguments in any case: ``state="dead"`` means ``"DEAD"`` in every tool.

Tools declare their choices as ``Literal[...]``, which pydantic matches case-sensitively; agents write
``"dead"``, ``"Failed"`` or ``"STDERR"``. A middleware rewrites each string argument that matches exactly one
declared choice ignoring case, before the SDK validates the call. The choices come from the tool's own input
schema (``enum`` and ``const``, also under ``anyOf``/``oneOf``, ``items`` and ``$ref``), so every tool, present and
future, gets it without code of its own. Anything that matches no choice (or several) is left for the SDK
to reject with the list of valid values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext


def _choices(schema: Any, defs: dict[str, Any], depth: int = 0) -> list[str]:
    """The string choices a schema node allows (through unions and $ref), or [] for a free value."""
    if not isinstance(schema, dict) or depth > 8:
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _choices(defs.get(ref.removeprefix("#/$defs/")), defs, depth + 1)
    found = [v for v in schema.get("enum", []) if isinstance(v, str)]
    if isinstance(schema.get("const"), str):
        found.append(schema["const"])
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            found += _choices(option, defs, depth + 1)
    return found


def _item_schema(schema: Any, defs: dict[str, Any]) -> list[Any]:
    """The item schemas of the array forms a schema node allows."""
    if not isinstance(schema, dict):
        return []
    out = [schema["items"]] if isinstance(schema.get("items"), dict) else []
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            out += _item_schema(option, defs)
    return out


def _fold(value: Any, choices: list[str]) -> Any:
    if not isinstance(value, str) or not choices or value in choices:
        return value
    matches = {c for c in choices if c.casefold() == value.strip().casefold()}
    return matches.pop() if len(matches) == 1 else value


def normalize_choices(arguments: dict[str, Any], input_schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of the arguments with each fixed-choice string (or list of them) in its declared case."""
    defs = input_schema.get("$defs") or {}
    properties = input_schema.get("properties") or {}
    out = dict(arguments)
    for name, value in arguments.items():
        schema = properties.get(name)
        if schema is None:
            continue
        if isinstance(value, str):
            out[name] = _fold(value, _choices(schema, defs))
        elif isinstance(value, list):
            choices = [c for item in _item_schema(schema, defs) for c in _choices(item, defs)]
            out[name] = [_fold(v, choices) for v in value]
    return out


class CaseInsensitiveChoices(ServerMiddleware[Any]):
    """Rewrites fixed-choice arguments of every tools/call to their declared case (see normalize_choices)."""

    def __init__(self, input_schemas: Callable[[], Awaitable[dict[str, dict[str, Any]]]]) -> None:
        self._input_schemas = input_schemas

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method == "tools/call" and params is not None:
            name, arguments = params.get("name"), params.get("arguments")
            if isinstance(name, str) and isinstance(arguments, dict) and arguments:
                schema = (await self._input_schemas()).get(name)
                if schema is not None:
                    normalized = normalize_choices(arguments, schema)
                    if normalized != arguments:
                        ctx = replace(ctx, params={**params, "arguments": normalized})
        return await call_next(ctx)
