"""Compact JSON schemas for ``tools/list``: what a client needs to call a tool and to read its answer.

pydantic's schemas carry a ``title`` on every property, ``default: null`` on every optional field and an
``anyOf`` pair for every nullable one; the output schemas also spell out every nested model. An agent's
context pays for each byte of ``tools/list`` on every turn, so ray-mcp publishes:

- input schemas without titles and null defaults, nullable scalars as ``"type": [T, "null"]`` (the same
  constraints, descriptions and enums);
- output schemas that name the answer's own fields, their JSON types and which are always there; what is
  inside a nested object or array is documented by its model in ``ray_mcp.models``. Every structured result
  is valid against the published schema (the SDK's client checks each one in the tests). The optional
  ``notes`` and ``hints`` that most answers carry (lists of strings, the same meaning in every tool) are
  described once, in the server's instructions, instead of in each schema.
"""

from __future__ import annotations

from typing import Any

from mcp.types import ToolAnnotations

_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})
_NULL = {"type": "null"}
_COMBINATORS = frozenset({"anyOf", "oneOf", "allOf", "not", "$ref", "const"})
# Optional answer fields described once in the server's instructions (INSTRUCTIONS), not in every schema.
SHARED_FIELDS = frozenset({"notes", "hints"})


# The MCP spec's defaults for tool hints; destructiveHint and idempotentHint only mean something for a tool
# that is not read-only. A write tool always says whether it is destructive (the default would be true).
# readOnlyHint is always published: it is the hint clients act on.
_HINT_DEFAULTS = {"idempotent_hint": False, "open_world_hint": True}


def compact_annotations(annotations: ToolAnnotations | None) -> ToolAnnotations | None:
    """The hints that differ from the spec's defaults or mean something for this tool (see above)."""
    if annotations is None:
        return None
    read_only = annotations.read_only_hint is True
    kept: dict[str, Any] = {"title": annotations.title, "read_only_hint": read_only}
    if not read_only:
        kept["destructive_hint"] = annotations.destructive_hint is not False
        kept["idempotent_hint"] = annotations.idempotent_hint
    kept["open_world_hint"] = annotations.open_world_hint
    for name, default in _HINT_DEFAULTS.items():
        if kept.get(name) == default:
            kept[name] = None
    return ToolAnnotations(**kept)


def compact_input(schema: dict[str, Any]) -> dict[str, Any]:
    """The input schema without titles, null defaults, ``additionalProperties: true`` (the default) and
    nullable ``anyOf`` pairs. An optional argument is published without its ``null``: a client leaves it out
    instead (the server still takes an explicit null, as before)."""
    out = _compact(schema, keep_descriptions=True)
    assert isinstance(out, dict)
    return _omit_optional_nulls(out)


def _omit_optional_nulls(node: dict[str, Any]) -> dict[str, Any]:
    """Drop ``null`` from the types of the properties an object does not require, at every depth."""
    props = node.get("properties")
    if isinstance(props, dict):
        required = set(node.get("required") or ())
        node["properties"] = {
            name: _omit_optional_nulls(sub if name in required else without_null(sub))
            for name, sub in props.items()
        }
    return node


def without_null(node: dict[str, Any]) -> dict[str, Any]:
    """The schema without its ``null`` option (a type list, an enum value or an ``anyOf`` branch)."""
    out = dict(node)
    t = out.get("type")
    if isinstance(t, list) and "null" in t and len(t) > 1:
        rest = [x for x in t if x != "null"]
        out["type"] = rest[0] if len(rest) == 1 else rest
        if "enum" in out:
            out["enum"] = [v for v in out["enum"] if v is not None]
    options = out.get("anyOf")
    if isinstance(options, list) and _NULL in options and len(options) > 2:
        out["anyOf"] = [o for o in options if o != _NULL]
    return out


def compact_output(schema: dict[str, Any], *, nulls: bool = True) -> dict[str, Any]:
    """The answer's top-level fields with their types; nested models reduced to objects (see the module).

    ``nulls=False`` for an answer whose structured content never holds a null (ray-mcp's results drop them).
    """
    props = schema.get("properties") or {}
    defs = schema.get("$defs") or {}
    required = set(schema.get("required") or ())
    fields = {
        name: _shallow(sub, defs)
        for name, sub in props.items()
        if name not in SHARED_FIELDS or name in required
    }
    if not nulls:
        fields = {name: without_null(sub) for name, sub in fields.items()}
    out: dict[str, Any] = {"type": "object", "properties": fields}
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out


def _compact(node: Any, *, keep_descriptions: bool) -> Any:
    if isinstance(node, list):
        return [_compact(x, keep_descriptions=keep_descriptions) for x in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "additionalProperties" and value is True:  # the default
            continue
        if key == "description" and not keep_descriptions:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {
                name: _compact(sub, keep_descriptions=keep_descriptions) for name, sub in value.items()
            }
        else:
            out[key] = _compact(value, keep_descriptions=keep_descriptions)
    return _nullable(out)


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [{"type": T, ...}, {"type": "null"}]`` as ``{"type": [T, "null"], ...}``.

    The keywords beside ``type`` (minimum, items, additionalProperties, ...) apply to T's values only, so the
    merged schema accepts exactly what the pair did; an enum gets ``null`` as one more value.
    """
    any_of = node.get("anyOf")
    if not (isinstance(any_of, list) and len(any_of) == 2 and _NULL in any_of):
        return node
    other = any_of[0] if any_of[1] == _NULL else any_of[1]
    if not (isinstance(other, dict) and isinstance(other.get("type"), str)):
        return node
    if set(other) & _COMBINATORS or any(key in node for key in other):
        return node
    merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **other, "type": [other["type"], "null"]}
    if "enum" in other:
        merged["enum"] = [*other["enum"], None]
    return merged


def _shallow(node: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """One field of an output schema: its JSON type alone (a nested model is an object, an enum a string)."""
    if not isinstance(node, dict):
        return {}
    if "$ref" in node:
        target = defs.get(str(node["$ref"]).rsplit("/", 1)[-1], {})
        return {"type": "string"} if "enum" in target else {"type": "object"}
    for key in ("anyOf", "oneOf"):
        if key in node:
            options = [_shallow(x, defs) for x in node[key]]
            types: list[str] = []
            for option in options:
                t = option.get("type")
                for one in t if isinstance(t, list) else [t]:
                    if one is None:
                        return {}  # an option without a simple type: accept anything
                    if one not in types:
                        types.append(one)
            return {"type": types[0] if len(types) == 1 else types}
    return {"type": node["type"]} if "type" in node else {}
