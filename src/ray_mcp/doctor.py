"""`ray-mcp doctor` (or `--check`): is this setup going to work? One line per check, a fix for each failure.

`claude mcp list` says "Connected" as soon as the server starts, even with a wrong address; the doctor is how a
user finds out before the agent does. It never starts an embedded cluster and changes nothing in the cluster.
Exit status 0 when nothing failed (warnings allowed), 1 otherwise. A check that could not run is reported as
such ("skip", with the reason), never as passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ray_mcp.addresses import ADDRESS_FORMS, form_of
from ray_mcp.guard.redaction import clean_text, remember_settings_secrets
from ray_mcp.limits import DOCTOR_APPS_NAMED
from ray_mcp.settings import Settings
from ray_mcp.text import quoted, single_line

if TYPE_CHECKING:
    import httpx

# The Ray version this release of ray-mcp was tested with (pyproject pins the same one).
TESTED_RAY_VERSION = "2.60.0"
GCS_TIMEOUT_S = 5.0

Status = Literal["ok", "warn", "FAIL", "skip"]


@dataclass
class Check:
    name: str
    status: Status
    message: str
    fix: str = ""

    def line(self) -> str:
        """The check as one line of the terminal, through the escaping every tool answer gets: secrets the
        server knows of and secret shapes (a password in the dashboard URL) masked, control characters
        (terminal escape sequences) made visible, line breaks escaped."""
        text = f"{self.status:<4} {self.name:<9} {self.message}"
        return single_line(clean_text(f"{text} Fix: {self.fix}" if self.fix else text))


@dataclass
class Probe:
    """What the checks learn as they go (the dashboard URL, the head node, the GCS address)."""

    settings: Settings
    http: httpx.AsyncClient
    dashboard_url: str | None = None
    gcs_address: str | None = None
    head_node_id: str | None = None
    cluster_ray_version: str | None = None
    # a k8s:// address reached through the API server's service proxy: its credentials, and no GCS from here
    proxy_transport: httpx.AsyncBaseTransport | None = None

    async def get(self, path: str, **params: Any) -> httpx.Response:
        return await self.http.get(f"{self.dashboard_url}{path}", params=params or None)

    async def read(self, path: str, read: Callable[[Any], Any], **params: Any) -> tuple[Any, str]:
        """(``read`` of the JSON the dashboard answers at ``path``, ""), or (None, the name of the failure) when
        it could not be fetched or did not have the expected shape."""
        import httpx

        try:
            r = await self.get(path, **params)
            return read(r.json()), ""
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            return None, type(exc).__name__


async def check_address(p: Probe) -> Check:
    from ray_mcp.cluster import ClusterManager
    from ray_mcp.sources.gcs import GCS_LOOKUP

    s = p.settings
    configured = s.dashboard_url or s.address
    manager = ClusterManager(s.model_copy(update={"embedded": "never"}), gcs_lookup=GCS_LOOKUP)
    try:
        resolved = await manager.resolved()
    except Exception as exc:
        if not configured and s.embedded != "never":
            return Check(
                "address",
                "warn",
                "no address configured and no cluster on 127.0.0.1:8265: ray-mcp would start an embedded one "
                "(the checks below need a running cluster).",
                f"pass --address ({ADDRESS_FORMS}) to check one.",
            )
        return Check("address", "FAIL", str(exc).split(" Check that")[0].rstrip(".") + ".", _ADDRESS_FIX)
    finally:
        await manager.aclose()
    p.dashboard_url, p.gcs_address = resolved.dashboard_url.rstrip("/"), resolved.gcs_address
    if (
        resolved.kube is not None
    ):  # its credentials outlive the manager: the transport holds the configuration
        p.proxy_transport = resolved.kube.proxy_transport()
    given = f" (from {configured})" if configured and configured.rstrip("/") != p.dashboard_url else ""
    return Check("address", "ok", f"dashboard {p.dashboard_url}{given}, {resolved.source} cluster.")


_ADDRESS_FIX = (
    f"start the cluster or correct --address / RAY_ADDRESS ({ADDRESS_FORMS}); pass --dashboard-url if the "
    "dashboard is elsewhere."
)


async def check_dashboard(p: Probe) -> Check:
    import httpx

    try:
        r = await p.get("/api/version")
    except httpx.HTTPError as exc:
        return Check(
            "dashboard",
            "FAIL",
            f"{p.dashboard_url} does not answer: {type(exc).__name__}: {exc}.",
            _ADDRESS_FIX,
        )
    if r.status_code in (401, 403):
        return Check(
            "dashboard",
            "FAIL",
            f"{p.dashboard_url} refused ray-mcp ({r.status_code}): Ray's token authentication is on.",
            "give ray-mcp the cluster's token: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token.",
        )
    try:
        body = r.json()
        p.cluster_ray_version = str(body["ray_version"])
    except (ValueError, KeyError, TypeError):
        return Check(
            "dashboard",
            "FAIL",
            f"{p.dashboard_url}/api/version answered {r.status_code} without a Ray version: not a Ray dashboard.",
            _ADDRESS_FIX,
        )
    return Check("dashboard", "ok", f"{p.dashboard_url} answers (Ray {p.cluster_ray_version}).")


async def check_version(p: Probe) -> Check:
    try:
        local = version("ray")
    except PackageNotFoundError:  # pragma: no cover - ray is a dependency
        local = "not installed"
    cluster = p.cluster_ray_version
    if cluster == TESTED_RAY_VERSION and local == TESTED_RAY_VERSION:
        return Check(
            "ray",
            "ok",
            f"the cluster and ray-mcp both run Ray {cluster}, the version ray-mcp was tested with.",
        )
    mismatch = []
    if cluster != TESTED_RAY_VERSION:
        mismatch.append(f"the cluster runs Ray {cluster}")
    if local != TESTED_RAY_VERSION:
        mismatch.append(f"ray-mcp's environment has Ray {local}")
    return Check(
        "ray",
        "warn",
        f"{' and '.join(mismatch)}; ray-mcp was tested with {TESTED_RAY_VERSION} (most tools still work, "
        "job submission and Serve configs are the most version-sensitive).",
        f"run the cluster on Ray {TESTED_RAY_VERSION}, or install the ray-mcp release made for Ray {cluster}.",
    )


async def check_auth(p: Probe) -> Check:
    import httpx

    token = p.settings.resolved_ray_auth_token()
    try:
        r = await p.get("/api/authentication_mode")
        mode = r.json().get("authentication_mode") if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        mode = None
    if mode is None:
        return Check("auth", "skip", "the dashboard does not report its authentication mode (Ray < 2.52?).")
    if mode == "token":
        # The dashboard answered /api/version above, so the token ray-mcp sends is accepted.
        source = "RAY_AUTH_TOKEN" if p.settings.ray_auth_token else "a token file"
        return Check(
            "auth", "ok", f"Ray token authentication is on and ray-mcp's token ({source}) is accepted."
        )
    note = " ray-mcp holds a Ray token it does not need." if token else ""
    return Check(
        "auth",
        "ok",
        f"Ray token authentication is {mode}: anyone who reaches {p.dashboard_url} can run code on the cluster; "
        f"keep the dashboard on a private network (see docs/security.md).{note}",
    )


async def check_profiling(p: Probe) -> Check:
    import httpx

    try:
        r = await p.get("/api/profiling_enabled")
        enabled = r.json()["data"]["profilingEnabled"] if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        enabled = None
    if enabled is None:
        return Check("profiling", "skip", "the dashboard does not say whether profiling is on.")
    if enabled:
        return Check("profiling", "ok", "on: stack traces of workers on any node (/worker/traceback).")
    return Check(
        "profiling",
        "warn",
        "off: stack traces (/worker/traceback) are refused, so ray-mcp can dump only workers on its own machine.",
        "set RAY_DASHBOARD_ENABLE_PROFILING=1 in the environment of `ray start --head` and restart the head.",
    )


async def check_gcs_through_dashboard(p: Probe) -> Check:
    """The GCS as the dashboard sees it: the node table (every State API call needs it)."""
    nodes, failed = await p.read("/api/v0/nodes", lambda body: body["data"]["result"]["result"], limit=1000)
    if failed:
        return Check(
            "gcs",
            "FAIL",
            f"the dashboard cannot list nodes ({failed}): its GCS connection is down.",
            "check the head node: `ray status` there, and gcs_server.out in its log dir.",
        )
    alive = [n for n in nodes if n.get("state") == "ALIVE"]
    head = next((n for n in alive if n.get("is_head_node")), None)
    p.head_node_id = head.get("node_id") if head else None
    if not alive:
        return Check(
            "gcs", "FAIL", "the GCS lists no ALIVE node.", "restart the head node (`ray start --head`)."
        )
    return await check_gcs_direct(p, f"the GCS lists {len(alive)} ALIVE node(s)")


async def check_gcs_direct(p: Probe, seen: str) -> Check:
    """kill_actor and the placement group table talk to the GCS directly: can ray-mcp reach it?"""
    from ray_mcp.cluster import in_daemon_thread
    from ray_mcp.sources.gcs import find_gcs_for_dashboard

    assert p.dashboard_url is not None
    if p.proxy_transport is not None:
        return Check(
            "gcs",
            "warn",
            f"{seen}, but the GCS (gRPC) is out of reach through the Kubernetes API server's service proxy (HTTP "
            "only): kill_actor fails and the GCS-only facts (placement group strategies, actor owners) say unknown.",
            "run ray-mcp in a pod of the cluster for them (docs/kubernetes.md).",
        )
    address = p.gcs_address
    try:
        if address is None:
            address = await asyncio.wait_for(
                in_daemon_thread(find_gcs_for_dashboard, p.dashboard_url, GCS_TIMEOUT_S), GCS_TIMEOUT_S * 3
            )
    except Exception:  # Ray raises a variety of RPC errors
        address = None
    if address is None:
        return Check(
            "gcs",
            "warn",
            f"{seen}, but ray-mcp cannot reach the GCS directly: kill_actor and the fast placement group "
            "listing need it.",
            "pass the GCS address (--address host:6379) and open its port to ray-mcp.",
        )
    return Check("gcs", "ok", f"{seen}; ray-mcp reaches the GCS at {address} directly.")


async def check_serve(p: Probe) -> Check:
    import httpx

    try:
        r = await p.get("/api/serve/applications/")
    except httpx.TimeoutException as exc:  # Serve is there but slow: its controller starts, or an app deploys
        return Check(
            "serve",
            "warn",
            f"the Serve API did not answer within {p.settings.request_timeout_s:g} s ({type(exc).__name__}): "
            "Serve's controller may be starting or busy deploying.",
            "run the doctor again in a minute, or raise --request-timeout-s (serve_status waits as long).",
        )
    except httpx.HTTPError as exc:
        return Check(
            "serve",
            "warn",
            f"the Serve API did not answer ({type(exc).__name__}).",
            "check the dashboard (the dashboard check above).",
        )
    if r.status_code == 404:
        return Check("serve", "warn", "the dashboard has no Serve API (404).", _SERVE_FIX)
    if r.status_code != 200:
        return Check(
            "serve",
            "warn",
            f"the Serve API answered {r.status_code}: {quoted(r.text[:200])}.",
            "serve_status shows what Serve reports; dashboard.log on the head says more.",
        )
    try:
        apps = r.json().get("applications") or {}
    except (ValueError, AttributeError):
        return Check("serve", "warn", "the Serve API answered something that is not JSON.", _SERVE_FIX)
    if not apps:
        return Check("serve", "ok", "the Serve API answers; no application is deployed.")
    unhealthy = [name for name, a in apps.items() if a.get("status") not in ("RUNNING", "DEPLOYING")]
    names = ", ".join(quoted(name) for name in sorted(unhealthy)[:DOCTOR_APPS_NAMED])
    more = f" and {len(unhealthy) - DOCTOR_APPS_NAMED} more" if len(unhealthy) > DOCTOR_APPS_NAMED else ""
    detail = f"; not running: {names}{more} (serve_status explains)" if unhealthy else ""
    return Check("serve", "ok", f"the Serve API answers; {len(apps)} application(s){detail}.")


_SERVE_FIX = "install ray[serve] on the head node (serve_status and serve_deploy need it)."


async def check_logs(p: Probe) -> Check:
    if p.head_node_id is None:
        return Check("logs", "skip", "no ALIVE head node to list logs on.")
    count, failed = await p.read("/api/v0/logs", _log_files, node_id=p.head_node_id)
    if failed:
        return Check(
            "logs",
            "FAIL",
            f"the head node's logs cannot be listed ({failed}).",
            "check the head's dashboard agent (dashboard_agent.log in its log dir); tail_logs needs it.",
        )
    if not count:
        return Check("logs", "FAIL", "the head node lists no log files.", "check the head's Ray log dir.")
    return Check("logs", "ok", f"the head node lists {count} log file(s); tail_logs can read them.")


def _log_files(body: Any) -> int:
    result = body["data"]["result"]
    return sum(len(v) for v in result.values()) if isinstance(result, dict) else 0


def check_upload_roots(p: Probe) -> Check:
    """Where submit_job may upload local working_dir / py_modules from (--upload-root)."""
    settings = p.settings
    roots = settings.effective_upload_roots()
    where = (
        "set by --upload-root"
        if settings.upload_roots is not None
        else f"the default over {settings.transport}"
    )
    if not roots:
        return Check(
            "uploads",
            "ok",
            f"no upload root ({where}): submit_job refuses local working_dir and py_modules; remote URIs "
            "(s3://, gs://, https://) still work.",
            "",
        )
    missing = [str(r) for r in roots if not r.is_dir()]
    if missing:
        return Check(
            "uploads",
            "FAIL",
            f"upload root(s) that are not directories: {', '.join(missing)}.",
            "pass existing directories to --upload-root (or RAY_MCP_UPLOAD_ROOTS).",
        )
    return Check("uploads", "ok", f"local uploads allowed under {', '.join(map(str, roots))} ({where}).")


async def check_history(settings: Settings, transport: httpx.AsyncBaseTransport | None) -> Check:
    """A history+ address: the History Server enters the session and answers its job list."""
    from ray_mcp.errors import RayMCPError
    from ray_mcp.sources.dashboard import Dashboard
    from ray_mcp.sources.history import HistoryTransport, parse_history_address
    from ray_mcp.sources.jobs import JobsAPI

    ref = parse_history_address(str(settings.address))
    history = HistoryTransport(ref, transport)
    client = Dashboard(
        ref.url,
        timeout_s=settings.request_timeout_s,
        transport=history,
        headers=settings.dashboard_request_headers(),
    )
    try:
        jobs = (await JobsAPI(client).job_list()).jobs
    except RayMCPError as exc:
        return Check("history", "FAIL", str(exc).split(". ")[0] + ".", "correct the history+ address.")
    finally:
        await client.aclose()
    return Check(
        "history", "ok", f"{history.notice().removeprefix('HISTORY: ')} It keeps {len(jobs)} job(s)."
    )


# In order: each may use what the previous ones learned (the head node, the dashboard's Ray version).
CLUSTER_CHECKS: list[tuple[str, Callable[[Probe], Awaitable[Check]]]] = [
    ("dashboard", check_dashboard),
    ("ray", check_version),
    ("auth", check_auth),
    ("profiling", check_profiling),
    ("gcs", check_gcs_through_dashboard),
    ("serve", check_serve),
    ("logs", check_logs),
]


async def run_checks(
    settings: Settings, *, http_transport: httpx.AsyncBaseTransport | None = None
) -> list[Check]:
    import httpx

    verify: Any = (
        str(settings.dashboard_ca_file) if settings.dashboard_ca_file else settings.dashboard_verify_tls
    )

    def client(transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=settings.request_timeout_s,
            headers=settings.dashboard_request_headers(),
            verify=verify,
            transport=transport,
        )

    async with contextlib.AsyncExitStack() as stack:
        probe = Probe(settings, await stack.enter_async_context(client(http_transport)))
        checks = [await check_address(probe)]
        if probe.proxy_transport is not None and http_transport is None:
            probe.http = await stack.enter_async_context(client(probe.proxy_transport))
        reason = "no cluster to check" if probe.dashboard_url is None else ""
        form = form_of(settings.address)
        if not reason and form is not None and form.record:
            checks.append(await check_history(settings, http_transport))
            reason = (
                "a terminated cluster's record (history+ address): the live cluster's checks do not apply"
            )
        for name, check in CLUSTER_CHECKS:
            if reason:
                checks.append(Check(name, "skip", f"{reason}."))
                continue
            checks.append(await check(probe))
            if checks[-1].name == "dashboard" and checks[-1].status == "FAIL":
                reason = "the dashboard does not answer"
        checks.append(check_upload_roots(probe))
    return checks


async def doctor(settings: Settings, out: TextIO = sys.stdout) -> int:
    """Run every check, print one line each, and return the exit status (0: nothing failed)."""
    remember_settings_secrets(
        settings
    )  # Ray's token, our token and the dashboard headers: masked in every line
    checks = await run_checks(settings)
    for check in checks:
        print(check.line(), file=out, flush=True)
    failed = [c.name for c in checks if c.status == "FAIL"]
    print(
        f"ray-mcp doctor: {len(failed)} check(s) failed: {', '.join(failed)}."
        if failed
        else "ray-mcp doctor: no check failed.",
        file=out,
    )
    return 1 if failed else 0
