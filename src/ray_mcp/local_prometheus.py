"""A Prometheus beside a Ray head of this machine: the embedded cluster's, and the test session's.

Ray writes a ready Prometheus config into its session directory (``metrics/prometheus/prometheus.yml``, made by
the dashboard's metrics module a moment after the head starts) whose one scrape job reads the nodes' metrics
endpoints from a file Ray keeps current (``prom_metrics_service_discovery.json``). We run the ``prometheus``
binary found on PATH on that config, with a shorter scrape interval, on a free loopback port, its data in a
directory of the head's temp dir, and stop it by pid. Nothing is downloaded: no binary on PATH, no Prometheus
(the answers then say how to install one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from ray_mcp.child_env import tool_env
from ray_mcp.limits import EMBEDDED_SCRAPE_INTERVAL_S
from ray_mcp.local_head import free_ports, spawn_owned

log = logging.getLogger("ray_mcp.prometheus")

BINARY = "prometheus"
# Where Ray's dashboard writes its generated config, under the session directory (metrics_head.py).
RAY_CONFIG = Path("metrics") / "prometheus" / "prometheus.yml"
READY_PROBE_S = 0.25
STOP_GRACE_S = 3.0


def prometheus_binary() -> str | None:
    """The ``prometheus`` on PATH (Debian's package installs /usr/bin/prometheus), or None."""
    return shutil.which(BINARY)


@dataclass
class LocalPrometheus:
    """One Prometheus process scraping one Ray head's nodes, started by ``start`` and stopped by ``stop``."""

    session_dir: Path  # the head's session directory (or its session_latest link)
    work_dir: Path  # its config and its TSDB go here (the head's temp dir, so they go with it)
    scrape_interval_s: float = EMBEDDED_SCRAPE_INTERVAL_S
    binary: str | None = None
    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "prometheus.log"

    @property
    def ray_config(self) -> Path:
        return self.session_dir / RAY_CONFIG

    async def start(self, timeout_s: float) -> None:
        """Wait for Ray's generated config, start Prometheus on it, and wait until its API answers.

        Raises RuntimeError naming the cause when there is no binary, no config in time, or no answer in time
        (the caller decides what that means: the embedded cluster runs on without history)."""
        deadline = time.monotonic() + timeout_s
        while not self.ray_config.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"Ray wrote no Prometheus config at {self.ray_config} within {timeout_s:g} s"
                )
            await asyncio.sleep(READY_PROBE_S)
        self.launch()
        await self._wait_ready(deadline)

    def launch(self) -> None:
        """Write our config from Ray's (which must exist) and start the process, from this thread: the kernel
        kills it when the thread that started it ends (spawn_owned), so start it from one that lasts."""
        binary = self.binary or prometheus_binary()
        if binary is None:
            raise RuntimeError(f"no `{BINARY}` binary on PATH")
        config = self.work_dir / "prometheus.yml"
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config.write_text(yaml.safe_dump(scrape_config(self.ray_config.read_text(), self.scrape_interval_s)))
        self.port = free_ports(1)[0]
        self._spawn(binary, config)

    def _spawn(self, binary: str, config: Path) -> None:
        cmd = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.work_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--storage.tsdb.retention.time=2d",
            "--log.level=warn",
        ]
        with open(self.log_path, "ab") as out:
            self.process = spawn_owned(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,  # Debian's binary looks for consoles/ relative to it: none needed
                env=tool_env(),  # runs no user code: none of ray-mcp's settings or tokens (child_env.py)
            )

    async def _wait_ready(self, deadline: float) -> None:
        async with httpx.AsyncClient(timeout=READY_PROBE_S * 4) as http:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(
                        f"prometheus exited with code {self.process.returncode}: {self._tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{self.url}/-/ready")).status_code == 200:
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus did not answer on {self.url} in time: {self._tail()}")
                await asyncio.sleep(READY_PROBE_S)

    def _tail(self) -> str:
        with contextlib.suppress(OSError):
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
            return lines[-1][:300] if lines else "no output"
        return "no output"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after a grace period: exactly the process this object started."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)


def scrape_config(ray_config: str, interval_s: float) -> dict[str, object]:
    """Ray's generated config with our scrape interval (Ray's is 10 s: too coarse for a short-lived head)."""
    config = yaml.safe_load(ray_config) or {}
    interval = f"{interval_s:g}s"
    config["global"] = {
        **(config.get("global") or {}),
        "scrape_interval": interval,
        "evaluation_interval": interval,
        "scrape_timeout": interval,
    }
    return config
