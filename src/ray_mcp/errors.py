"""The error tree of ray-mcp, and the one place where Ray and HTTP failures are mapped onto it.

Every anticipated failure is a ``ToolError`` subclass, so that mcp carries its message to the model as an
``is_error`` result. Every message says what failed, with the value it was given, and what to do next.

    RayMCPError (ToolError)
    ├── InvalidArgument        the caller's input is wrong; nothing was sent to the cluster
    ├── NotFound               the id or name does not exist in the cluster
    ├── ClusterUnavailable     the cluster could not be reached, or the embedded one failed to start
    │   └── DashboardTimeout   the dashboard accepted the request but did not answer in time
    └── RayRequestFailed       the cluster answered with an error
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from mcp.server.mcpserver.exceptions import ToolError


class RayMCPError(ToolError):
    """Base of every failure ray-mcp anticipates."""


class InvalidArgument(RayMCPError):
    """The caller's input is wrong. Nothing was changed in the cluster."""


class NotFound(RayMCPError):
    """The id or name the caller gave does not exist."""


class ClusterUnavailable(RayMCPError):
    """The Ray cluster could not be reached."""


class DashboardTimeout(ClusterUnavailable):
    """The Ray dashboard did not answer within the configured timeout."""


class RayRequestFailed(RayMCPError):
    """The cluster answered, with an error."""


_UNREACHABLE_NEXT_STEP = (
    "Check that the cluster is running (`ray status` on the head node) and that the dashboard is reachable "
    "from this machine; pass the right address with --address or RAY_ADDRESS "
    "(a dashboard URL such as http://127.0.0.1:8265, ray://host:10001, or a GCS host:6379)."
)


def unreachable(address: str, cause: str) -> ClusterUnavailable:
    return ClusterUnavailable(f"Cannot reach the Ray cluster at {address}: {cause}. {_UNREACHABLE_NEXT_STEP}")


@contextmanager
def dashboard_errors(url: str, what: str, timeout_s: float) -> Iterator[None]:
    """Map httpx failures of one dashboard request onto our error tree."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise DashboardTimeout(
            f"The Ray dashboard at {url} did not answer {what} within {timeout_s:g} s "
            f"({type(exc).__name__}). The cluster may be overloaded or the dashboard stuck; retry, "
            "or raise --request-timeout-s (RAY_MCP_REQUEST_TIMEOUT_S)."
        ) from exc
    except httpx.HTTPStatusError as exc:
        raise RayRequestFailed(
            f"The Ray dashboard at {url} refused {what}: HTTP {exc.response.status_code} "
            f"{_short_body(exc.response)}."
        ) from exc
    except httpx.TransportError as exc:
        raise unreachable(url, f"{type(exc).__name__}: {exc or 'connection failed'}") from exc
    except ValueError as exc:  # JSON decoding of a non-JSON answer
        raise RayRequestFailed(
            f"The Ray dashboard at {url} answered {what} with something that is not JSON ({exc}). "
            "Is this address really a Ray dashboard?"
        ) from exc


def _short_body(response: httpx.Response, limit: int = 300) -> str:
    try:
        text = response.text
    except Exception:  # pragma: no cover - undecodable body
        return ""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[:limit] + "…"
