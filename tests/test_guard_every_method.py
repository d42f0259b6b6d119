"""Every message that leaves the server passes the one guard, whatever its method.

The methods are read from the server's own request handlers (the SDK's registry, extensions included), so a
method added later is checked without editing this test. Each runs through the server's real middleware chain
with an answer, and an error, full of what must never leave: a secret the server knows of, a token-shaped name,
raw escape and bidi characters. And completion/complete, the method that once skipped the guard, is driven end
to end by a real client over a stand-in dashboard (httpx.MockTransport: a job list whose ids are hostile).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference

from ray_mcp import sdk_private
from ray_mcp.guard.middleware import RedactingSession, SafetyMiddleware
from ray_mcp.guard.redaction import SECRETS
from ray_mcp.server.build import RayMCPServer, build_server
from ray_mcp.server.transport import reject_line
from ray_mcp.settings import Settings

pytestmark = pytest.mark.filterwarnings("ignore:ping is removed")

KNOWN = "kv-guard-every-method-7d1c"  # a secret the registry holds (as a job's env_vars value would be)
OWNER = "job:test-guard:every-method"
TOKEN = "ghp_" + "Ab3" * 12  # a GitHub token's shape
HOSTILE = f"{KNOWN} {TOKEN} \x1b[2J\u202eevil\u202c\x07"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def assert_guarded(where: str, text: str) -> None:
    assert KNOWN not in text and TOKEN not in text, (where, text)
    assert not RAW_CONTROL.search(text), (where, text)


def request_methods(server: RayMCPServer) -> list[str]:
    """Every method the server answers: the SDK's registry of request handlers (spec methods, ours, the Tasks
    extension's), plus initialize, which the SDK answers itself."""
    lowlevel = sdk_private.lowlevel_server(server)
    return ["initialize", *sorted(lowlevel._request_handlers)]  # the registry, read by this test only


async def a_session(server: RayMCPServer) -> ServerSession:
    """A real session of the server: the one a tool call got (an in-memory client)."""
    sessions: list[ServerSession] = []

    def probe(ctx: Context) -> str:
        """Keep the request's session."""
        sessions.append(ctx.request_context.session)
        return "ok"

    server.add_tool(probe)
    async with Client(server) as client:
        await client.call_tool("probe", {})
    return sessions[0]


def through_the_chain(
    server: RayMCPServer, inner: Callable[[ServerRequestContext[Any, Any]], Awaitable[HandlerResult]]
) -> Callable[[ServerRequestContext[Any, Any]], Awaitable[HandlerResult]]:
    """The server's middleware, outermost first, around ``inner`` (as the SDK's runner composes it)."""
    call = inner
    for middleware in reversed(server.middleware):
        call = partial(middleware, call_next=call)
    return call


def context(server: RayMCPServer, session: ServerSession, method: str) -> ServerRequestContext[Any, Any]:
    return ServerRequestContext(
        session=session,
        lifespan_context=server.app,
        protocol_version="2025-11-25",
        method=method,
        params={},
        request_id=1,
    )


async def test_every_method_the_server_answers_passes_the_guard_with_its_answer_and_its_errors() -> None:
    server = build_server(Settings(address="http://127.0.0.1:9"))
    SECRETS.hold(OWNER, [KNOWN])
    try:
        session = await a_session(server)
        methods = request_methods(server)
        assert {"completion/complete", "tools/call", "resources/read", "tasks/get", "ping"} <= set(methods)
        ours = [m for m in server.middleware if type(m).__module__.startswith("ray_mcp.")]
        assert isinstance(ours[0], SafetyMiddleware)  # what every other layer of ours adds passes it too
        for method in methods:
            sessions: list[ServerSession] = []

            async def answers(
                ctx: ServerRequestContext[Any, Any], sessions: list[ServerSession] = sessions
            ) -> HandlerResult:
                sessions.append(ctx.session)
                return {"values": [HOSTILE], "nested": {HOSTILE: [{"text": HOSTILE}]}}

            result = await through_the_chain(server, answers)(context(server, session, method))
            assert_guarded(f"{method}'s answer", repr(result))
            assert sessions and isinstance(sessions[0], RedactingSession), method  # what it sends meanwhile

            for failure in (MCPError(-32602, HOSTILE, {"detail": HOSTILE}), RuntimeError(HOSTILE)):

                async def fails(
                    ctx: ServerRequestContext[Any, Any], exc: Exception = failure
                ) -> HandlerResult:
                    raise exc

                with pytest.raises(MCPError) as raised:
                    await through_the_chain(server, fails)(context(server, session, method))
                assert_guarded(f"{method}'s error", repr(raised.value.error))
    finally:
        SECRETS.drop_owners_except(OWNER, [], float("inf"))
        await server.app.aclose()


JOB_SECRET = "dbpw-for-completion-4f2a9"


def dashboard(request: httpx.Request) -> httpx.Response:
    """A dashboard whose job list holds a job with a secret in its env_vars, and hostile job ids."""
    if request.url.path == "/api/jobs/":
        jobs = [
            {
                "type": "SUBMISSION",
                "job_id": "02000000",
                "submission_id": "raysubmit_\u202eevil\x1b[2J",
                "status": "RUNNING",
                "entrypoint": "python a.py",
                "runtime_env": {"env_vars": {"DB_PASSWORD": JOB_SECRET}},
            },
            {"type": "SUBMISSION", "job_id": "03000000", "submission_id": JOB_SECRET, "status": "RUNNING"},
            {"type": "SUBMISSION", "job_id": "04000000", "submission_id": TOKEN, "status": "RUNNING"},
        ]
        return httpx.Response(200, json=jobs)
    return httpx.Response(404, text="not here")


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_completion_values_pass_the_guard(mode: str) -> None:
    server = build_server(
        Settings(address="http://127.0.0.1:9"), http_transport=httpx.MockTransport(dashboard), gcs_lookup=None
    )
    try:
        async with Client(server, mode=mode) as client:
            for ref, name in (
                (PromptReference(name="diagnose-failed-job"), "job"),
                (ResourceTemplateReference(uri="ray://jobs/{submission_id}"), "submission_id"),
            ):
                values = (await client.complete(ref, {"name": name, "value": ""})).completion.values
                assert len(values) == 3, values
                shown = "\n".join(values)
                assert JOB_SECRET not in shown and TOKEN not in shown and not RAW_CONTROL.search(shown), (
                    values
                )
                assert any(v.startswith('"raysubmit_\\u202eevil') for v in values), values  # quoted as data
    finally:
        await server.app.aclose()


def test_the_stdio_transports_own_error_replies_pass_the_guard() -> None:
    """A line the SDK would drop gets its error reply from the transport itself, before any middleware."""
    SECRETS.hold(OWNER, [KNOWN])
    try:
        line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": f"tools/call {HOSTILE}", "params": [1]})
        reply = reject_line(line)
        assert reply is not None and "params must be an object" in reply.error.message
        assert_guarded("stdio's reply", reply.error.message)
    finally:
        SECRETS.drop_owners_except(OWNER, [], float("inf"))
