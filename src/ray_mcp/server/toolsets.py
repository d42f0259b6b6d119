"""Which toolsets tools/list offers now (ray_mcp/toolsets.py says what each holds and when it fits).

The Kubernetes and metrics facts are known at start (the address, the settings). Whether Serve runs and whether
Train keeps its runs are read from the cluster: at the first tools/list, and again once they are older than
TOOLSET_RECHECK_S or right after a call to an unlisted Serve or Train tool (serve_deploy starts Serve). A
tools/list waits at most TOOLSET_LIST_WAIT_S for a read under way (a cluster still being found is listed
without them, and announced later). When the offered set changes, a tools list_changed event goes to the
subscribed clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import connection as mcp_connection
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.types import ToolListChangedNotification
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ray_mcp import sdk_private
from ray_mcp.answers.libraries import serve_and_train
from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.middleware import redacted_notification
from ray_mcp.limits import TOOLSET_LIST_WAIT_S, TOOLSET_READ_S, TOOLSET_RECHECK_S
from ray_mcp.server.context import App, Connection
from ray_mcp.sources.scope import read_scope
from ray_mcp.toolsets import ABOUT, FROM_THE_CLUSTER, ClusterFacts, Toolset, depends_on_the_cluster, selected

log = logging.getLogger("ray_mcp.server")


class Toolsets:
    """The toolset of every registered tool, and the toolsets offered for the cluster as last read."""

    def __init__(self, app: App, on_change: Callable[[], Awaitable[None]]) -> None:
        self.app = app
        self.selection = app.settings.toolset_selection()
        self.of: dict[str, Toolset] = {}  # tool name -> its toolset (the module's TOOLSET)
        self._on_change = on_change
        self._serve = self._train = False
        self._read_at: float | None = None  # when Serve and Train were last read (monotonic)
        self._reading: asyncio.Task[None] | None = None

    def facts(self) -> ClusterFacts:
        return ClusterFacts(
            serve=self._serve, train=self._train, kubernetes=self.app.kubernetes, metrics=self.app.metrics
        )

    def offered(self) -> frozenset[Toolset]:
        return selected(self.selection, self.facts())

    def listed(self, name: str) -> bool:
        return self.of.get(name, Toolset.CORE) in self.offered()

    async def current(self) -> frozenset[Toolset]:
        """The offered toolsets for a tools/list, waiting briefly for a read of the cluster's facts under way."""
        self.refresh_if_stale()
        if self._reading is not None and not self._reading.done():
            with contextlib.suppress(TimeoutError):  # still finding the cluster: list now, announce later
                await asyncio.wait_for(asyncio.shield(self._reading), TOOLSET_LIST_WAIT_S)
        return self.offered()

    def refresh_if_stale(self) -> None:
        """Read Serve and Train again in the background when the last read is older than TOOLSET_RECHECK_S."""
        if not depends_on_the_cluster(self.selection) or (self._reading and not self._reading.done()):
            return
        if self._read_at is None or time.monotonic() - self._read_at >= TOOLSET_RECHECK_S:
            self._reading = asyncio.get_running_loop().create_task(self._read())

    def check_call(self, name: str) -> None:
        """Refuse a call to a tool that --toolsets left out. Under the default set a tool that is not listed
        still answers: the set saves the agent's context, and the answers' hints name tools of every set."""
        if name in self.of and not self.listed(name) and not depends_on_the_cluster(self.selection):
            raise InvalidArgument(self.why_not(name) + ".")

    def after_call(self, name: str) -> None:
        """After a call, read Serve and Train again if the last read is old, or at once when the tool was one of
        theirs and not listed (serve_deploy on a cluster without Serve starts it): a change is announced. A
        client that never listed the tools is owed no announcement, so nothing is read for it."""
        if self._read_at is None:
            return
        if name in self.of and self.of[name] in FROM_THE_CLUSTER and not self.listed(name):
            self._read_at = 0.0
        self.refresh_if_stale()

    async def _read(self) -> None:
        before = self.offered()
        with read_scope():  # a scope of its own: the call or list that started this read may have ended
            found = await asyncio.gather(*(self._libraries(c) for c in list(self.app.connections.values())))
        # offered if any configured cluster runs it
        self._serve, self._train = any(f[0] for f in found), any(f[1] for f in found)
        self._read_at = time.monotonic()
        if self.offered() != before:
            log.info("ray-mcp: toolsets offered now: %s", ", ".join(sorted(self.offered())))
            await self._on_change()

    @staticmethod
    async def _libraries(connection: Connection) -> tuple[bool, bool]:
        """Whether Serve and Train run on one cluster; (False, False) while it cannot be read."""
        try:
            api = await connection.api()
            return await asyncio.wait_for(serve_and_train(api.sources), TOOLSET_READ_S)
        except Exception as exc:  # a cluster not found or not answering: its libraries are not known
            log.debug("ray-mcp: toolsets: Serve and Train not read on %s: %s", connection.name, exc)
            return False, False

    def why_not(self, name: str) -> str:
        """Why a registered tool is not offered, and the flag that offers it."""
        toolset = self.of[name]
        when = ABOUT[toolset][1]
        chosen = self.app.settings.toolsets
        because = f"--toolsets is {chosen!r}" if chosen is not None else f"the default set has it only {when}"
        return (
            f"{name} is in the toolset {toolset.value!r}, which this server does not offer ({because}); nothing "
            f"was done. Start ray-mcp with --toolsets {chosen or 'default'},{toolset.value} (or RAY_MCP_TOOLSETS) "
            "to offer it"
        )

    async def aclose(self) -> None:
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
            with contextlib.suppress(BaseException):
                await self._reading


class LegacyToolListers(ServerMiddleware[Any]):
    """The 2025 connections that listed the tools, told when the offered tools change.

    A 2026 client hears of a change on its ``subscriptions/listen`` stream (the bus); a 2025 client (Claude Code,
    Cursor) only by a ``notifications/tools/list_changed`` on its own connection, which the SDK's bus does not
    send. A connection is remembered from its first tools/list until it closes (its exit stack forgets it).
    """

    def __init__(self) -> None:
        self._connections: dict[int, mcp_connection.Connection] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/list" and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = sdk_private.connection_of(ctx.session)
            key = id(connection)
            if key not in self._connections:
                self._connections[key] = connection
                connection.exit_stack.callback(self._connections.pop, key, None)
        return await call_next(ctx)

    async def announce(self) -> None:
        """Tell every remembered 2025 connection, each on its own (the SDK's notify never raises, never waits
        on a client that stopped reading longer than its stream allows)."""
        notification = redacted_notification(ToolListChangedNotification())  # no content; the guard's path
        params = notification.model_dump(by_alias=True, mode="json", exclude_none=True).get("params")
        sends = [c.notify(notification.method, params) for c in list(self._connections.values())]
        await asyncio.gather(*sends, return_exceptions=True)
