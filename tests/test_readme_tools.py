"""The README's tool table names every tool the server can offer, in every mode, and no tool it cannot."""

from __future__ import annotations

import itertools
import re

from mcp import Client
from tests.npm_tools import REPO

from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings

# Each switch that changes what tools/list offers; every combination is built.
SWITCHES = ("read_only", "allow_destructive", "kubernetes_tools", "metrics_tools", "profiling_tools")


def readme_tools() -> set[str]:
    """The tool names in the first column of the README's `| tool | ... |` table."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text[text.index("| tool | what it answers or does |") :].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    return {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}


async def offered_tools() -> set[str]:
    """Every tool listed in any mode, and every tool a mode keeps back (it names the flag that offers it)."""
    names: set[str] = set()
    for values in itertools.product((False, True), repeat=len(SWITCHES)):
        settings = Settings(address="http://127.0.0.1:9", **dict(zip(SWITCHES, values, strict=True)))
        server = build_server(settings)
        try:
            async with Client(server) as client:
                names |= {tool.name for tool in (await client.list_tools()).tools}
            names |= set(server.hidden_tools)
        finally:
            await server.app.aclose()
    return names


async def test_the_readme_table_names_every_tool_the_server_can_offer() -> None:
    offered, documented = await offered_tools(), readme_tools()
    # every mode was built: a Kubernetes tool, a destructive one and a write one are among them
    assert {"kuberay_status", "delete_ray_job", "submit_job"} <= offered
    assert not offered - documented, f"tools missing from the README's table: {sorted(offered - documented)}"
    assert not documented - offered, f"README names tools the server has not: {sorted(documented - offered)}"
