"""The private names of the MCP SDK, uvicorn and Ray that ray-mcp needs live in ray_mcp/sdk_private.py, and are
there.

A new SDK minor (or Ray release) that moves one fails here, naming it, rather than in a subscription that
quietly never fires. Another module that reaches into them fails here too. No Ray head: a bare MCPServer, the
SDK's client, and Ray's modules imported.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import importlib.util
import inspect
import logging
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import h11
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool, ToolManager
from mcp.server.session import ServerSession
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from ray_mcp import sdk_private

SRC = Path(sdk_private.__file__).parent
# The dependencies whose private names count: the MCP SDK (and its types), the HTTP server under it, and Ray.
PACKAGES = ("mcp", "mcp_types", "uvicorn", "h11", "ray")
SCANNED_WHOLE = ("mcp", "mcp_types", "uvicorn", "h11")  # Ray is too large: see ray_private_names
INTERNAL_MODULES = ("uvicorn.protocols",)  # uvicorn's public surface is its top level (Config, Server)


def expect(owner: object, name: str, kind: type | tuple[type, ...]) -> Any:
    """``owner.name``, which must exist and be a ``kind``; else a failure naming it and sdk_private.py."""
    where = f"{type(owner).__module__}.{type(owner).__qualname__}.{name}"
    if not hasattr(owner, name):
        pytest.fail(f"{where} is gone: ray_mcp/sdk_private.py needs it (see its docstring for why)")
    value = getattr(owner, name)
    if not isinstance(value, kind):
        pytest.fail(f"{where} is a {type(value).__name__} now, not the {kind} ray_mcp/sdk_private.py uses")
    return value


def is_private(name: str) -> bool:
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


def on_another_object(node: ast.Attribute) -> bool:
    return not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))


def private_attributes(tree: ast.AST) -> set[str]:
    """The ``_name`` attributes a module reads on objects other than its own ``self``."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and is_private(node.attr) and on_another_object(node)
    }


CHECKED = {"_lowlevel_server", "_tool_manager", "_connection", "_server_instances", "_discard_session"}


async def test_each_private_name_sdk_private_uses_is_still_there() -> None:
    sessions: list[ServerSession] = []
    server = MCPServer("probe")

    def probe(ctx: Context) -> str:
        """Keep the request's session."""
        sessions.append(ctx.request_context.session)
        return "ok"

    server.add_tool(probe)
    lowlevel = expect(server, "_lowlevel_server", Server)
    for method in ("add_request_handler", "run", "create_initialization_options"):
        assert callable(getattr(lowlevel, method, None)), f"mcp's low-level Server.{method} is gone"
    assert sdk_private.lowlevel_server(server) is lowlevel
    expect(server, "_tool_manager", ToolManager)
    tool = sdk_private.registered_tool(server, "probe")
    assert isinstance(tool, Tool) and tool.name == "probe"

    async with Client(server, mode="legacy") as client:
        await client.call_tool("probe", {})
        await client.call_tool("probe", {})
    first, second = sessions
    assert first is not second  # one session object per request ...
    connection = expect(first, "_connection", Connection)
    assert sdk_private.connection_of(second) is connection  # ... on one connection
    expect(connection, "state", dict)
    expect(connection, "exit_stack", AsyncExitStack)

    # session_as copies a session's instance state: it must all be there, in __dict__
    assert not any("__slots__" in vars(k) for k in type(first).__mro__[:-1]), "ServerSession has __slots__"

    class Probe(ServerSession):
        pass

    copy = sdk_private.session_as(first, Probe)
    assert vars(copy) == vars(first) and copy.protocol_version == first.protocol_version

    manager = StreamableHTTPSessionManager(lowlevel)
    assert sdk_private.open_sessions(manager) == expect(manager, "_server_instances", dict)
    assert inspect.iscoroutinefunction(getattr(manager, "_discard_session", None)), "_discard_session is gone"
    await sdk_private.close_session(manager, "no-such-session")  # nothing open: nothing to do

    assert private_attributes(ast.parse(inspect.getsource(sdk_private))) == CHECKED, (
        "sdk_private.py reads a private name this test does not check: add it to CHECKED and check it above"
    )


async def test_the_header_timeout_finds_what_it_needs_in_uvicorns_h11_protocol() -> None:
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.server import ServerState

    protocol_class = sdk_private.bounded_h11_protocol(10.0)
    assert issubclass(protocol_class, H11Protocol)
    for hook in ("connection_made", "connection_lost", "on_response_complete"):
        assert callable(getattr(H11Protocol, hook, None)), f"uvicorn's H11Protocol.{hook} is gone"

    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover - never called
        pass

    protocol = protocol_class(config=uvicorn.Config(app), server_state=ServerState(), app_state={})  # type: ignore[call-arg]
    expect(protocol, "loop", asyncio.AbstractEventLoop)
    expect(protocol, "logger", logging.Logger)
    assert hasattr(protocol, "transport"), "uvicorn's H11Protocol.transport is gone"
    conn = expect(protocol, "conn", h11.Connection)
    assert conn.their_state is h11.IDLE


# -- no other module ----------------------------------------------------------------------------------------


def sdk_private_names() -> set[str]:
    """Every ``_name`` the SDK and uvicorn define: functions, classes, attributes, module globals."""
    names: set[str] = set()
    for package in SCANNED_WHOLE:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        for path in Path(next(iter(spec.submodule_search_locations))).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return {name for name in names if is_private(name)} | ray_private_names()


def private_names_in(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {name for name in names if is_private(name)}


def ray_private_names() -> set[str]:
    """The ``_name`` functions, classes and attributes of the Ray modules ray-mcp imports from (2,500 files in
    all, so only these), and of every module in the MRO of a Ray class imported from them."""
    files: set[Path] = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ray":
                module = importlib.import_module(node.module)
                files.add(Path(getattr(module, "__file__", None) or "namespace-package"))
                for alias in node.names:
                    value = getattr(module, alias.name, None)
                    for cls in value.__mro__ if isinstance(value, type) else ():
                        if cls.__module__.split(".")[0] == "ray":
                            files.add(Path(inspect.getfile(cls)))
    return {name for path in files if path.suffix == ".py" for name in private_names_in(path)}


def theirs(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def private_import(node: ast.AST) -> str | None:
    """``import``/``from`` of a private or internal module or name of the SDK or uvicorn."""
    if isinstance(node, ast.ImportFrom) and node.module and theirs(node.module):
        modules, names = [node.module], [alias.name for alias in node.names]
    elif isinstance(node, ast.Import):
        modules, names = [alias.name for alias in node.names if theirs(alias.name)], []
    else:
        return None
    for module in modules:
        if module.startswith(INTERNAL_MODULES) or any(map(is_private, module.split(".") + names)):
            return f"imports {module}"
    return None


def private_access(node: ast.AST, private: set[str]) -> str | None:
    """``x._name``, ``getattr(x, "_name")`` or ``vars(x)["_name"]`` with a private name of theirs."""
    if isinstance(node, ast.Attribute) and node.attr in private and on_another_object(node):
        return f".{node.attr}"  # an SDK object, or ours under an SDK name (then rename ours)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BY_NAME:
        name = node.args[1] if len(node.args) > 1 else None
        if isinstance(name, ast.Constant) and name.value in private:
            return f"{node.func.id}(..., {name.value!r})"
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in private
    ):
        return f"[{node.slice.value!r}]"
    return None


def subclasses_of_theirs(tree: ast.AST, module_name: str) -> list[ast.ClassDef]:
    """Our classes with a class of the SDK or uvicorn among their bases: by the MRO when the class can be
    imported, else (a class made in a function) by whether a base is a name imported from them."""
    imported = {
        (alias.asname or alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if theirs((node.module or "") if isinstance(node, ast.ImportFrom) else alias.name)
    }
    module = importlib.import_module(module_name)
    found = []
    for cls in (node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)):
        made = getattr(module, cls.name, None)
        if isinstance(made, type) and made.__qualname__ == cls.name:
            if any(theirs(base.__module__) for base in made.__mro__[1:]):
                found.append(cls)
            continue
        roots = []
        for base in cls.bases:
            while isinstance(base, ast.Attribute | ast.Subscript):
                base = base.value
            roots.append(base.id if isinstance(base, ast.Name) else "")
        if imported.intersection(roots):
            found.append(cls)
    return found


def uses_of_private_names(path: Path, module_name: str, private: set[str]) -> list[tuple[int, str]]:
    """Where a module of ours uses a private name of the SDK or uvicorn: (line, what)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        what = private_import(node) or private_access(node, private)
        if what:
            found.add((node.lineno, what))
    for cls in subclasses_of_theirs(tree, module_name):
        for node in ast.walk(cls):  # in a subclass of theirs, self._name may be theirs: state or an override
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.add((node.lineno, f"{cls.name} uses .{node.attr}"))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in private:
                found.add((node.lineno, f"{cls.name} overrides {node.name}"))
    return sorted(found)


def test_no_module_but_sdk_private_uses_a_private_name_of_the_sdk_uvicorn_or_ray() -> None:
    private = sdk_private_names()
    assert {
        "_lowlevel_server",
        "_connection",
        "_notify",
        "_request_handlers",
    } <= private  # the scan sees them
    offences = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC.parent)
        if path == Path(sdk_private.__file__) or path.name == "__main__.py":
            continue
        module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        found = uses_of_private_names(path, module, private)
        if found:
            offences[str(relative)] = found
    assert offences == {}, f"private names of mcp/uvicorn/ray outside ray_mcp/sdk_private.py: {offences}"


def test_the_scan_finds_each_way_of_reaching_into_the_sdk(tmp_path: Path) -> None:
    private = sdk_private_names()
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from mcp.server._otel import OpenTelemetryMiddleware\n"
        "from mcp.server.lowlevel.server import _ping_handler\n"
        "import mcp.shared._stream_protocols\n"
        "from uvicorn.protocols.http.h11_impl import H11Protocol\n"
        "class Slow(H11Protocol):\n"
        "    def _unset_keepalive_if_required(self):\n"
        "        pass\n"
        "def f(server, session):\n"
        "    server._lowlevel_server.run()\n"
        "    getattr(session, '_connection')\n"
        "    vars(session)['_request_outbound']\n"
        "class Mine:\n"
        "    def __init__(self):\n"
        "        self._lock = None\n"  # our own state, under a name the SDK uses too: fine
        "from ray._private.runtime_env.packaging import walk\n"
        "from ray.job_submission import JobSubmissionClient\n"
        "class Sending(JobSubmissionClient):\n"
        "    def _do_request(self, method, endpoint):\n"
        "        pass\n"
    )
    found = uses_of_private_names(sample, "json", private)  # "json": any module without these classes
    assert [line for line, _ in found] == [1, 2, 3, 4, 6, 9, 10, 11, 15, 18], found


# -- Ray ----------------------------------------------------------------------------------------------------

RAY_IMPORTED = {
    "ray._private.runtime_env.packaging": {"_dir_travel", "_get_excludes", "GCS_STORAGE_MAX_SIZE"},
    "ray._private.grpc_utils": {"init_grpc_channel"},
    "ray._private.authentication": {"authentication_utils"},
    "ray._common.tls_utils": {"load_certs_from_env"},
}


class Answer:
    """What Ray's Job SDK reads of a ``requests`` response."""

    def __init__(self, status_code: int, body: dict[str, Any]) -> None:
        self.status_code, self.body = status_code, body
        self.text = str(body)

    def json(self) -> dict[str, Any]:
        return self.body

    def raise_for_status(self) -> None:
        assert self.status_code < 400


def test_each_private_name_of_ray_that_sdk_private_uses_is_still_there(tmp_path: Path) -> None:
    imported: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(sdk_private))):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ray"):
            continue
        if node.module.startswith("ray._") or any(is_private(a.name) for a in node.names):
            imported.setdefault(node.module, set()).update(a.name for a in node.names)
    assert imported == RAY_IMPORTED, "sdk_private.py imports a private name of Ray this test does not check"
    for module, names in RAY_IMPORTED.items():
        for name in names:
            assert hasattr(importlib.import_module(module), name), f"Ray's {module}.{name} is gone"
    from ray._private.authentication import authentication_utils

    assert callable(authentication_utils.is_token_auth_enabled), "Ray's is_token_auth_enabled is gone"

    # the packaging walk: every file Ray would zip, and not what .gitignore or excludes leave out
    (tmp_path / "keep.py").write_text("x = 1\n")
    (tmp_path / "skip.log").write_text("noise\n")
    (tmp_path / "left").mkdir()
    (tmp_path / "left" / "out.py").write_text("y = 2\n")
    (tmp_path / ".gitignore").write_text("*.log\n")
    seen: list[Path] = []
    sdk_private.walk_like_ray_packaging(
        tmp_path, ["left"], seen.append, include_gitignore=True, logger=logging.getLogger("probe")
    )
    names = {p.name for p in seen}
    assert "keep.py" in names and "skip.log" not in names and "out.py" not in names, names

    assert isinstance(sdk_private.ray_token_auth_enabled(), bool)
    channel = sdk_private.ray_grpc_channel("127.0.0.1:1")  # made, not connected
    channel.close()

    sent: list[tuple[str, str]] = []

    def send(method: str, endpoint: str, data: bytes | None, json_data: Any) -> Answer:
        sent.append((method, endpoint))
        return Answer(200, {"version": "4", "ray_version": "2.60.0"})

    client = sdk_private.job_client("http://127.0.0.1:1", send)
    assert sent and set(sent) == {("GET", "/api/version")}  # the constructor's version checks, through send
    client.get_version()
    assert sent[-1] == ("GET", "/api/version")
