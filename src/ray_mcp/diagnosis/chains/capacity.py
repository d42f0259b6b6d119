"""What the cluster status says of the nodes' capacity: demands that wait (forever, or for resources in use)
and memory under pressure. Read from ``GraphInputs.status`` (cluster_status as JSON)."""

from __future__ import annotations

from collections.abc import Sequence

from ray_mcp import models
from ray_mcp.diagnosis.chains.links import CONTEXT, PROBLEM, STUCK, Chain, Link
from ray_mcp.diagnosis.graph import Graph, Row, amounts
from ray_mcp.limits import DEMANDS_QUOTED, INFEASIBLE_DEMANDS_QUOTED, STORE_HOLDERS_QUOTED
from ray_mcp.shaping.objects import STORE_NEAR_FULL, store_pressure
from ray_mcp.text import quoted

MEMORY_PRESSURE = 0.8  # a node's memory or object store this full is named
MEMORY_CRITICAL = 0.95  # and this full ranks as a cause


def demand_chains(g: Graph, chains: Sequence[Chain]) -> list[Chain]:
    """Demands the autoscaler reports, when no chain over the pending work itself names them already."""
    demands = (g.ev.status or {}).get("pending_demands") or []
    kinds = {c.kind for c in chains}
    out = []
    infeasible = [d for d in demands if d.get("infeasible")]
    waiting = [d for d in demands if not d.get("infeasible")]
    if infeasible and "infeasible" not in kinds:
        shapes = "; ".join(_shape(d) for d in infeasible[:INFEASIBLE_DEMANDS_QUOTED])
        out.append(Chain(STUCK - 5, "infeasible", "", [Link("waits_on",
            f"{len(infeasible)} resource demand(s) fit on no node and wait forever", shapes)],
            ["pg_status state=PENDING", "cluster_status"], subjects={"demands:infeasible"}))  # fmt: skip
    if waiting and not kinds & {"contention", "waiting"}:
        shapes = "; ".join(_shape(d) for d in waiting[:DEMANDS_QUOTED])
        out.append(Chain(PROBLEM, "pending_demand", "", [Link("waits_on",
            f"{len(waiting)} resource demand(s) wait for resources in use", shapes)], ["cluster_status"],
            subjects={"demands:waiting"}))  # fmt: skip
    return out


def _shape(d: Row) -> str:
    bundles = d.get("bundles") or []
    shapes = ", ".join("{" + amounts(b) + "}" for b in bundles if isinstance(b, dict))
    return f"{d.get('kind')} {d.get('strategy') or ''} {shapes} x{d.get('count')}".replace("  ", " ")


def memory_chains(g: Graph) -> list[Chain]:
    """Each alive node whose memory or object store is at least MEMORY_PRESSURE full, in GiB."""
    out = []
    for node in (g.ev.status or {}).get("nodes") or []:
        if node.get("state") != "ALIVE":
            continue
        for name in ("object_store_memory", "memory"):
            use = (node.get("resources") or {}).get(name) or {}
            used, total = float(use.get("used") or 0), float(use.get("total") or 0)
            if not total or used / total < MEMORY_PRESSURE:
                continue
            share = used / total
            out.append(Chain(CONTEXT + 20 if share >= MEMORY_CRITICAL else PROBLEM, "memory", "",
                             [Link("holds", f"{name} on {g.node_label(node.get('node_id'))} is {100 * share:.0f}% used "
                                   f"({used / 1024**3:.2f} of {total / 1024**3:.2f} GiB)")],
                             [f"list_actors node_id={node.get('node_id')} to see who holds it"],
                             subjects={f"memory:{node.get('node_id')}:{name}"}))  # fmt: skip
    return out


def store_chains(g: Graph) -> list[Chain]:
    """A node's object store near full or spilling, with who holds the most (summarize_objects' read)."""
    if g.ev.store is None:
        return []
    store = models.ObjectStoreSummary.model_validate(g.ev.store)
    pressure = store_pressure(store.nodes)
    if not pressure:
        return []
    full = any(n.fraction is not None and n.fraction >= STORE_NEAR_FULL for n in store.nodes)
    holders = [f"{quoted(h.owner)} holds {h.bytes / 1024**3:.2f} GiB in {h.objects} ref(s) from {quoted(h.call_site)}"
               + (f" (leak: {quoted(h.leak)})" if h.leak else "") for h in store.groups[:STORE_HOLDERS_QUOTED]]  # fmt: skip
    return [Chain(PROBLEM + 5 if full else CONTEXT + 10, "object_store", "",
                  [Link("holds", "the object store is " + ("near full" if full else "spilling") + ": " + "; ".join(pressure),
                        "; ".join(holders))], ["summarize_objects"], subjects={"object_store"})]  # fmt: skip
