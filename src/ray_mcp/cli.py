"""Parse flags and env into Settings, then run the chosen transport. Nothing else.

The server (with the SDK and Ray) is imported only to serve: ``--help``, a bad flag, a non-loopback host
without a token, an unwritable audit log and a port in use answer with one line (exit status 2) before it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import anyio
    from anyio.abc import TaskStatus
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from ray_mcp.settings import Settings


class BadUsage(SystemExit):
    """A flag or environment value that cannot be used: one line on stderr, exit status 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadUsage(f"ray-mcp: {message} (see ray-mcp --help)")


# Where each setting comes from, for messages about a bad value.
FLAG_OF = {
    "embedded_num_cpus": "--num-cpus",
    "allowed_origins": "--allowed-origin",
    "upload_roots": "--upload-root",
    "trusted_proxies": "--trusted-proxy",
}
ENV_OF = {"embedded_num_cpus": "RAY_MCP_EMBEDDED_NUM_CPUS"}


def describe_invalid(exc: ValidationError | SettingsError) -> str:
    """One line for pydantic's multi-line report: which flag or variable, the value given, what is allowed."""
    from pydantic_settings import SettingsError

    if isinstance(exc, SettingsError):
        return f"ray-mcp: {exc} (check the RAY_MCP_* environment variables)"
    parts = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "?"
        flag = FLAG_OF.get(field, "--" + field.replace("_", "-"))
        env = ENV_OF.get(field, "RAY_MCP_" + field.upper())
        message = str(error["msg"]).replace("Input should be", "must be")
        parts.append(f"{flag} (or {env}) = {error.get('input')!r}: {message}")
    return "ray-mcp: invalid setting: " + "; ".join(parts) + " (see ray-mcp --help)"


def wants_doctor(argv: list[str]) -> bool:
    return (bool(argv) and argv[0] == "doctor") or "--check" in argv


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="ray-mcp",
        usage="ray-mcp [doctor] [options]",
        description="MCP server for operating and debugging Ray clusters. Flags override RAY_MCP_* env vars. "
        "`ray-mcp doctor` (or --check) checks the setup instead: address, dashboard, Ray version, token auth, "
        "profiling, GCS, Serve, logs.",
    )
    _cluster_arguments(parser)
    _transport_arguments(parser)
    parser.add_argument(
        "--prometheus",
        help="URL of the Prometheus that scrapes this cluster, for get_metrics' history (env RAY_MCP_PROMETHEUS "
        "or Ray's RAY_PROMETHEUS_HOST; headers: RAY_PROMETHEUS_HEADERS).",
    )
    parser.add_argument(
        "--memory-usage-threshold",
        type=float,
        help="The memory fraction at which the cluster's memory monitor kills workers (Ray's "
        "RAY_memory_usage_threshold; default 0.95): a leak's time left is counted to it.",
    )
    parser.add_argument(
        "--metrics-tools",
        action="store_true",
        default=None,
        help="List get_metrics even with no Prometheus configured (it asks the dashboard, else reads nodes now).",
    )
    parser.add_argument(
        "--toolsets",
        help="Toolsets tools/list offers, separated by commas: core, jobs, tasks, serve, train, profiling, "
        "kubernetes, metrics; `default` (the set that fits the cluster) and `all` (env RAY_MCP_TOOLSETS). "
        "Default: core and jobs, plus serve, train, kubernetes and metrics where the cluster uses them.",
    )
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--stack-source",
        choices=["auto", "dashboard", "py-spy"],
        help="Where stack_traces and cpu_profile read stacks (default auto: the dashboard, else local py-spy).",
    )
    _kubernetes_arguments(parser)
    parser.add_argument(
        "--clusters-file", help="TOML file naming several clusters; tools then take `cluster`."
    )
    _safety_arguments(parser)
    _http_limit_arguments(parser)
    parser.add_argument(
        "--check",
        action="store_true",
        help="Check the setup (same as `ray-mcp doctor`): one line per check, exit status 1 if one failed.",
    )
    return parser


def _cluster_arguments(parser: OneLineParser) -> None:
    """Which cluster: its address, its dashboard, the embedded one."""
    from ray_mcp.settings import ADDRESS_FORMS

    parser.add_argument(
        "--address",
        help=f"Ray address: {ADDRESS_FORMS} (env RAY_MCP_ADDRESS or RAY_ADDRESS). Unset: local cluster, else an "
        "embedded one.",
    )
    parser.add_argument("--dashboard-url", help="Dashboard URL, if not on port 8265 of the address host.")
    parser.add_argument(
        "--embedded",
        choices=["auto", "always", "never"],
        help="When to start an embedded local cluster (default auto).",
    )
    parser.add_argument(
        "--num-cpus", type=int, dest="embedded_num_cpus", help="CPUs of the embedded cluster."
    )


def _transport_arguments(parser: OneLineParser) -> None:
    """How clients reach ray-mcp, and how long a dashboard request may take."""
    from ray_mcp.settings import DEFAULT_PORT

    parser.add_argument(
        "--transport",
        choices=["stdio", "sse", "streamable-http"],
        help="Default stdio. Over a network: streamable-http. sse is deprecated (MCP 2026-07-28), kept for old clients.",
    )
    parser.add_argument("--host", help="Bind address for HTTP transports (default 127.0.0.1).")
    parser.add_argument("--port", type=int, help=f"Port for HTTP transports (default {DEFAULT_PORT}).")
    parser.add_argument(
        "--request-timeout-s", type=float, help="Timeout of each dashboard request (default 10)."
    )


def _kubernetes_arguments(parser: OneLineParser) -> None:
    kube = parser.add_argument_group("kubernetes (k8s:// addresses, ray-mcp[kubernetes])")
    kube.add_argument("--kubeconfig", help="Kubeconfig file (default KUBECONFIG, ~/.kube/config).")
    kube.add_argument("--kube-context", help="Kubeconfig context (default: its current context).")
    kube.add_argument("--namespace", help="Namespace of a k8s:// address that names none.")
    kube.add_argument(
        "--kubernetes-tools", action="store_true", default=None, help="List the Kubernetes tools anyway."
    )


def _safety_arguments(parser: OneLineParser) -> None:
    safety = parser.add_argument_group("safety")
    safety.add_argument(
        "--read-only",
        action="store_true",
        default=None,
        help="Offer only read-only tools (no submit, stop, deploy, kill).",
    )
    safety.add_argument(
        "--allow-destructive",
        action="store_true",
        default=None,
        help="Offer destructive tools (delete_job, kill_actor, serve_delete_app).",
    )
    safety.add_argument(
        "--auth-token-file",
        help="File with the bearer token HTTP clients must send "
        "(or set RAY_MCP_AUTH_TOKEN). Required to bind a non-loopback address.",
    )
    safety.add_argument(
        "--allowed-origin",
        action="append",
        dest="allowed_origins",
        help="An extra Origin the HTTP transports accept (repeatable).",
    )
    safety.add_argument(
        "--audit-log", help="Append the audit trail of write calls to this file (default stderr)."
    )
    safety.add_argument(
        "--upload-root",
        action="append",
        dest="upload_roots",
        help="A directory local runtime_env paths (working_dir, py_modules, requirements files) may come from "
        "(repeatable; env RAY_MCP_UPLOAD_ROOTS). Default: the starting directory on stdio, none over HTTP.",
    )


def _http_limit_arguments(parser: OneLineParser) -> None:
    from ray_mcp.settings import (
        DEFAULT_HTTP_HEADER_TIMEOUT_S,
        DEFAULT_HTTP_MAX_CONNECTIONS,
        DEFAULT_HTTP_MAX_SESSIONS,
    )

    limits = parser.add_argument_group("HTTP limits")
    limits.add_argument(
        "--http-header-timeout-s",
        type=float,
        help=f"Close a connection whose request headers take longer (default {DEFAULT_HTTP_HEADER_TIMEOUT_S:g}).",
    )
    limits.add_argument(
        "--http-max-connections",
        type=int,
        help=f"Open connections above this get 503 (default {DEFAULT_HTTP_MAX_CONNECTIONS}).",
    )
    limits.add_argument(
        "--replica-key-file",
        help="Key file shared by replicas behind a load balancer (2026 clients then reach any replica).",
    )
    limits.add_argument(
        "--max-sessions",
        type=int,
        help=f"Streamable HTTP sessions open at once (default {DEFAULT_HTTP_MAX_SESSIONS}).",
    )
    limits.add_argument(
        "--trusted-proxy",
        action="append",
        dest="trusted_proxies",
        help="A reverse proxy (address or CIDR) whose X-Forwarded-For names the client (repeatable; default none).",
    )


def parse_settings(argv: list[str] | None = None) -> Settings:
    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from ray_mcp.settings import Settings

    parser = _parser()
    args = parser.parse_args(argv)
    given: dict[str, Any] = {k: v for k, v in vars(args).items() if v is not None and k != "check"}
    given.pop("check", None)
    try:
        settings = Settings(**given)
    except (ValidationError, SettingsError) as exc:
        raise BadUsage(describe_invalid(exc)) from None
    try:
        settings.replica_key()  # a key that cannot be read or is too short: one line now, not at the first call
    except (OSError, ValueError) as exc:
        raise BadUsage(f"ray-mcp: --replica-key-file: {exc}") from None
    if settings.transport == "stdio" and ({"host", "port"} & given.keys()):
        flags = " and ".join(f"--{k}" for k in ("host", "port") if k in given)
        print(
            f"ray-mcp: warning: {flags} only apply to --transport streamable-http or sse; ignored over stdio.",
            file=sys.stderr,
        )
    return settings


async def _watch_signals(
    scope: anyio.CancelScope,
    stop_now: Callable[[], Awaitable[None]] | None = None,
    *,
    task_status: TaskStatus[None],
) -> None:
    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            logging.getLogger("ray_mcp").info(
                "ray-mcp: received %s, shutting down", signal.Signals(signum).name
            )
            if stop_now is not None:
                await stop_now()
            scope.cancel()
            return


class StartupRefused(SystemExit):
    pass


def check_bind(settings: Settings) -> None:
    """Refuse to expose the server beyond this machine without a token: the dashboard is code execution."""
    from ray_mcp.settings import is_loopback

    if (
        settings.transport != "stdio"
        and not is_loopback(settings.host)
        and not settings.resolved_auth_token()
    ):
        raise StartupRefused(
            f"ray-mcp: refusing to listen on {settings.host}: a non-loopback address needs a bearer token. "
            "Set RAY_MCP_AUTH_TOKEN (or --auth-token-file), or bind 127.0.0.1."
        )


class PortInUse(SystemExit):
    """The HTTP port is taken: one line on stderr, exit status 2 (main)."""


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port, or PortInUse naming the port and how to pick another."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise PortInUse(f"ray-mcp: cannot listen on {host}:{port}: {exc.strerror}. Check --host.") from None
    family, _, _, _, address = infos[0]
    # IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on accepted sockets whose proto
    # says TCP; with 0, every response written in two parts (headers, then the event) waited for the client's
    # delayed ACK, 40 ms a call.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(
                f"ray-mcp: port {port} on {host} is already in use (by another server, or a Ray Serve proxy); "
                "pick a free one with --port N (make run PORT=N)."
            ) from None
        raise PortInUse(f"ray-mcp: cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    sock.set_inheritable(False)
    return sock


async def serve(settings: Settings, sock: socket.socket | None = None) -> None:
    import anyio

    from ray_mcp.server.build import build_server  # keep `--help` fast
    from ray_mcp.server.transport import serve_http, serve_stdio

    server = build_server(settings)

    async def stop_stdio_now() -> None:
        """On stdio, stdin is read by a worker thread that no cancellation interrupts: a signal would wait for
        the client's next line. So shut the embedded cluster down here, then leave at once."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with anyio.CancelScope(shield=True):
            await server.app.aclose()
        logging.getLogger("ray_mcp").info("ray-mcp: stopped")
        logging.shutdown()
        os._exit(0)

    try:
        if settings.transport == "stdio":
            try:
                async with anyio.create_task_group() as tg:
                    await tg.start(_watch_signals, tg.cancel_scope, stop_stdio_now)
                    await serve_stdio(server)
                    tg.cancel_scope.cancel()
            except* (BrokenPipeError, ConnectionResetError):  # the client went away mid-answer: not our bug
                logging.getLogger("ray_mcp").info("ray-mcp: the client closed stdout mid-answer; stopping")
        else:
            # uvicorn shuts down gracefully on SIGINT and SIGTERM, then raises the signal again with the handler
            # it found on entry. Ignoring both here makes that a no-op, so that serve_http returns and the
            # embedded cluster is stopped below, with no traceback and exit status 0.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            assert sock is not None
            await serve_http(server, settings, sock)
    finally:
        # Finish shutting the embedded cluster down even if the client follows up with SIGTERM.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with anyio.CancelScope(shield=True):
            await server.app.aclose()


def check_audit_log(settings: Settings) -> None:
    """Refuse to start (one line, exit 2) when --audit-log cannot be written: no audit, no server."""
    from ray_mcp.guard.audit import AuditLogUnwritable, Auditor

    try:
        Auditor(settings.audit_log).check()
    except AuditLogUnwritable as exc:
        print(f"ray-mcp: refusing to start: {exc}.", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> None:
    import anyio

    args = list(sys.argv[1:] if argv is None else argv)
    doctor = wants_doctor(args)
    if args and args[0] == "doctor":
        args = args[1:]
    try:
        settings = parse_settings(args)
    except BadUsage as exc:
        print(exc.message, file=sys.stderr)
        raise
    if doctor:
        run_doctor(settings)
    try:
        check_bind(settings)
        check_audit_log(settings)
        try:
            settings.cluster_settings()
        except ValueError as exc:
            raise StartupRefused(f"ray-mcp: {exc}") from None
        # Bind the HTTP port first: a port in use is one line now, not an error after an embedded cluster started.
        sock = None
        if settings.transport != "stdio":
            sock = bind_listener(settings.host, settings.port)
    except SystemExit as exc:  # a setting that cannot be used: one line, the exit status of every bad setting
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per dashboard request is noise
    anyio.run(serve, settings, sock)
    # Everything of ours is closed (the embedded cluster included). Tearing down the interpreter's modules
    # (Ray, pydantic, the SDK) takes seconds on a busy machine: a client that closed stdin waits for none of it.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def run_doctor(settings: Settings) -> NoReturn:
    import anyio

    from ray_mcp.doctor import doctor

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    raise SystemExit(anyio.run(doctor, settings))


if __name__ == "__main__":  # pragma: no cover
    main()
