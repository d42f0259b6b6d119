"""The nodes' own metrics endpoints (each node's metrics export port, Ray's dashboard and autoscaler ports),
read when no Prometheus is known: what is true now, without history.

The targets are what Ray gives Prometheus (sources/routes.py's prometheus_targets: the dashboard's HTTP service
discovery), so they come from the cluster and never from a tool argument. Each page is Prometheus's text format, parsed by the
prometheus_client library Ray itself exports it with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from ray_mcp.amounts import byte_size
from ray_mcp.limits import NODE_METRICS_BYTES, NODE_METRICS_ENDPOINTS, NODE_METRICS_TIMEOUT_S

USER_AGENT = "ray-mcp"


@dataclass(frozen=True)
class RawSample:
    """One sample of one endpoint, its labels as exported plus ``instance`` (the target, as Prometheus sets it)."""

    name: str
    labels: dict[str, str]
    value: float


class NodeMetrics:
    """Reads metrics endpoints over one httpx.AsyncClient (plain HTTP, as Ray serves them)."""

    def __init__(
        self, *, timeout_s: float = NODE_METRICS_TIMEOUT_S, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s), headers={"User-Agent": USER_AGENT}, transport=transport
        )
        self.timeout_s = timeout_s

    async def aclose(self) -> None:
        await self.http.aclose()

    async def read(
        self, targets: list[str], names: Collection[str]
    ) -> tuple[list[RawSample], dict[str, str]]:
        """The samples of ``names`` on every target (at most NODE_METRICS_ENDPOINTS), and the targets that
        could not be read, each with why."""
        pages = await asyncio.gather(*(self._page(t) for t in targets[:NODE_METRICS_ENDPOINTS]))
        samples: list[RawSample] = []
        failed: dict[str, str] = {}
        wanted = set(names)
        for target, (text, error) in zip(targets, pages, strict=False):
            if error is not None:
                failed[target] = error
                continue
            samples += parse(text or "", target, wanted)
        return samples, failed

    async def _page(self, target: str) -> tuple[str | None, str | None]:
        try:
            async with self.http.stream("GET", f"http://{target}/metrics") as response:
                if response.status_code != 200:
                    return None, f"HTTP {response.status_code}"
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > NODE_METRICS_BYTES:
                        return None, f"its page is larger than {byte_size(NODE_METRICS_BYTES)}"
                return body.decode("utf-8", errors="replace"), None
        except httpx.TimeoutException:
            return None, f"no answer within {self.timeout_s:g} s"
        except httpx.HTTPError as exc:
            return None, f"{type(exc).__name__}"


def parse(text: str, target: str, names: Collection[str]) -> list[RawSample]:
    """The samples named in ``names`` (by sample name, so a counter is ``x_total``) of one page."""
    out: list[RawSample] = []
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:  # not Prometheus's text format: nothing usable from this target
        return out
    for family in families:
        for sample in family.samples:
            if sample.name in names:
                out.append(RawSample(sample.name, {**sample.labels, "instance": target}, float(sample.value)))
    return out
