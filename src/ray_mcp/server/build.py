"""build_server(settings) -> MCPServer: the lifespan and the registration of every tool, resource and prompt."""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import typing
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal

import httpx
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged
from mcp.types import CallToolResult, ToolAnnotations
from mcp.types import Tool as MCPTool
from mcp_types import INVALID_PARAMS, GetPromptResult, InputRequiredResult
from pydantic import BaseModel, Field, ValidationError

from ray_mcp import sdk_private
from ray_mcp.errors import (
    InvalidArgument,
    NeedsLiveCluster,
    RayMCPError,
    invalid_arguments,
    unexpected_failure,
    unknown_arguments,
)
from ray_mcp.guard import confirm
from ray_mcp.guard.audit import Auditor
from ray_mcp.guard.middleware import SafetyMiddleware
from ray_mcp.guard.modes import ToolKind, tool_allowed, tool_kind
from ray_mcp.guard.redaction import install_log_redaction, remember_settings_secrets
from ray_mcp.limits import ERROR_PAGE_LINKS
from ray_mcp.reference.pages import concept_pages, page_links
from ray_mcp.server import cache_hints, completions, live, prompts, resources, schemas
from ray_mcp.server.choices import CaseInsensitiveChoices
from ray_mcp.server.context import CURRENT_CLUSTER, App
from ray_mcp.server.icons import RAY_ICONS
from ray_mcp.server.mcp_tasks import ToolTasks
from ray_mcp.server.shares import SessionUse
from ray_mcp.server.toolsets import LegacyToolListers, Toolsets
from ray_mcp.settings import Settings
from ray_mcp.sources.gcs import GCS_LOOKUP, GcsLookup
from ray_mcp.sources.scope import read_scope
from ray_mcp.toolsets import Toolset, depends_on_the_cluster

log = logging.getLogger("ray_mcp.server")
# The tool areas (modules of ray_mcp.tools), in the order tools/list lists their tools. Each module names the
# toolset of its tools (``TOOLSET``); ray_mcp/toolsets.py says which toolsets tools/list offers.
TOOL_AREAS = (
    "cluster",
    "diagnose",
    "jobs",
    "logs",
    "actors",
    "placement_groups",
    "nodes",
    "tasks",
    "serve",
    "topology",
    "train",
    "stacks",
    "memory_profile",
    "gpu_profile",
    "objects",
    "events",
    "metrics",
    "compare",
    "kubernetes",
)

INSTRUCTIONS = """\
ray-mcp operates and debugs one Ray cluster through Ray's own clients and dashboard.
Start with cluster_status to see nodes, resource use and anything pending.
Every list is bounded; narrow it with the filters each tool offers, and follow the hints in its answers.
tools/list shows the toolsets that fit this cluster; a tool a hint names answers even when it is not listed
(unless --toolsets left it out).
Answers may carry notes (what could not be read, what was cut) and hints (what to call next): lists of strings.
Reference pages: ray-docs://reference/index. Live API signatures: ray-docs://api/{dotted.name}."""


def _version() -> str:
    try:
        return version("ray-mcp")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0.0.0"


class RayMCPServer(MCPServer[App]):
    """An MCPServer that carries the App (so that its runner can close it), enforces the write modes and lists
    the offered toolsets.

    A tool that the mode forbids is never registered, so it is not even listed. A tool of a toolset that is not
    offered is registered and not listed; it still answers a call (the answers' hints name such tools) unless
    --toolsets left it out, and then the call says which flag offers it.
    """

    app: App
    tool_kinds: dict[str, ToolKind]
    hidden_tools: dict[str, str]
    job_watchers: live.JobWatchers
    health_watchers: live.HealthWatchers
    tasks: ToolTasks
    session_use: SessionUse
    toolsets: Toolsets
    registering: Toolset = Toolset.CORE  # the toolset of the area being registered

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, *args: Any, **kwargs: Any) -> None:
        annotations: ToolAnnotations | None = kwargs.get("annotations")
        tool_name = name or fn.__name__
        kind = tool_kind(annotations)
        allowed, why = tool_allowed(
            kind, read_only=self.app.settings.read_only, allow_destructive=self.app.settings.allow_destructive
        )
        if not allowed:
            self.hidden_tools[tool_name] = why
            return
        self.tool_kinds[tool_name] = kind
        self.toolsets.of[tool_name] = self.registering
        if self.app.multi_cluster:
            fn = with_cluster_argument(fn, list(self.app.connections))
        output_model = result_model(fn)
        if output_model is not None:  # the SDK would validate the result its model built a second time
            kwargs["structured_output"] = False
        super().add_tool(fn, name, *args, **kwargs)
        publish_compact(sdk_private.registered_tool(self, tool_name), output_model)

    async def list_tools(self) -> list[MCPTool]:
        """The tools of the toolsets offered now (see toolsets.py)."""
        offered = await self.toolsets.current()
        return [t for t in await self.all_tools() if self.toolsets.of.get(t.name) in offered]

    async def all_tools(self) -> list[MCPTool]:
        """Every registered tool, offered or not."""
        return await super().list_tools()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[App, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """MCPServer's, with the last-resort mapping: a failure that is not one of ours (``UnexpectedToolError``:
        the model would read only "Error executing tool X") becomes a clear is_error, its traceback on stderr.
        A hidden tool names the flag that offers it; an unknown argument is refused with the valid ones, and a
        refused value names the field, the value and what is allowed."""
        if name in self.hidden_tools:
            raise InvalidArgument(f"{name} is not offered by this server: {self.hidden_tools[name]}.")
        self.toolsets.check_call(name)
        if self.tool_kinds.get(name, "read") != "read" and self.app.reads_history():
            raise NeedsLiveCluster(
                f"{name} changes a cluster, and this one is read through a KubeRay History Server (a history+ "
                "address), which serves reads only: nothing was done. Run it against the live cluster's address."
            )
        tool = sdk_private.registered_tool(self, name)
        if tool is not None:
            valid = list(tool.parameters.get("properties") or {})
            if unknown := [key for key in arguments if key not in valid]:
                raise unknown_arguments(name, unknown, valid)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            raise unexpected_failure(name, exc) from exc
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError) and not isinstance(exc, RayMCPError):
                raise invalid_arguments(name, exc.__cause__) from exc
            raise
        finally:
            self.toolsets.after_call(name)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[App, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """MCPServer's, except that an unknown prompt or a missing argument is the spec's -32602 (Invalid params).

        MCPServer 2.3 answers both with error code 0; the MCP spec (server/prompts, "Error Handling") and the
        conformance suite's clients expect -32602.
        """
        prompts = {p.name: p for p in await self.list_prompts()}
        if name not in prompts:
            raise MCPError(INVALID_PARAMS, f"No prompt {name!r}. Prompts: {', '.join(sorted(prompts))}.")
        given = arguments or {}
        missing = [a.name for a in prompts[name].arguments or [] if a.required and a.name not in given]
        if missing:
            raise MCPError(INVALID_PARAMS, f"Prompt {name!r} needs the argument(s): {', '.join(missing)}.")
        return await super().get_prompt(name, arguments, context)


def publish_compact(tool: Tool | None, output_model: type[BaseModel] | None = None) -> None:
    """Publish the tool with a dedented description and compact schemas (see schemas.py).

    A tool that returns a ``CallToolResult`` built from its model (``Annotated[CallToolResult, Model]``,
    registered without the SDK's structured output) publishes the model's top-level fields: the SDK would
    only validate that result a second time. Any other tool keeps the SDK's output model, compacted.
    """
    if tool is None:  # pragma: no cover - add_tool always registers
        return
    tool.description = inspect.cleandoc(tool.description)
    tool.parameters = schemas.compact_input(tool.parameters)
    tool.annotations = schemas.compact_annotations(tool.annotations)
    metadata = tool.fn_metadata
    if output_model is not None:
        metadata.output_schema = schemas.compact_output(output_model.model_json_schema(), nulls=False)
    elif metadata.output_schema is not None:
        metadata.output_schema = schemas.compact_output(metadata.output_schema)
    tool.__dict__.pop("output_schema", None)  # Tool.output_schema is a cached_property


def result_model(fn: Callable[..., Any]) -> type[BaseModel] | None:
    """Model of a tool that returns ``Annotated[CallToolResult, Model]`` (built by shaping's tool_result)."""
    try:
        returned = typing.get_type_hints(inspect.unwrap(fn), include_extras=True).get("return")
    except Exception:  # an annotation that does not resolve: keep the SDK's validation
        return None
    arms = [a for a in typing.get_args(returned) if a is not InputRequiredResult]
    if len(arms) == 1 and InputRequiredResult in typing.get_args(returned):  # a tool that may ask for input
        returned = arms[0]
    if typing.get_origin(returned) is not Annotated:
        return None
    result, *extras = typing.get_args(returned)
    model = extras[0] if extras else None
    if result is CallToolResult and isinstance(model, type) and issubclass(model, BaseModel):
        return model
    return None


def with_cluster_argument(fn: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    """The same tool with an optional ``cluster`` argument, which selects the cluster for the call.

    Only used when several clusters are configured, so that single-cluster users see nothing extra.
    """
    signature = inspect.signature(fn, eval_str=True)
    choice: Any = Literal[tuple(names)]
    description = f"Which cluster to use (default {names[0]!r}): one of {', '.join(names)}."
    annotation: Any = Annotated[choice | None, Field(description=description)]
    parameter = inspect.Parameter(
        "cluster", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
    )

    @functools.wraps(fn)
    async def wrapper(*args: Any, cluster: str | None = None, **kwargs: Any) -> Any:
        del cluster  # ClusterSelection chose the cluster for the whole call, resolvers included
        result = fn(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), parameter])  # type: ignore[attr-defined]
    wrapper.__annotations__ = {
        **{p.name: p.annotation for p in signature.parameters.values()},
        "cluster": annotation,
        "return": signature.return_annotation,
    }
    return wrapper


class ErrorPageLinks(ServerMiddleware[Any]):
    """An is_error tools/call answer that names a Ray concept links the reference page that explains it."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        if ctx.method != "tools/call":
            return result
        data = (
            result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result
        )
        if not isinstance(data, dict) or not data.get("isError") or not isinstance(data.get("content"), list):
            return result
        text = " ".join(str(c.get("text", "")) for c in data["content"] if isinstance(c, dict))
        links = page_links(concept_pages(text, ERROR_PAGE_LINKS))
        if not links:
            return result
        dumped = [link.model_dump(mode="json", by_alias=True, exclude_none=True) for link in links]
        return {**data, "content": [*data["content"], *dumped]}


class HistoryNotice(ServerMiddleware[Any]):
    """Every tools/call answer read from a terminated cluster's record (a history+ address) says so first."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        result = await call_next(ctx)
        history = self.app.history_of_call() if ctx.method == "tools/call" else None
        if history is None:
            return result
        data = (
            result.model_dump(by_alias=True, exclude_none=True) if isinstance(result, BaseModel) else result
        )
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            return result
        return {**data, "content": [{"type": "text", "text": history.notice()}, *data["content"]]}


class ReadScopes(ServerMiddleware[Any]):
    """Each request reads through a scope of its own (sources/scope.py): within one tool call, resources/read
    or prompts/get, each distinct read is made once and shared. (A live job's poller opens one per poll.)"""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        with read_scope():
            return await call_next(ctx)


class ClusterSelection(ServerMiddleware[Any]):
    """The one place that selects the cluster a tools/call names, for the whole call.

    The tool's ``Resolve`` resolvers (the adapter, confirmation plans) run before its body, so the choice is
    made when the call starts; ``context.App.api()`` reads it. An unknown name is rejected by the argument's
    Literal before any resolver runs.
    """

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        arguments = (ctx.params or {}).get("arguments")
        cluster = arguments.get("cluster") if isinstance(arguments, dict) else None
        # a call that names none is the default cluster's, said explicitly: the links it hands out carry it
        token = CURRENT_CLUSTER.set(
            cluster if isinstance(cluster, str) else ctx.lifespan_context.default_cluster
        )
        try:
            return await call_next(ctx)
        finally:
            CURRENT_CLUSTER.reset(token)


def register_tools(server: RayMCPServer) -> None:
    """Every tool area's tools, in the order tools/list lists them.

    Imported here rather than at the top: every area imports ``ray_mcp.server.context``, and importing that
    runs this package's ``__init__``, which imports this module.
    """
    for area in TOOL_AREAS:
        module = importlib.import_module(f"ray_mcp.tools.{area}")
        server.registering = Toolset(module.TOOLSET)  # every area names its toolset: a missing one fails here
        module.register(server)
    server.registering = Toolset.CORE  # a tool added later (a test's probe) is listed with the core


def offer_toolsets(server: RayMCPServer, bus: InMemorySubscriptionBus, listers: LegacyToolListers) -> None:
    """The toolsets tools/list offers; a change is announced to 2026 listen streams (the bus) and to the 2025
    connections that listed the tools."""

    async def tools_changed() -> None:
        await bus.publish(ToolsListChanged())
        await listers.announce()

    server.toolsets = Toolsets(server.app, tools_changed)
    if depends_on_the_cluster(server.toolsets.selection):  # the list can change: 2025 clients are told so
        sdk_private.announce_tool_list_changes(server)
    server.app.on_close.append(server.toolsets.aclose)


def build_server(
    settings: Settings | None = None,
    *,
    http_transport: httpx.AsyncBaseTransport | None = None,
    gcs_lookup: GcsLookup | None = GCS_LOOKUP,
) -> RayMCPServer:
    """Build the ray-mcp server. ``http_transport`` replaces the dashboard connection (tests inject faults)."""
    settings = settings or Settings()
    install_log_redaction()  # the server's own logs and tracebacks never show a secret it knows of
    auditor = Auditor(settings.audit_log)
    auditor.check()  # fail closed: an audit log that cannot be written means no server (AuditLogUnwritable)
    app = App(settings, http_transport=http_transport, gcs_lookup=gcs_lookup)
    for connection in app.connections.values():
        remember_settings_secrets(connection.settings)
    kinds: dict[str, ToolKind] = {}

    @asynccontextmanager
    async def lifespan(_server: MCPServer[App]) -> AsyncIterator[App]:
        app.start()  # resolve (or start the embedded cluster) in the background
        yield app

    schemas: dict[str, dict[str, Any]] = {}

    async def input_schemas() -> dict[str, dict[str, Any]]:
        if not schemas:  # tools are all registered before the first call; list them once
            schemas.update({t.name: t.input_schema for t in await server.all_tools()})
        return schemas

    bus = InMemorySubscriptionBus()  # live.py publishes job updates on it
    session_use = SessionUse()
    listers = LegacyToolListers()
    replica_key = settings.replica_key()
    tasks = ToolTasks(app, replica_key=replica_key)
    if replica_key is not None:  # what one replica seals, any other opens
        confirm.share_secret(replica_key)
    server = RayMCPServer(
        name="ray-mcp",
        title="Ray",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level=settings.log_level,
        subscriptions=bus,
        extensions=[tasks],
        icons=RAY_ICONS,
        cache_hints=cache_hints.LISTS,
        request_state_security=RequestStateSecurity(keys=[replica_key]) if replica_key else None,
        middleware=[
            SafetyMiddleware(lambda: kinds, auditor),  # outermost: what every other layer adds passes it too
            session_use,  # which HTTP sessions made a request (shares.SessionShares reclaims the others)
            listers,  # the 2025 connections that listed the tools: told when the offered tools change
            ReadScopes(),
            cache_hints.ReadCacheHints(),
            ErrorPageLinks(),
            CaseInsensitiveChoices(input_schemas),
            *([ClusterSelection()] if app.multi_cluster else []),
            HistoryNotice(app),  # inside ClusterSelection: the call's cluster is known
        ],
    )
    server.app = app
    server.session_use = session_use
    server.tool_kinds = kinds
    server.hidden_tools = {}
    server.tasks = tasks
    offer_toolsets(server, bus, listers)
    register_tools(server)
    resources.register(server)
    server.job_watchers = live.register(server, bus)
    prompts.register(server)
    completions.register(server, app)
    if server.hidden_tools:
        log.info(
            "ray-mcp: tools not offered: %s", ", ".join(f"{k} ({v})" for k, v in server.hidden_tools.items())
        )
    return server
