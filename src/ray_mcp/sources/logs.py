"""The dashboard's log routes (``/api/v0/logs``): the files of a node, a file's tail, a whole file streamed (for
grep), and a file followed as it grows. A file is named by the route's own parameters (node_id + filename,
actor_id, task_id + attempt_number, node_id + pid; a suffix of out or err)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx

from ray_mcp.errors import dashboard_errors
from ray_mcp.sources.dashboard import Dashboard

FOLLOW_INTERVAL_S = "0.5"  # how often Ray's stream route looks for new lines


class LogsAPI:
    """The log files of one cluster, read on the server side through its dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    async def node_files(self, node_id: str, glob: str) -> list[str]:
        """The names of a node's log files that match a glob (Ray groups them by kind; one list here)."""
        data = await self.dashboard.get_data(
            "/api/v0/logs", what=f"the log files of node {node_id}", params={"node_id": node_id, "glob": glob}
        )
        groups = (data.get("result") or {}) if isinstance(data, dict) else {}
        return sorted({str(f) for group in groups.values() if isinstance(group, list) for f in group})

    async def tail(
        self, params: Mapping[str, str], *, lines: int, keep: int, what: str, hint: str
    ) -> tuple[bytes, int]:
        """A file's last ``lines`` lines, keeping at most the last ``keep`` bytes: (kept bytes, bytes sent)."""
        d = self.dashboard
        query = {**params, "lines": str(lines), "timeout": str(max(1, int(d.timeout_s)))}
        return await d.fetch_log("file", query, what=what, hint=hint, keep=keep)

    @asynccontextmanager
    async def whole(
        self, params: Mapping[str, str], *, what: str, hint: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A whole file, streamed in chunks of at most 1 MiB (grep scans it as it comes)."""
        d = self.dashboard
        query = {**params, "lines": "-1", "timeout": str(max(5, int(d.timeout_s)))}
        async with d.log_stream("file", query, what=what, hint=hint, read_timeout=d.timeout_s) as response:
            chunks = _chunks(d, response, what, 1 << 20)
            try:
                yield chunks
            finally:
                await chunks.aclose()

    @asynccontextmanager
    async def follow(
        self, params: Mapping[str, str], *, lines: int, what: str, hint: str
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """A file's last ``lines`` lines, then what is appended to it, for as long as the caller reads."""
        d = self.dashboard
        query = {**params, "lines": str(lines), "interval": FOLLOW_INTERVAL_S}
        async with d.log_stream("stream", query, what=what, hint=hint, read_timeout=None) as response:
            chunks = _chunks(d, response, what, None)
            try:
                yield chunks
            finally:
                await chunks.aclose()


async def _chunks(
    d: Dashboard, response: httpx.Response, what: str, size: int | None
) -> AsyncGenerator[bytes, None]:
    with dashboard_errors(d.dashboard_url, what, d.timeout_s):
        async for chunk in response.aiter_raw(size):
            yield chunk
