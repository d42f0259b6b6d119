"""Parse flags and env into Settings, then run the chosen transport. Nothing else."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from typing import Any

import anyio
from anyio.abc import TaskStatus

from ray_mcp.settings import Settings


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
    args = parser.parse_args(argv)
    given: dict[str, Any] = {k: v for k, v in vars(args).items() if v is not None}
    return Settings(**given)


async def _watch_signals(scope: anyio.CancelScope, *, task_status: TaskStatus[None]) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            logging.getLogger("ray_mcp").info(
                "ray-mcp: received %s, shutting down", signal.Signals(signum).name
            )
            scope.cancel()
            return


async def serve(settings: Settings) -> None:
    from ray_mcp.server import build_server

    server = build_server(settings)
    log = logging.getLogger("ray_mcp")
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(_watch_signals, tg.cancel_scope)
            if settings.transport == "stdio":
                await server.run_stdio_async()
            elif settings.transport == "sse":
                log.info("ray-mcp: serving MCP over SSE at http://%s:%d/sse", settings.host, settings.port)
                await server.run_sse_async(host=settings.host, port=settings.port)
            else:
                log.info(
                    "ray-mcp: serving MCP over streamable HTTP at http://%s:%d/mcp",
                    settings.host,
                    settings.port,
                )
                await server.run_streamable_http_async(host=settings.host, port=settings.port)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await server.app.aclose()


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    anyio.run(serve, settings)


if __name__ == "__main__":  # pragma: no cover
    main()
