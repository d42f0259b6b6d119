"""Every call the server suggests ("Next: list_tasks job=…", "pg_status(state=...)") is one the tool accepts.

The hints are collected from real answers: the recorded clusters (tests/recorded) replayed through the whole
server, and the diagnosis of every recorded job's evidence. Each call named in them is checked against
tools/list's inputSchema: every argument it names exists, and every concrete value validates (placeholders
such as ``<id>`` or ``...`` are the agent's to fill in).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client
from tests.causal_support import RECORDED, replay
from tests.replay import replayed_server
from tests.support import call_ok, mcp_client, text_of

import ray_mcp
from ray_mcp.diagnosis import report as causal_report
from ray_mcp.server.choices import normalize_choices
from ray_mcp.settings import Settings

ARGUMENT = re.compile(r"""(?:\s*,\s*|\s+|\()([a-z_]+)=('[^']*'|"[^"]*"|<[^>]*>|[^\s,);|]+)""")
PLACEHOLDER = re.compile(r"<|\.\.\.|…|\{")


def suggested_calls(text: str, tools: set[str]) -> list[tuple[str, dict[str, str], str]]:
    """The tool calls a text suggests: (tool, {argument: value as written}, the text it was read from)."""
    calls = []
    for match in re.finditer(r"(?<![\w./:-])([a-z][a-z_]+)(?![\w-])", text):
        if match.group(1) not in tools:
            continue
        args, end = {}, match.end()
        while found := ARGUMENT.match(text, end):
            if found.group(0).startswith("(") and args:
                break
            args[found.group(1)] = found.group(2)
            end = found.end()
        calls.append((match.group(1), args, text[match.start() : end + 40]))
    return calls


def value_of(written: str) -> Any:
    if written[0] in "'\"":
        return written[1:-1]
    try:
        return json.loads(written)
    except ValueError:
        return written


def refusals(texts: list[str], schemas: dict[str, dict[str, Any]]) -> list[str]:
    """What is wrong with each suggested call of the texts (empty: every one validates)."""
    wrong = []
    for text in texts:
        for tool, args, where in suggested_calls(text, set(schemas)):
            schema = schemas[tool]
            properties = schema.get("properties") or {}
            if unknown := sorted(set(args) - set(properties)):
                wrong.append(f"{tool} has no argument {unknown}: {where!r}")
                continue
            concrete = {k: value_of(v) for k, v in args.items() if not PLACEHOLDER.search(v)}
            concrete = normalize_choices(concrete, schema)
            for name, value in concrete.items():
                prop = {**properties[name], "$defs": schema.get("$defs", {})}
                try:
                    jsonschema.validate(value, prop)
                except jsonschema.ValidationError as exc:
                    wrong.append(f"{tool} {name}={value!r} is invalid ({exc.message}): {where!r}")
    return wrong


def strings(tree: Any) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    if isinstance(tree, dict):
        return [s for v in tree.values() for s in strings(v)]
    if isinstance(tree, list):
        return [s for v in tree for s in strings(v)]
    return []


SCHEMAS: dict[str, dict[str, Any]] = {}


async def every_schema() -> dict[str, dict[str, Any]]:
    """tools/list's inputSchema of every tool (destructive ones included), listed once."""
    if not SCHEMAS:
        settings = Settings(address="http://127.0.0.1:9", allow_destructive=True, toolsets="all")
        async with mcp_client(settings) as client:
            SCHEMAS.update({t.name: t.input_schema for t in (await client.list_tools()).tools})
    return SCHEMAS


def test_the_parser_reads_both_hint_forms_and_catches_a_wrong_argument() -> None:
    schemas = {
        "list_tasks": {"properties": {"job": {"type": "string"}, "state": {"enum": ["FAILED", "RUNNING"]}}},
        "pg_status": {"properties": {"placement_group": {"type": "string"}}},
    }
    texts = [
        "Next: list_tasks job=raysubmit_1 state=failed | pg_status(placement_group=...)",
        "list_tasks job_id=raysubmit_1 state=FAILED",
        "call pg_status pg=abc to see it; list_tasks state=DONE",
    ]
    assert refusals(texts[:1], schemas) == []
    assert ["job_id" in w for w in refusals(texts[1:2], schemas)] == [True]
    assert [w.split(" ", 2)[1] for w in refusals(texts[2:], schemas)] == ["has", "state='DONE'"]


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in RECORDED.glob("*.json") if "tool" in p.read_text()[:20])
)
async def test_every_hint_of_a_recorded_clusters_answer_is_a_call_its_tool_accepts(name: str) -> None:
    server, _, recording = replayed_server(name)
    try:
        async with Client(server) as client:
            result = await call_ok(client, recording["tool"], recording["arguments"])
    finally:
        await server.app.aclose()
    texts = [text_of(result), *strings(result.structured_content)]
    assert refusals(texts, await every_schema()) == []


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in RECORDED.glob("*.json") if '"tool"' not in p.read_text()[:20])
)
async def test_every_hint_of_a_recorded_jobs_diagnosis_is_a_call_its_tool_accepts(name: str) -> None:
    ev = replay(name)
    model, text = causal_report.job_report("recorded", ev, max_bytes=6000)
    texts = [text, *strings(model.model_dump(mode="json"))]
    assert refusals(texts, await every_schema()) == []


def source_strings() -> list[str]:
    """Every string literal of src/ray_mcp, f-strings with their fields as ``{...}`` (a placeholder)."""
    found = []
    for path in sorted(Path(ray_mcp.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.JoinedStr):
                found.append(
                    "".join(v.value if isinstance(v, ast.Constant) else "{...}" for v in node.values)  # type: ignore[misc]
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
    return found


async def test_every_call_written_in_the_sources_names_arguments_its_tool_has() -> None:
    """The hints no recording reaches yet (a pending placement group's, a timeout's), read where they are
    written: a suggested call of any string literal names only arguments the tool has."""
    assert refusals(source_strings(), await every_schema()) == []


async def test_cluster_health_hints_name_the_failed_job_and_actor_not_a_placeholder() -> None:
    server, _, recording = replayed_server("cluster_health")
    try:
        async with Client(server) as client:
            text = text_of(await call_ok(client, recording["tool"], recording["arguments"]))
    finally:
        await server.app.aclose()
    assert "diagnose_job job=raysubmit_" in text, text
    assert not re.search(r"=<[a-z]+>", text), text
