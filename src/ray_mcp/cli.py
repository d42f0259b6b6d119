"""Parse flags and env into Settings, then run the chosen transport. Nothing else."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskStatus

from ray_mcp.settings import Settings

if TYPE_CHECKING:
    from ray_mcp.server import RayMCPServer


def parse_settings(argv: list[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="ray-mcp",
        description="MCP server for operating and debugging Ray clusters. Flags override RAY_MCP_* env vars.",
    )
    parser.add_argument(
        "--address",
        help="Ray address: http://host:8265, ray://host:10001 or GCS host:6379 "
        "(env RAY_MCP_ADDRESS or RAY_ADDRESS). Unset: local cluster, else an embedded one.",
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
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], help="Default stdio.")
    parser.add_argument("--host", help="Bind address for HTTP transports (default 127.0.0.1).")
    parser.add_argument("--port", type=int, help="Port for HTTP transports (default 8000).")
    parser.add_argument(
        "--request-timeout-s", type=float, help="Timeout of each dashboard request (default 10)."
    )
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--stack-source",
        choices=["auto", "dashboard", "py-spy"],
        help="Where stack_traces and cpu_profile read stacks (default auto: the dashboard, else local py-spy).",
    )
    parser.add_argument(
        "--clusters-file", help="TOML file naming several clusters; tools then take `cluster`."
    )
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
    args = parser.parse_args(argv)
    given: dict[str, Any] = {k: v for k, v in vars(args).items() if v is not None}
    return Settings(**given)


async def _watch_signals(
    scope: anyio.CancelScope,
    stop_now: Callable[[], Awaitable[None]] | None = None,
    *,
    task_status: TaskStatus[None],
) -> None:
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
    from ray_mcp.security import is_loopback

    if (
        settings.transport != "stdio"
        and not is_loopback(settings.host)
        and not settings.resolved_auth_token()
    ):
        raise StartupRefused(
            f"ray-mcp: refusing to listen on {settings.host}: a non-loopback address needs a bearer token. "
            "Set RAY_MCP_AUTH_TOKEN (or --auth-token-file), or bind 127.0.0.1."
        )


async def serve_http(server: RayMCPServer, settings: Settings) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from ray_mcp.security import HttpGuard

    # Host and Origin are checked by HttpGuard for every bind address, so the SDK's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if settings.transport == "sse":
        asgi: Any = server.sse_app(transport_security=security, host=settings.host)
        path = "/sse"
    else:
        asgi = server.streamable_http_app(transport_security=security, host=settings.host)
        path = "/mcp"
    token = settings.resolved_auth_token()
    guarded = HttpGuard(asgi, token=token, bind_host=settings.host, allowed_origins=settings.allowed_origins)
    kind = "SSE" if settings.transport == "sse" else "streamable HTTP"
    logging.getLogger("ray_mcp").info(
        "ray-mcp: serving MCP over %s at http://%s:%d%s (%s)",
        kind,
        settings.host,
        settings.port,
        path,
        "bearer token required" if token else "no token: loopback clients only",
    )
    config = uvicorn.Config(
        guarded, host=settings.host, port=settings.port, log_level=settings.log_level.lower()
    )
    await uvicorn.Server(config).serve()


async def serve(settings: Settings) -> None:
    from ray_mcp.server import build_server  # keep `--help` fast

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
            async with anyio.create_task_group() as tg:
                await tg.start(_watch_signals, tg.cancel_scope, stop_stdio_now)
                await server.run_stdio_async()
                tg.cancel_scope.cancel()
        else:
            # uvicorn shuts down gracefully on SIGINT and SIGTERM, then raises the signal again with the handler
            # it found on entry. Ignoring both here makes that a no-op, so that serve_http returns and the
            # embedded cluster is stopped below, with no traceback and exit status 0.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            await serve_http(server, settings)
    finally:
        # Finish shutting the embedded cluster down even if the client follows up with SIGTERM.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with anyio.CancelScope(shield=True):
            await server.app.aclose()


def check_audit_log(settings: Settings) -> None:
    """Refuse to start (one line, exit 2) when --audit-log cannot be written: no audit, no server."""
    from ray_mcp.security import AuditLogUnwritable, Auditor

    try:
        Auditor(settings.audit_log).check()
    except AuditLogUnwritable as exc:
        print(f"ray-mcp: refusing to start: {exc}.", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    check_bind(settings)
    check_audit_log(settings)
    try:
        settings.cluster_settings()
    except ValueError as exc:
        raise StartupRefused(f"ray-mcp: {exc}") from None
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per dashboard request is noise
    anyio.run(serve, settings)


if __name__ == "__main__":  # pragma: no cover
    main()
