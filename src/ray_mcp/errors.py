"""The error tree of ray-mcp, and the one place where Ray and HTTP failures are mapped onto it.

Every anticipated failure is a ``ToolError`` subclass, so that mcp carries its message to the model as an
``is_error`` result. Every message says what failed, with the value it was given, and what to do next.

    RayMCPError (ToolError)
    ├── InvalidArgument        the caller's input is wrong; nothing was sent to the cluster
    │   └── NeedsLiveCluster   asked of a terminated cluster's record (History Server) what only a live one has
    ├── NotFound               the id or name does not exist in the cluster
    ├── ClusterUnavailable     the cluster could not be reached, or the embedded one failed to start
    │   ├── DashboardTimeout   the dashboard accepted the request but did not answer in time
    │   └── PrometheusUnavailable  the Prometheus is down, slow or not a Prometheus: history is unknown
    └── RayRequestFailed       the cluster answered with an error
        └── AuthRefused        the dashboard (or a proxy) refused the credentials
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
import httpx
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from ray_mcp.limits import DASHBOARD_BODY_CHARS, MAX_ARGUMENT_ERRORS, QUOTED_CHARS, RAY_ERROR_CHARS
from ray_mcp.text import one_line, quoted, truncate_text


class RayMCPError(ToolError):
    """Base of every failure ray-mcp anticipates."""


class InvalidArgument(RayMCPError):
    """The caller's input is wrong. Nothing was changed in the cluster."""


class NeedsLiveCluster(InvalidArgument):
    """The source is a terminated cluster's record (a history+ address), which does not keep what was asked."""


class NotFound(RayMCPError):
    """The id or name the caller gave does not exist."""


class ClusterUnavailable(RayMCPError):
    """The Ray cluster could not be reached."""


class DashboardTimeout(ClusterUnavailable):
    """The Ray dashboard did not answer within the configured timeout."""


class PrometheusUnavailable(ClusterUnavailable):
    """The cluster's Prometheus could not be reached, did not answer in time, or answered something else: what
    it would tell (history, trends) is unknown, never assumed fine."""


class RayRequestFailed(RayMCPError):
    """The cluster answered, with an error."""


class AuthRefused(RayRequestFailed):
    """The dashboard (or a proxy in front of it) refused the credentials: HTTP 401 or 403."""


def auth_refused(url: str, what: str, status: int | None = None) -> AuthRefused:
    """The one message for a refused Ray token. Never quotes the answer: a proxy may echo the credentials."""
    code = f"HTTP {status}" if status else "HTTP 401/403"
    return AuthRefused(
        f"The Ray dashboard at {url} refused the token ({code}) for {what}: check RAY_AUTH_TOKEN (or "
        "RAY_AUTH_TOKEN_PATH, or this cluster's auth_token/headers in the clusters file) and that the cluster "
        "runs with the token you expect. Nothing was changed."
    )


# What a refused connection may mean: the cluster is gone. Said where it is found, with what is left and where
# (worded so that its Ray concepts do not crowd out the dashboard's page among the error's links).
GONE = (
    "If the cluster is gone (its head stopped or restarted, its RayCluster deleted, its nodes scaled down), what "
    "only its head held is lost with it: what the State API lists (tasks, objects, events and the rest), and the "
    "submitted jobs' records unless the GCS is fault tolerant (external Redis), which keeps them across a head "
    "restart. "
    "Log files stay on the disk of each node that survives, under its Ray temp dir (/tmp/ray/session_*/logs by "
    "default). A KubeRay History Server that collected the cluster keeps its record: read it with --address "
    "history+http://host:port/namespace/kind/name."
)


def unreachable(address: str, cause: str, *, gone: bool = False) -> ClusterUnavailable:
    """``gone``: nothing accepts connections there, so the cluster may no longer exist (GONE says what then)."""
    from ray_mcp.addresses import ADDRESS_FORMS  # the address table reads this module's errors

    return ClusterUnavailable(
        f"Cannot reach the Ray cluster at {address}: {cause}. Check that the cluster is running (`ray status` on "
        "the head node) and that the dashboard is reachable from this machine; pass the right address with "
        f"--address or RAY_ADDRESS ({ADDRESS_FORMS})." + (f" {GONE}" if gone else "")
    )


@contextmanager
def dashboard_errors(
    url: str, what: str, timeout_s: float, *, not_found: str | None = None
) -> Iterator[None]:
    """Map httpx failures of one dashboard request onto our error tree.

    ``not_found`` is the message for an HTTP 404 (the id the caller gave does not exist); an HTTP 400 of an
    endpoint that says so (the Jobs API) is the caller's mistake.
    """
    try:
        yield
    except httpx.HTTPStatusError as exc:
        status, body = exc.response.status_code, _short_body(exc.response)
        if status in (401, 403):
            raise auth_refused(url, what, status) from exc
        if status == 404 and not_found is not None:
            raise NotFound(not_found) from exc
        if status == 400 and not_found is not None:
            raise InvalidArgument(f"The Ray dashboard at {url} rejected {what}: {body}.") from exc
        raise RayRequestFailed(f"The Ray dashboard at {url} refused {what}: HTTP {status} {body}.") from exc
    except httpx.TimeoutException as exc:
        raise DashboardTimeout(
            f"The Ray dashboard at {url} did not answer {what} within {timeout_s:g} s "
            f"({type(exc).__name__}). The cluster may be overloaded or the dashboard stuck; retry, "
            "or raise --request-timeout-s (RAY_MCP_REQUEST_TIMEOUT_S)."
        ) from exc
    except httpx.TransportError as exc:
        gone = isinstance(exc, httpx.ConnectError)  # refused, or no such host: not a slow or broken answer
        raise unreachable(url, f"{type(exc).__name__}: {exc or 'connection failed'}", gone=gone) from exc
    except httpx.InvalidURL as exc:  # an argument too long (or malformed) to fit in the request's URL
        raise InvalidArgument(
            f"Cannot ask the Ray dashboard at {url} for {what}: an argument does not fit in a URL ({exc}). "
            "Shorten the filter or id you gave; nothing was sent."
        ) from exc
    except ValueError as exc:  # JSON decoding of a non-JSON answer
        raise RayRequestFailed(
            f"The Ray dashboard at {url} answered {what} with something that is not JSON ({exc}). "
            "Is this address really a Ray dashboard?"
        ) from exc


def _short_body(response: httpx.Response) -> str:
    try:
        text = response.text
    except Exception:  # pragma: no cover - undecodable body
        return ""
    return one_line(text, DASHBOARD_BODY_CHARS)


# -- the GCS (gRPC, through Ray's own channel) --------------------------------------------------------------------


@contextmanager
def gcs_errors(address: str, what: str, timeout_s: float) -> Iterator[None]:
    """Map the failures of one gRPC call to the GCS onto our error tree. The first sentence of each message
    says what failed; callers that can answer without the GCS quote it as the reason a fact is unknown."""
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code() if isinstance(exc, grpc.Call) else None
        name = code.name if code is not None else type(exc).__name__
        details = _clean(str(exc.details() if isinstance(exc, grpc.Call) else exc) or "")
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            raise AuthRefused(
                f"The GCS at {address} refused the token for {what} ({name}). Check this cluster's Ray token "
                "(RAY_AUTH_TOKEN, or auth_token in the clusters file). Nothing was changed."
            ) from exc
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, None):
            raise ClusterUnavailable(
                f"The GCS at {address} did not answer {what} within {timeout_s:g} s ({name}). The dashboard still "
                "answers everything else; ray-mcp needs the GCS port (6379) reachable from this machine only "
                "for what the dashboard does not serve."
            ) from exc
        raise RayRequestFailed(f"The GCS at {address} failed {what}: {name} {details}.") from exc


# -- Ray's Jobs SDK (used to submit, because it uploads the working_dir) and the log endpoint ----------------

# JobSubmissionClient raises a bare RuntimeError with the HTTP status in its text: no typed error to use.
_JOB_SDK_STATUS = re.compile(r"status code (\d{3}): (.*)", re.S)


def _clean(text: str) -> str:
    return one_line(" ".join(text.split()).rstrip("."), RAY_ERROR_CHARS)


@contextmanager
def job_sdk_errors(url: str, what: str) -> Iterator[None]:
    """Map the failures of one ``JobSubmissionClient`` call onto our error tree."""
    try:
        yield
    except RayMCPError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "AuthenticationError":  # ray.exceptions: the dashboard answered 401 or 403
            status = 401 if str(getattr(exc, "message", "")).startswith("Authentication required") else 403
            raise auth_refused(url, what, status) from exc
        if not isinstance(exc, (RuntimeError, OSError)):
            raise
        _map_job_sdk_failure(exc, url, what)


def _map_job_sdk_failure(exc: RuntimeError | OSError, url: str, what: str) -> None:
    if isinstance(exc, RuntimeError):
        match = _JOB_SDK_STATUS.search(str(exc))
        if match is None:
            raise RayRequestFailed(f"The Ray job server at {url} failed {what}: {_clean(str(exc))}.") from exc
        status, body = int(match[1]), _clean(match[2])
        if status in (401, 403):
            raise auth_refused(url, what, status) from exc
        if status == 400:
            raise InvalidArgument(f"The Ray job server at {url} rejected {what}: {body}.") from exc
        raise RayRequestFailed(f"The Ray job server at {url} failed {what}: HTTP {status} {body}.") from exc
    else:  # requests' ConnectionError and Timeout are OSErrors, as is the SDK's ConnectionError
        if "timeout" in type(exc).__name__.lower():
            raise DashboardTimeout(
                f"The Ray job server at {url} did not answer {what} in time ({type(exc).__name__}). "
                "Retry, or check the head node's load."
            ) from exc
        raise unreachable(url, f"{what} failed: {_clean(str(exc))}") from exc


def log_request_failed(url: str, status: int, body: str, *, what: str, not_found_hint: str) -> RayMCPError:
    """The error for a failed ``/api/v0/logs/...`` request. The endpoint answers 500 with a text body."""
    if status in (401, 403, 407):  # the body may echo the credentials: never quoted
        return auth_refused(url, what, status)
    text = _clean(body)
    if "Agent for node id" in text or "Cannot find matching node_id" in text:
        return NotFound(f"No such node for {what}: {text}. Call cluster_status to see the node ids and IPs.")
    if "For actor task" in text:
        return InvalidArgument(
            f"Cannot read {what}: it is a task of an actor, whose output goes to the actor's log. "
            "Call tail_logs with the actor_id instead."
        )
    if re.search(r"not found|Could not find|doesn't exist|does not exist|No such file", text, re.I):
        return NotFound(f"Ray found no log for {what}: {text}. {not_found_hint}")
    if status in (400, 422):
        return InvalidArgument(f"The Ray dashboard at {url} rejected {what}: {text}.")
    return RayRequestFailed(f"The Ray dashboard at {url} failed to read {what}: HTTP {status} {text}.")


# -- arguments the tool's schema refuses ------------------------------------------------------------------


def unknown_arguments(tool: str, unknown: list[str], valid: list[str]) -> InvalidArgument:
    """An argument the tool does not have: refused, never ignored (an ignored filter widens the answer)."""
    names = ", ".join(quoted(name) for name in unknown)
    return InvalidArgument(
        f"{tool} has no argument {names}; nothing was done. Its arguments: {', '.join(valid) or 'none'}."
    )


def invalid_arguments(tool: str, exc: ValidationError) -> InvalidArgument:
    """Pydantic's rejection of a call, as one sentence per field: the field, the value given, what is allowed."""
    parts = []
    for err in exc.errors()[:MAX_ARGUMENT_ERRORS]:
        field = ".".join(str(part) for part in err["loc"]) or "arguments"
        if err["type"] == "missing":
            parts.append(f"{field} is required")
        else:
            allowed = str(err["msg"]).removeprefix("Input should be ").removeprefix("Value error, ")
            value = err["input"]  # as sent: 1 is not "1" (a refused number is not said to be a string)
            shown = (
                quoted(value)
                if isinstance(value, str)
                else truncate_text(json.dumps(value, default=str), QUOTED_CHARS)
            )
            parts.append(f"{field}={shown} is refused: expected {allowed}")
    return InvalidArgument(f"{tool}: {'; '.join(parts)}. Nothing was done; call it again with a valid value.")


# -- the last resort: anything no mapping above anticipated -----------------------------------------------------


def unexpected_failure(tool: str, exc: BaseException) -> RayMCPError:
    """The is_error for a failure nothing else mapped (a bug, or a dependency's surprise): log its traceback to
    stderr and say plainly what happened. The exception's own text is not repeated to the client (it may
    quote a request or a secret); a refused Ray token still gets its own message."""
    cause: BaseException = exc
    while True:  # the SDK's wrappers and task groups' exception groups hide the error that happened
        if isinstance(cause, BaseExceptionGroup) and cause.exceptions:
            cause = cause.exceptions[0]
        elif cause.__cause__ is not None and type(cause).__name__ in (
            "UnexpectedToolError",
            "UnexpectedResourceError",
        ):
            cause = cause.__cause__
        else:
            break
    if type(cause).__name__ == "AuthenticationError":
        return auth_refused("the configured address", f"{tool}")
    logging.getLogger("ray_mcp.errors").error(
        "ray-mcp: tool %s failed with an unexpected %s", tool, type(cause).__name__, exc_info=cause
    )
    return RayMCPError(
        f"{tool} failed on an unexpected {type(cause).__name__} inside ray-mcp (a bug: the traceback is in the "
        "server's log on stderr). If it was a write, check what happened with a read tool (get_job, list_jobs, "
        "list_actors, serve_status) before retrying."
    )


# -- Prometheus (sources/prometheus.py) ----------------------------------------------------------------------


class PrometheusQueryError(Exception):
    """Prometheus's own error envelope: ``errorType`` (bad_data, execution, timeout, canceled, internal,
    unavailable, not_found) and its message. Raised by sources/prometheus.py inside ``prometheus_errors``,
    which maps it with the URL and the query it was about."""

    def __init__(self, error_type: str, message: str, status: int) -> None:
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message
        self.status = status


PROMETHEUS_SETTING = "--prometheus (RAY_MCP_PROMETHEUS, or Ray's RAY_PROMETHEUS_HOST)"


def prometheus_refused(url: str, what: str, status: int) -> PrometheusUnavailable:
    """The Prometheus (or a proxy before it) refused our credentials. Never quotes the answer."""
    return PrometheusUnavailable(
        f"The Prometheus at {url} refused {what} (HTTP {status}): check RAY_PROMETHEUS_HEADERS (Ray's format, "
        'JSON: {"Authorization": "Bearer ..."}). History is unknown until it accepts them.'
    )


@contextmanager
def prometheus_errors(url: str, what: str, timeout_s: float) -> Iterator[None]:
    """Map one Prometheus request's failures: a query Prometheus cannot parse or run (bad_data, execution) is
    the caller's to fix; anything else (down, slow, overloaded, not a Prometheus) leaves history unknown."""
    try:
        yield
    except PrometheusQueryError as exc:
        said = _clean(exc.message)
        if exc.error_type == "bad_data":
            raise InvalidArgument(
                f"Prometheus at {url} cannot parse {what}: {said}. Fix the PromQL (its syntax: "
                "https://prometheus.io/docs/prometheus/latest/querying/basics/), or ask a named question instead."
            ) from exc
        if exc.error_type == "execution":
            raise InvalidArgument(
                f"Prometheus at {url} could not run {what}: {said}. Narrow it (a shorter window, a node, job or "
                "deployment, fewer series) and call again."
            ) from exc
        if exc.error_type in ("timeout", "canceled"):
            raise PrometheusUnavailable(
                f"Prometheus at {url} gave up on {what} ({exc.error_type}: {said}): history is unknown. Ask "
                "for a shorter window or narrow the question."
            ) from exc
        raise PrometheusUnavailable(
            f"Prometheus at {url} failed {what} ({exc.error_type or 'error'}, HTTP {exc.status}: {said}): "
            "history is unknown."
        ) from exc
    except httpx.HTTPStatusError as exc:
        raise PrometheusUnavailable(
            f"Prometheus at {url} answered {what} with HTTP {exc.response.status_code} "
            f"{_short_body(exc.response)}: history is unknown. Is {PROMETHEUS_SETTING} a Prometheus API?"
        ) from exc
    except httpx.TimeoutException as exc:
        raise PrometheusUnavailable(
            f"Prometheus at {url} did not answer {what} within {timeout_s:g} s ({type(exc).__name__}): "
            "history is unknown. It may be overloaded; ask for a shorter window, or retry."
        ) from exc
    except httpx.TransportError as exc:
        raise PrometheusUnavailable(
            f"Cannot reach Prometheus at {url} for {what} ({type(exc).__name__}: {exc or 'connection failed'}): "
            f"history is unknown. Check that it runs and that {PROMETHEUS_SETTING} names it."
        ) from exc
    except httpx.InvalidURL as exc:
        raise InvalidArgument(f"Cannot send {what} to Prometheus at {url}: {exc}. Nothing was sent.") from exc
