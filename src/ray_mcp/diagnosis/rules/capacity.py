"""Capacity: the demands the autoscaler reports (that wait forever, or for resources in use) when no chain over
the pending work names them already, and what the autoscaler could not do (a failed launch; a shape no node type
can hold, told with the infeasible finding it explains). Read from ``GraphInputs.status`` (cluster_status as
JSON) and the AUTOSCALER cluster events."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import PROBLEM, STUCK, WARNING, Chain, Edge, Kind, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, amounts, num
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import AUTOSCALER_DECISIONS, DEMANDS_QUOTED, INFEASIBLE_DEMANDS_QUOTED
from ray_mcp.shaping.events import AUTOSCALER_FAILED, AUTOSCALER_INFEASIBLE, autoscaler_decisions
from ray_mcp.text import quoted

PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"
CLUSTER_DOC = "ray-docs://reference/10-ray-cluster"
RECENT_LAUNCH_MS = 3600_000  # a failed launch this recent is a problem; older, a warning

DEMANDS_INFEASIBLE = Say(
    "demands_infeasible", Edge.WAITS_ON, said("{count} resource demand(s) fit on no node and wait forever")
)
DEMANDS_WAITING = Say(
    "demands_waiting", Edge.WAITS_ON, said("{count} resource demand(s) wait for resources in use")
)
LAUNCH_FAILED = Say(
    "launch_failed",
    Edge.ENDED_BY,
    lambda f: (
        f"the autoscaler failed to launch nodes{'' if f['recent'] else ' (over an hour ago)'}: {quoted(f['what'])}"
    ),
)
NO_NODE_TYPE = Say(
    "no_node_type",
    Edge.WAITS_ON,
    lambda f: (
        "the autoscaler has no node type that can hold it: " + "; ".join(quoted(d) for d in f["decisions"])
    ),
)


def _shape(d: Row) -> str:
    bundles = d.get("bundles") or []
    shapes = ", ".join("{" + amounts(b) + "}" for b in bundles if isinstance(b, dict))
    return f"{d.get('kind')} {d.get('strategy') or ''} {shapes} x{d.get('count')}".replace("  ", " ")


@rule(
    On.CLUSTER,
    Kind.INFEASIBLE,
    order=110,
    severity=STUCK - 5,
    next_steps=("pg_status state=PENDING", "cluster_status"),
    reads=("status",),
)
def infeasible_demands(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Demands the autoscaler reports as fitting on no node, when no chain over the pending work names them."""
    demands = [d for d in (g.ev.status or {}).get("pending_demands") or [] if d.get("infeasible")]
    if not demands or any(c.kind is Kind.INFEASIBLE for c in chains):
        return []
    shapes = "; ".join(_shape(d) for d in demands[:INFEASIBLE_DEMANDS_QUOTED])
    link = DEMANDS_INFEASIBLE("", shapes, count=len(demands))
    steps = list(infeasible_demands.next_steps)
    return [Chain(STUCK - 5, Kind.INFEASIBLE, None, [link], steps, subjects={"demands:infeasible"})]


@rule(
    On.CLUSTER,
    Kind.PENDING_DEMAND,
    order=111,
    severity=PROBLEM,
    refs=(PG_DOC,),
    next_steps=("cluster_status",),
    reads=("status",),
)
def waiting_demands(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Demands the autoscaler reports as waiting for resources in use, when no chain over the pending work names
    them."""
    demands = [d for d in (g.ev.status or {}).get("pending_demands") or [] if not d.get("infeasible")]
    if not demands or any(c.kind in (Kind.CONTENTION, Kind.WAITING) for c in chains):
        return []
    shapes = "; ".join(_shape(d) for d in demands[:DEMANDS_QUOTED])
    link = DEMANDS_WAITING("", shapes, count=len(demands))
    return [
        Chain(PROBLEM, Kind.PENDING_DEMAND, None, [link], ["cluster_status"], subjects={"demands:waiting"})
    ]


@rule(
    On.CLUSTER,
    Kind.AUTOSCALER_FAILED,
    order=120,
    severity=PROBLEM + 15,
    refs=(CLUSTER_DOC,),
    next_steps=("cluster_status (autoscaler decisions)", "list_events source=AUTOSCALER"),
    reads=("events", "status"),
)
def autoscaler_chains(g: Graph, chains: list[Chain]) -> list[Chain]:
    """What the autoscaler could not do, from its events (cluster_status' decisions, the same read) and its
    report's failed nodes: a launch that failed ranks as a problem for an hour, a warning after; "no node type can
    fulfill" is told with the infeasible finding it explains (it stays in the events after the demand is gone)."""
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
        quote = "; ".join([*failed[1:INFEASIBLE_DEMANDS_QUOTED], *failed_nodes[:INFEASIBLE_DEMANDS_QUOTED]])
        out.append(
            Chain(
                PROBLEM + 15 if recent else WARNING,
                Kind.AUTOSCALER_FAILED,
                None,
                [LAUNCH_FAILED("", quote, recent=recent, what=what)],
                list(autoscaler_chains.next_steps),
                subjects={"autoscaler:failed"},
            )
        )
    infeasible = [d for d in decisions if AUTOSCALER_INFEASIBLE.search(d)]
    told = next((c for c in chains if c.kind is Kind.INFEASIBLE), None)
    if infeasible and told is not None:  # evidence, not a link: the shape that fits no node stays the cause
        told.details.append(NO_NODE_TYPE(decisions=infeasible[:INFEASIBLE_DEMANDS_QUOTED]))
        told.next_steps.append("list_events source=AUTOSCALER")
    return out
