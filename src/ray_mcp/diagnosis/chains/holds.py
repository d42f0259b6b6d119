"""What a pending request waits for on the nodes: infeasible (nothing can ever fit it) or contention (who holds
the resource now), for a resource shape and for a placement group's bundles."""

from __future__ import annotations

from ray_mcp.diagnosis.chains.links import Link
from ray_mcp.diagnosis.graph import (
    Graph,
    Row,
    bundle_index,
    count_by,
    num,
)


def resource_wait(g: Graph, who: str, need: dict[str, float], self_key: str = "") -> list[Link]:
    """Infeasible (no alive node can ever fit it) or contention (it fits, but the resource is held now)."""
    need = {k: num(v) for k, v in need.items() if num(v) > 0}
    totals = g.node_totals()
    if not need or not totals:
        return []
    fits = [nid for nid, tot in totals.items() if all(tot.get(k, 0.0) + 1e-9 >= v for k, v in need.items())]
    shape = ", ".join(f"{k} {v:g}" for k, v in need.items())
    if not fits:
        lacking = [k for k, v in need.items() if max((t.get(k, 0.0) for t in totals.values()), default=0) < v]
        most = ", ".join(f"{k} {max((t.get(k, 0.0) for t in totals.values()), default=0):g}" for k in lacking)
        return [Link("waits_on", f"{who} needs {{{shape}}}, which no alive node can ever fit (infeasible: the largest has {most})",
                     f"{len(totals)} alive node(s)")]  # fmt: skip
    # Contention: on every node that could fit it, something holds what it needs.
    short_of = set()
    for nid in fits:
        held = g.held_on(nid)
        for k, v in need.items():
            if totals[nid].get(k, 0.0) - held.get(k, 0.0) + 1e-9 < v:
                short_of.add(k)
    if not short_of:
        return [Link("waits_on", f"{who} needs {{{shape}}}, which fits on {len(fits)} node(s) and looks free now "
                     "(scheduling in progress, or held by work not listed)")]  # fmt: skip
    links = []
    for resource in sorted(short_of, key=lambda r: (r != "GPU", r)):
        holders = [h for h in g.holders_of(resource) if h[2] in fits and h[0].key != self_key]
        if not holders:
            continue
        total = sum(totals[n].get(resource, 0.0) for n in fits)
        groups = count_by([f"{holder_name(g, ent)} of {g.job_label(ent.job_id)}" for ent, _, _ in holders])
        who_holds = "; ".join(f"{c} {n}" if c > 1 else n for n, c in groups[:3])
        held_total = sum(a for _, a, _ in holders)
        quote = "; ".join(
            f"{ent.label} holds {a:g} {resource} on node {nid[:8]}" for ent, a, nid in holders[:4]
        )
        # Nested tasks: the holders are the waiter's own callers, blocked in ray.get on it (starvation).
        waiter = g.entities.get(self_key)
        parent = str((waiter.row if waiter else {}).get("parent_task_id") or "")
        callers = [
            ent
            for ent, _, _ in holders
            if ent.kind == "task" and ent.row.get("name") == (g.attempts.get(parent) or [{}])[-1].get("name")
        ]
        starve = (f"; these are its own callers (tasks {callers[0].row.get('name')}), blocked in ray.get on it: nested "
                  "tasks starve" if callers else "")  # fmt: skip
        links.append(Link("holds", f"{who} waits for {resource} ({shape}): {held_total:g} of {total:g} {resource} on the nodes "
                          f"that fit it are held by {who_holds}{starve}", quote))  # fmt: skip
    return links or [
        Link("waits_on", f"{who} needs {{{shape}}}; it fits, but {', '.join(sorted(short_of))} is in use now")
    ]


def holder_name(g: Graph, ent: object) -> str:
    row = getattr(ent, "row", {})
    kind = getattr(ent, "kind", "")
    if kind == "actor":
        return f"{row.get('class_name')} actor(s)"
    if kind == "pg":
        return g.pg_label(row)
    return f"task(s) {row.get('name') or row.get('func_or_class_name')}"


def pg_wait(g: Graph, pg: Row) -> list[Link]:
    label = g.pg_label(pg)
    bundles = pg.get("bundles") or []
    strategy = pg.get("strategy") or "PACK"
    totals = g.node_totals()
    need: dict[str, float] = {}
    for b in bundles:
        for k, v in (b.get("unit_resources") or {}).items():
            need[k] = need.get(k, 0.0) + num(v)
    # A STRICT_PACK group must fit on one node: its whole shape is one request.
    if strategy == "STRICT_PACK" or len(bundles) == 1:
        return resource_wait(
            g, f"{label} ({strategy}, {len(bundles)} bundle(s))", need, f"pg:{pg.get('placement_group_id')}"
        )
    for b in bundles:
        shape = {k: num(v) for k, v in (b.get("unit_resources") or {}).items()}
        links = resource_wait(
            g, f"bundle {bundle_index(b)} of {label}", shape, f"pg:{pg.get('placement_group_id')}"
        )
        if links and "infeasible" in links[-1].text:
            return links
    if strategy == "STRICT_SPREAD" and len(bundles) > len(totals):
        return [
            Link(
                "waits_on",
                f"{label} is STRICT_SPREAD over {len(bundles)} bundles but only {len(totals)} node(s) are alive (infeasible)",
            )
        ]
    pooled = {k: sum(t.get(k, 0.0) for t in totals.values()) for k in need}
    if any(pooled[k] + 1e-9 < v for k, v in need.items()):
        wanted = ", ".join(f"{k} {v:g}" for k, v in need.items())
        return [
            Link("waits_on", f"{label} needs {{{wanted}}} in all, more than the cluster has (infeasible)")
        ]
    return resource_wait(g, label, need, f"pg:{pg.get('placement_group_id')}")
