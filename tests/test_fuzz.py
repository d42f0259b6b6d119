"""Hostile arguments to every tool, over a real in-memory client against the real test cluster.

Hypothesis generates arguments from each tool's own input schema, mixed with wrong types, huge and unicode
strings, negative and huge numbers, missing and extra fields. Every answer must be a result or an is_error
with a message (never mcp's bare "Error executing tool X", which means an unanticipated exception, and never
a protocol error); no call may hang; and the server must keep serving the next call.

Write tools are kept harmless: submit_job runs only `echo <generated text>` with a runtime_env that cannot
install or upload anything (and every job it starts is stopped afterwards); serve_deploy only gets configs
whose applications are invalid, so nothing is deployed and Serve is not started. Destructive tools run without
a valid confirm token, so they change nothing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.types import Tool
from tests.support import RAY_TOOLSETS, mcp_client

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

CALL_BOUND_S = 60.0  # the request timeout is 10 s; a slow shared box gets room, a hang does not
EXAMPLES = int(os.environ.get("RAY_MCP_FUZZ_EXAMPLES", "15"))  # a deeper hunt: RAY_MCP_FUZZ_EXAMPLES=300
NASTY = [
    "",
    " ",
    "\x00",
    "../../../../etc/passwd",
    "*",
    "%s%n",
    "' OR 1=1 --",
    "raysubmit_",
    "01000000",
    "ff" * 16,
    "FF" * 28,
    "null",
    "None",
    "-1",
    "1e309",
    "\u202e\u0000\ud7ff",
    "日本語のテキスト",
    "🔥" * 50,
    "\n\r\t",
    "a" * 300,
    "$(touch /tmp/ray-mcp-fuzz-pwned)",
    "`id`",
    "{}",
    "[]",
]
HUGE_TEXT = st.builds(
    lambda c, n: c * n, st.sampled_from(["x", "é", "🔥", "\n"]), st.integers(10_000, 300_000)
)
TEXT = st.one_of(st.text(max_size=40), st.sampled_from(NASTY), HUGE_TEXT)
INTS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, 1, 2**31, 2**63, -(2**63), 10**30]),
    st.integers(-5, 5),
)
FLOATS = st.one_of(st.floats(), st.sampled_from([-0.0, 1e-300, 1e300, -1.0]))
SCALAR = st.one_of(st.none(), st.booleans(), INTS, FLOATS, TEXT)
HOSTILE = st.recursive(
    SCALAR,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=8,
)
# runtime_env keys that would install, upload or run something: never generated.
UNSAFE_RUNTIME_ENV = {
    "working_dir",
    "py_modules",
    "pip",
    "conda",
    "uv",
    "container",
    "image_uri",
    "py_executable",
    "java_jars",
    "nsight",
    "mpi",
    "worker_process_setup_hook",
    "_nsight",
    "rocprof_sys",
}


def typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the declared type (often right, sometimes out of range), from a JSON schema property."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | TEXT
    if "anyOf" in schema:
        return st.one_of([typed(s) for s in schema["anyOf"]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([typed({**schema, "type": k}) for k in kind])
    if kind == "string":
        return TEXT
    if kind == "integer":
        return INTS
    if kind == "number":
        return INTS | FLOATS
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(typed(schema.get("items", {})) if schema.get("items") else HOSTILE, max_size=5)
    if kind == "object":
        return st.dictionaries(st.text(max_size=12) | st.sampled_from(NASTY), HOSTILE, max_size=5)
    return HOSTILE


def arguments(tool: Tool) -> st.SearchStrategy[dict[str, Any]]:
    props: dict[str, Any] = tool.input_schema.get("properties", {})
    values = {name: st.one_of(typed(schema), typed(schema), HOSTILE) for name, schema in props.items()}
    known = st.fixed_dictionaries({}, optional=values)
    extra = st.dictionaries(
        st.text(min_size=1, max_size=12).filter(lambda k: k not in props), HOSTILE, max_size=2
    )
    return st.builds(lambda a, b: {**b, **a}, known, extra)


def harmless(tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Keep write tools from doing real work, and waits short."""
    args = dict(args)
    if tool == "submit_job":
        if isinstance(args.get("entrypoint"), str):
            args["entrypoint"] = "echo " + shlex.quote(args["entrypoint"])
        env = args.get("runtime_env")
        if isinstance(env, dict):
            args["runtime_env"] = {k: v for k, v in env.items() if k not in UNSAFE_RUNTIME_ENV}
    if tool == "serve_deploy" and isinstance(args.get("config"), dict):
        apps = args["config"].get("applications")
        args["config"]["applications"] = [{"name": "fuzz", "no_import_path": apps}]
    for key, cap in (("follow_s", 1.0), ("timeout_s", 2.0), ("duration_s", 1)):
        value = args.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1000:
            args[key] = min(value, cap)
    return args


class Session:
    def __init__(self, portal: BlockingPortal, client: Client, tools: dict[str, Tool]) -> None:
        self.portal = portal
        self.client = client
        self.tools = tools
        self.submitted: list[str] = []

    async def _call(self, name: str, args: dict[str, Any]) -> Any:
        with anyio.fail_after(CALL_BOUND_S):
            return await self.client.call_tool(name, args)

    def call(self, name: str, args: dict[str, Any]) -> Any:
        return self.portal.call(self._call, name, args)


@pytest.fixture(scope="module")
def session(ray_cluster: Any) -> Iterator[Session]:
    server = build_server(
        Settings(address=ray_cluster.dashboard_url, allow_destructive=True, toolsets=RAY_TOOLSETS)
    )
    with start_blocking_portal(backend="asyncio") as portal:
        with portal.wrap_async_context_manager(Client(server)) as client:
            tools = {t.name: t for t in portal.call(client.list_tools).tools}
            s = Session(portal, client, tools)
            try:
                yield s
            finally:
                for (
                    sid
                ) in s.submitted:  # stop what submit_job started (echo jobs, or ones that can't schedule)
                    s.call("stop_job", {"job": sid})
        portal.call(server.app.aclose)


async def _listed_tools() -> list[str]:
    settings = Settings(address="http://127.0.0.1:9", allow_destructive=True, toolsets=RAY_TOOLSETS)
    async with mcp_client(settings) as client:
        return sorted(t.name for t in (await client.list_tools()).tools)


TOOLS = anyio.run(_listed_tools)  # every tool of the server, so that a new one is fuzzed with no list to edit


@pytest.mark.parametrize("name", TOOLS)
def test_hostile_arguments_get_a_result_or_a_clear_error_and_the_server_keeps_serving(
    session: Session, name: str
) -> None:
    tool = session.tools[name]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    @given(args=arguments(tool))
    def one_call(args: dict[str, Any]) -> None:
        args = harmless(name, args)
        result = session.call(name, args)  # a protocol error or a hang raises here
        text = " ".join(getattr(c, "text", "") for c in result.content)
        shown = repr(args)[:300]
        assert text.strip(), f"{name}({shown}) answered nothing"
        assert text.strip() != f"Error executing tool {name}", f"{name} crashed on {shown}"
        if not result.is_error and name == "submit_job":
            session.submitted.append(str(result.structured_content["submission_id"]))

    one_call()
    alive = session.call("cluster_status", {})
    assert not alive.is_error, alive.content
