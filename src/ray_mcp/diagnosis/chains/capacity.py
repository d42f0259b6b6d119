"""What the cluster status says of the nodes' capacity: demands that wait (forever, or for resources in use)
and memory under pressure. Read from ``GraphInputs.status`` (cluster_status as JSON)."""

from __future__ import annotations

from collections.abc import Sequence

from ray_mcp import models
from ray_mcp.diagnosis.chains.links import CONTEXT, PROBLEM, STUCK, WARNING, Chain, Link
from ray_mcp.diagnosis.graph import Graph, Row, amounts, num
from ray_mcp.limits import (
    AUTOSCALER_DECISIONS,
    DEMANDS_QUOTED,
    INFEASIBLE_DEMANDS_QUOTED,
    STORE_HOLDERS_QUOTED,
)
from ray_mcp.shaping.events import AUTOSCALER_FAILED, AUTOSCALER_INFEASIBLE, autoscaler_decisions
from ray_mcp.shaping.objects import STORE_NEAR_FULL, store_pressure
from ray_mcp.text import quoted

MEMORY_PRESSURE = 0.8  # a node's memory or object store this full is named
MEMORY_CRITICAL = 0.95  # and this full ranks as a cause
RECENT_LAUNCH_MS = 3600_000  # a failed launch this recent is a problem; older, a warning


def demand_chains(g: Graph, chains: Sequence[Chain]) -> list[Chain]:
    """Demands the autoscaler reports, when no chain over the pending work itself names them already."""
    demands = (g.ev.status or {}).get("pending_demands") or []
    kinds = {c.kind for c in chains}
    out = []
    infeasible = [d for d in demands if d.get("infeasible")]
    waiting = [d for d in demands if not d.get("infeasible")]
    if infeasible and "infeasible" not in kinds:
        shapes = "; ".join(_shape(d) for d in infeasible[:INFEASIBLE_DEMANDS_QUOTED])
        out.append(
            Chain(
                STUCK - 5,
                "infeasible",
                "",
                [
                    Link(
                        "waits_on",
                        f"{len(infeasible)} resource demand(s) fit on no node and wait forever",
                        shapes,
                    )
                ],
                ["pg_status state=PENDING", "cluster_status"],
                subjects={"demands:infeasible"},
            )
        )
    if waiting and not kinds & {"contention", "waiting"}:
        shapes = "; ".join(_shape(d) for d in waiting[:DEMANDS_QUOTED])
        out.append(
            Chain(
                PROBLEM,
                "pending_demand",
                "",
                [Link("waits_on", f"{len(waiting)} resource demand(s) wait for resources in use", shapes)],
                ["cluster_status"],
                subjects={"demands:waiting"},
            )
        )
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
            out.append(
                Chain(
                    CONTEXT + 20 if share >= MEMORY_CRITICAL else PROBLEM,
                    "memory",
                    "",
                    [
                        Link(
                            "holds",
                            f"{name} on {g.node_label(node.get('node_id'))} is {100 * share:.0f}% used "
                            f"({used / 1024**3:.2f} of {total / 1024**3:.2f} GiB)",
                        )
                    ],
                    [f"list_actors node_id={node.get('node_id')} to see who holds it"],
                    subjects={f"memory:{node.get('node_id')}:{name}"},
                )
            )
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
    holders = [
        f"{quoted(h.owner)} holds {h.bytes / 1024**3:.2f} GiB in {h.objects} ref(s) from {quoted(h.call_site)}"
        + (f" (leak: {quoted(h.leak)})" if h.leak else "")
        for h in store.groups[:STORE_HOLDERS_QUOTED]
    ]
    return [
        Chain(
            PROBLEM + 5 if full else CONTEXT + 10,
            "object_store",
            "",
            [
                Link(
                    "holds",
                    "the object store is "
                    + ("near full" if full else "spilling")
                    + ": "
                    + "; ".join(pressure),
                    "; ".join(holders),
                )
            ],
            ["summarize_objects"],
            subjects={"object_store"},
        )
    ]


def autoscaler_chains(g: Graph, chains: Sequence[Chain]) -> list[Chain]:
    """What the autoscaler could not do, from its events (cluster_status' decisions, the same read) and its
    report's failed nodes: a launch that failed ranks as a problem while recent; "no node type can fulfill" is
    told with the infeasible demands it explains (it stays in the events after they are gone)."""
    decisions = autoscaler_decisions(g.ev.events or [], AUTOSCALER_DECISIONS)
    failed_nodes = ((g.ev.status or {}).get("autoscaler") or {}).get("failed_nodes") or []
    out = []
    failed = [d for d in decisions if AUTOSCALER_FAILED.search(d)]
    if failed or failed_nodes:
        newest = max(
            (
                num(e.get("timestamp"))
                for e in g.ev.events or []
                if e.get("source_type") == "AUTOSCALER"
                and AUTOSCALER_FAILED.search(str(e.get("message") or ""))
            ),
            default=0.0,
        )
        recent = bool(failed_nodes) or not g.ev.now_ms or g.ev.now_ms - newest * 1000 < RECENT_LAUNCH_MS
        what = failed[0].split(": ", 1)[-1] if failed else f"{len(failed_nodes)} node(s) it lists as failed"
        out.append(
            Chain(
                PROBLEM + 15 if recent else WARNING,
                "autoscaler_failed",
                "",
                [
                    Link(
                        "ended_by",
                        f"the autoscaler failed to launch nodes{'' if recent else ' (over an hour ago)'}: {quoted(what)}",
                        "; ".join(
                            [*failed[1:INFEASIBLE_DEMANDS_QUOTED], *failed_nodes[:INFEASIBLE_DEMANDS_QUOTED]]
                        ),
                    )
                ],
                ["cluster_status (autoscaler decisions)", "list_events source=AUTOSCALER"],
                subjects={"autoscaler:failed"},
            )
        )
    infeasible = [d for d in decisions if AUTOSCALER_INFEASIBLE.search(d)]
    told = next((c for c in chains if c.kind == "infeasible"), None)
    if infeasible and told is not None:  # evidence, not a link: the shape that fits no node stays the cause
        told.details.append(
            "the autoscaler has no node type that can hold it: "
            + "; ".join(quoted(d) for d in infeasible[:INFEASIBLE_DEMANDS_QUOTED])
        )
        told.next_steps.append("list_events source=AUTOSCALER")
    return out
