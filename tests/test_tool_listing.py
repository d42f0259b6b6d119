"""What tools/list costs an agent's context: compact schemas and dedented descriptions."""

from __future__ import annotations

import json
from typing import Annotated, Any

import jsonschema
import pytest
from mcp import Client
from mcp.types import CallToolResult
from pydantic import BaseModel
from tests.support import mcp_client

from ray_mcp.server.build import build_server
from ray_mcp.server.schemas import compact_input, compact_output
from ray_mcp.settings import Settings
from ray_mcp.shaping.common import tool_result
from ray_mcp.tools import READ_ONLY


async def listed_tools(*, allow_destructive: bool = True) -> list[dict[str, Any]]:
    """Every tool of every toolset, as a client lists it."""
    settings = Settings(address="http://127.0.0.1:9", allow_destructive=allow_destructive, toolsets="all")
    async with mcp_client(settings) as client:
        listing = await client.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing.tools]


# The size of the default tools/list is held by tests/test_toolsets.py (16 KB on a plain cluster, issue 36): a
# tool outside the core and job toolsets costs the default list nothing.
async def test_every_tool_publishes_its_output_schema() -> None:
    assert all("outputSchema" in t for t in await listed_tools())


async def test_tool_descriptions_are_dedented_and_schemas_carry_no_titles() -> None:
    for tool in await listed_tools():
        assert "        " not in tool["description"], tool["name"]
        assert not tool["description"].startswith((" ", "\n")), tool["name"]
        assert '"title"' not in json.dumps(tool["inputSchema"]).replace('"title": {', ""), tool["name"]


NULLABLE = {
    "type": "object",
    "properties": {
        "n": {"anyOf": [{"minimum": 0, "type": "integer"}, {"type": "null"}], "default": None, "title": "N"},
        "state": {"anyOf": [{"enum": ["A", "B"], "type": "string"}, {"type": "null"}], "title": "State"},
        "tags": {"anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}]},
        "both": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        "title": {"type": "string", "title": "Title"},
        "labels": {"anyOf": [{"additionalProperties": True, "type": "object"}, {"type": "null"}]},
    },
}


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"n": None},
        {"n": 3},
        {"n": -1},
        {"n": "3"},
        {"state": None},
        {"state": "A"},
        {"state": "C"},
        {"tags": None},
        {"tags": ["x"]},
        {"tags": [1]},
        {"both": 1},
        {"both": "x"},
        {"both": 1.5},
        {"title": "x"},
        {"title": 1},
        {"labels": {"a": 1}},
        {"labels": "a"},
    ],
)
def test_a_compact_input_schema_accepts_what_the_original_accepts_but_explicit_nulls(
    value: dict[str, Any],
) -> None:
    compact = compact_input(NULLABLE)
    assert "title" in compact["properties"]  # a field named title is kept; the keyword is dropped
    # Optional arguments are published without null: a client leaves them out instead of sending null.
    expected = jsonschema.Draft202012Validator(NULLABLE).is_valid(value) and None not in value.values()
    assert jsonschema.Draft202012Validator(compact).is_valid(value) == expected


def test_a_compact_output_schema_keeps_the_fields_their_types_and_what_is_required() -> None:
    schema = {
        "$defs": {
            "Inner": {"properties": {"x": {"type": "integer"}}, "type": "object"},
            "Color": {"enum": ["red", "blue"], "type": "string"},
        },
        "properties": {
            "inner": {"$ref": "#/$defs/Inner"},
            "items": {"items": {"$ref": "#/$defs/Inner"}, "type": "array"},
            "color": {"$ref": "#/$defs/Color"},
            "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]},
            "total": {"type": "integer", "description": "How many."},
        },
        "required": ["total"],
        "type": "object",
    }
    compact = compact_output(schema)
    assert set(compact["properties"]) == set(schema["properties"]) and compact["required"] == ["total"]
    validator = jsonschema.Draft202012Validator(compact)
    good = {"inner": {"x": 1}, "items": [{"x": 2}], "color": "red", "maybe": None, "total": 3}
    assert validator.is_valid(good) and jsonschema.Draft202012Validator(schema).is_valid(good)
    assert not validator.is_valid({**good, "total": "3"})
    assert not validator.is_valid({"inner": {"x": 1}})


def test_a_compact_output_schema_leaves_the_shared_notes_and_hints_to_the_instructions() -> None:
    schema = {
        "properties": {
            "total": {"type": "integer"},
            "notes": {"items": {"type": "string"}, "type": "array"},
            "hints": {"items": {"type": "string"}, "type": "array"},
        },
        "required": ["total"],
        "type": "object",
    }
    compact = compact_output(schema)
    assert set(compact["properties"]) == {"total"}
    assert jsonschema.Draft202012Validator(compact).is_valid(
        {"total": 1, "notes": ["cut"], "hints": ["call"]}
    )


class Echoed(BaseModel):
    text: str
    count: int


async def test_a_tool_that_returns_its_model_keeps_its_structured_content() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"))

    async def echo_model(text: str) -> Echoed:
        """Echo the text as a model."""
        return Echoed(text=text, count=len(text))

    async def echo_result(text: str) -> Annotated[CallToolResult, Echoed]:
        """Echo the text as a result built from the model."""
        return tool_result(Echoed(text=text, count=len(text)), text)

    server.add_tool(echo_model, annotations=READ_ONLY)
    server.add_tool(echo_result, annotations=READ_ONLY)
    async with Client(server) as client:
        for name in ("echo_model", "echo_result"):
            result = await client.call_tool(name, {"text": "abc"})
            assert result.structured_content == {"text": "abc", "count": 3}, name
    await server.app.aclose()


SPEC_HINT_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}


async def test_annotations_publish_only_the_hints_a_client_cannot_assume() -> None:
    for tool in await listed_tools():
        hints = {k: v for k, v in tool["annotations"].items() if k.endswith("Hint")}
        assert tool["annotations"]["title"], tool["name"]
        if hints.get("readOnlyHint") is True:
            assert hints == {"readOnlyHint": True}, tool["name"]  # the other hints only apply to writes
        else:
            assert hints["readOnlyHint"] is False and isinstance(hints["destructiveHint"], bool), tool["name"]
            said = {k: v for k, v in hints.items() if k not in ("readOnlyHint", "destructiveHint")}
            assert all(SPEC_HINT_DEFAULTS[k] != v for k, v in said.items()), tool["name"]
    by_name = {t["name"]: t["annotations"] for t in await listed_tools()}
    assert (
        by_name["delete_job"]["destructiveHint"] is True and by_name["submit_job"]["destructiveHint"] is False
    )


async def test_every_parameter_default_is_valid_under_its_own_schema() -> None:
    for tool in await listed_tools():
        schema = {key: value for key, value in tool["inputSchema"].items() if key != "required"}
        for name, prop in schema.get("properties", {}).items():
            if "default" in prop:
                jsonschema.validate({name: prop["default"]}, schema)  # a default outside [ge, le] fails here
