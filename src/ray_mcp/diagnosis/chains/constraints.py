"""Every constraint pending work carries, checked against the live nodes before its wait is put down to
contention: its label selector, then its resources on the nodes that selector allows, then (when those look
free) the runtime_env its worker must set up first."""

from __future__ import annotations

import json
import re

from ray_mcp.diagnosis.chains.holds import resource_wait
from ray_mcp.diagnosis.chains.links import Link
from ray_mcp.diagnosis.chains.setup import INSTALLING, runtime_env_fields
from ray_mcp.diagnosis.graph import Graph, Row, num
from ray_mcp.limits import NAMES_SHOWN
from ray_mcp.text import quoted

_IN = re.compile(r"^(?P<neg>!)?in\((?P<values>[^)]*)\)$")


def label_matches(wanted: str, have: str | None) -> bool:
    """One label selector value against a node's label: "v", "!v", "in(a,b)", "!in(a,b)" (Ray's forms)."""
    m = _IN.match(wanted)
    if m:
        inside = have is not None and have in [v.strip() for v in m["values"].split(",")]
        return not inside if m["neg"] else inside
    if wanted.startswith("!"):
        return have != wanted[1:]
    return have == wanted


def selected_nodes(g: Graph, selector: dict[str, str]) -> set[str]:
    """The alive nodes whose labels satisfy every entry of ``selector``."""
    return {
        nid
        for nid, node in g.nodes.items()
        if node.get("state") == "ALIVE"
        and all(label_matches(str(v), (node.get("labels") or {}).get(k)) for k, v in selector.items())
    }


def runtime_env_of(row: Row) -> dict[str, object]:
    """The runtime_env a task or actor row carries (tasks: runtime_env_info; actors: serialized_runtime_env)."""
    raw = (row.get("runtime_env_info") or {}).get("serialized_runtime_env") or row.get(
        "serialized_runtime_env"
    )
    try:
        env = json.loads(raw) if isinstance(raw, str) and raw else raw or {}
    except ValueError:
        return {}
    return env if isinstance(env, dict) else {}


def constrained_wait(g: Graph, who: str, row: Row, self_key: str) -> list[Link]:
    """Why pending work waits, with each constraint it carries checked on the live nodes in turn."""
    selector = {str(k): str(v) for k, v in (row.get("label_selector") or {}).items()}
    need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
    only = None
    if selector:
        only = selected_nodes(g, selector)
        wanted = ", ".join(f"{k}={v}" for k, v in selector.items())
        if not only:
            seen = sorted(
                {
                    f"{k}={v}"
                    for n in g.nodes.values()
                    if n.get("state") == "ALIVE"
                    for k, v in (n.get("labels") or {}).items()
                    if k in selector
                }
            )
            return [
                Link(
                    "waits_on",
                    f"{who} has label_selector {quoted(wanted)}, which no alive node matches "
                    f"(infeasible: the nodes have {', '.join(seen[:NAMES_SHOWN]) or 'none of these labels'})",
                )
            ]
    links = resource_wait(g, who, need, self_key, only=only)
    if selector and links:
        links.insert(
            0,
            Link(
                "waits_on",
                f"{who} may run only on the {len(only or ())} alive node(s) that match "
                f"its label_selector {quoted(wanted)}",
            ),
        )
    env = runtime_env_of(row)
    if links and "looks free" in links[-1].text and any(env.get(k) for k in INSTALLING):
        links[-1] = Link(
            "waits_on",
            f"{who} needs resources that look free now: its worker is most likely still setting "
            f"up its runtime_env ({runtime_env_fields(env)}); the raylet's runtime_env_setup log says how far",
            links[-1].text,
        )
    return links
