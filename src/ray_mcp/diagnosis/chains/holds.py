"""What a pending request waits for on the nodes: infeasible (nothing can ever fit it) or contention (who holds
the resource now), for a resource shape and for a placement group's bundles."""

from __future__ import annotations

from ray_mcp.diagnosis.chains.links import Link
from ray_mcp.diagnosis.graph import Entity, Graph, Row, amount, amounts, bundle_index, count_by, num
from ray_mcp.limits import HOLDER_NODE_ID_CHARS, HOLDERS_QUOTED, NAMES_SHOWN
from ray_mcp.text import short_id


def resource_wait(
    g: Graph, who: str, need: dict[str, float], self_key: str = "", *, only: set[str] | None = None
) -> list[Link]:
    """Infeasible (no alive node can ever fit it) or contention (it fits, but the resource is held now).
    ``only``: the nodes its other constraints allow (a label selector), when not all."""
    need = {k: num(v) for k, v in need.items() if num(v) > 0}
    totals = {n: t for n, t in g.node_totals().items() if only is None or n in only}
    if not need or not totals:
        return []
    fits = [nid for nid, tot in totals.items() if all(tot.get(k, 0.0) + 1e-9 >= v for k, v in need.items())]
    shape = amounts(need)
    if not fits:
        lacking = [k for k, v in need.items() if max((t.get(k, 0.0) for t in totals.values()), default=0) < v]
        most = ", ".join(
            f"{k} {amount(k, max((t.get(k, 0.0) for t in totals.values()), default=0))}" for k in lacking
        )
        return [
            Link(
                "waits_on",
                f"{who} needs {{{shape}}}, which no alive node can ever fit (infeasible: the largest has {most})",
                f"{len(totals)} alive node(s)",
            )
        ]
    # Contention: on every node that could fit it, something holds what it needs. A task blocked in ray.get on
    # its children has lent its CPU back to the node (Ray does so for CPU only): it holds no CPU while it waits.
    blocked = blocked_callers(g)
    short_of = set()
    held_on: dict[str, dict[str, float]] = {}
    for nid in fits:
        held = held_on[nid] = g.held_on(nid)
        held["CPU"] = held.get("CPU", 0.0) - lent_cpu(g, blocked, nid)
        for k, v in need.items():
            if totals[nid].get(k, 0.0) - held.get(k, 0.0) + 1e-9 < v:
                short_of.add(k)
    if not short_of:
        return [free_now(g, who, shape, len(fits), self_key, blocked)]
    links = []
    for resource in sorted(short_of, key=lambda r: (r != "GPU", r)):
        holders = [
            h
            for h in g.holders_of(resource)
            if h[2] in fits and h[0].key != self_key and not (resource == "CPU" and h[0].id in blocked)
        ]
        if not holders:
            continue
        total = sum(totals[n].get(resource, 0.0) for n in fits)
        groups = count_by(
            [
                f"{holder_name(g, ent)} of {g.job_label(ent.job_id)}{job_ended(g, ent.job_id)}"
                for ent, _, _ in holders
            ]
        )
        who_holds = "; ".join(f"{c} {n}" if c > 1 else n for n, c in groups[:NAMES_SHOWN])
        held_total = sum(a for _, a, _ in holders)
        quote = "; ".join(
            f"{ent.label} holds {amount(resource, a)} {resource} on node {short_id(nid, HOLDER_NODE_ID_CHARS)}"
            for ent, a, nid in holders[:HOLDERS_QUOTED]
        )
        # Nested tasks: the holders are the waiter's own callers, blocked in ray.get on it (starvation).
        waiter = g.entities.get(self_key)
        parent = str((waiter.row if waiter else {}).get("parent_task_id") or "")
        callers = [
            ent
            for ent, _, _ in holders
            if ent.kind == "task" and ent.row.get("name") == (g.attempts.get(parent) or [{}])[-1].get("name")
        ]
        starve = (
            f"; these are its own callers (tasks {callers[0].row.get('name')}), blocked in ray.get on it: nested "
            "tasks starve"
            if callers
            else ""
        )
        quote += (
            f" | Ray lends back the CPU of a task blocked in ray.get, not its {resource}" if callers else ""
        )
        first = first_to_release(g, resource, holders, need, totals, held_on)
        links.append(
            Link(
                "holds",
                f"{who} waits for {resource} ({shape}): {amount(resource, held_total)} of {amount(resource, total)} {resource} on the nodes "
                f"that fit it are held by {who_holds}{starve}{first}",
                quote,
            )
        )
    return links or [
        Link("waits_on", f"{who} needs {{{shape}}}; it fits, but {', '.join(sorted(short_of))} is in use now")
    ]


def first_to_release(
    g: Graph,
    resource: str,
    holders: list[tuple[Entity, float, str]],
    need: dict[str, float],
    totals: dict[str, dict[str, float]],
    held_on: dict[str, dict[str, float]],
) -> str:
    """ "; releasing <holder> first would let it start": of the holders whose release alone would let the
    waiting request fit on their node, the one an operator can let go most cheaply (a holder of an ended job,
    then a placement group's reservation, which holds its bundles whether or not they are used, then the
    largest)."""

    def fits_without(held: float, nid: str) -> bool:
        free = {k: totals[nid].get(k, 0.0) - held_on[nid].get(k, 0.0) for k in need}
        free[resource] += held
        return all(free[k] + 1e-9 >= v for k, v in need.items())

    alone = [(ent, held, nid) for ent, held, nid in holders if fits_without(held, nid)]
    if not alone:
        return ""
    ent, _held, nid = min(alone, key=lambda h: (not job_ended(g, h[0].job_id), h[0].kind != "pg", -h[1]))
    groups = {(holder_name(g, h[0]), h[0].job_id) for h in holders}
    if len(groups) == 1 and not job_ended(g, ent.job_id) and ent.kind != "pg":
        return ""  # interchangeable holders of one live job: no one to release first
    why = (", of a job that ended" if job_ended(g, ent.job_id) else "") + (
        ", reserved whether or not its bundles are used" if ent.kind == "pg" else ""
    )
    return (
        f"; releasing {ent.label}{why} first would let it start on node {short_id(nid, HOLDER_NODE_ID_CHARS)}"
    )


def blocked_callers(g: Graph) -> set[str]:
    """RUNNING tasks with open children: blocked in ray.get on them (as far as the records tell)."""
    open_parents = {
        str(rows[-1].get("parent_task_id") or "")
        for rows in g.attempts.values()
        if rows[-1].get("state") not in ("FINISHED", "FAILED")
    }
    return {
        tid
        for tid in open_parents
        if (g.running.get(tid) or (g.attempts.get(tid) or [{}])[-1]).get("state") == "RUNNING"
    }


def lent_cpu(g: Graph, blocked: set[str], node_id: str) -> float:
    return sum(
        num((t.get("required_resources") or {}).get("CPU"))
        for tid in blocked
        if (t := g.running.get(tid) or (g.attempts.get(tid) or [{}])[-1]).get("node_id") == node_id
        and not t.get("actor_id")
    )


def free_now(g: Graph, who: str, shape: str, fits: int, self_key: str, blocked: set[str]) -> Link:
    """It fits and nothing listed holds what it needs: say so, and when its callers are blocked on it, that this
    is not a deadlock (a blocked task's CPU is lent back)."""
    waiter = g.entities.get(self_key)
    parent = str((waiter.row if waiter else {}).get("parent_task_id") or "")
    if parent in blocked:
        callers = [
            tid
            for tid in blocked
            if (g.attempts.get(tid) or [{}])[-1].get("name")
            == (g.attempts.get(parent) or [{}])[-1].get("name")
        ]
        name = (g.attempts.get(parent) or [{}])[-1].get("name") or "?"
        return Link(
            "waits_on",
            f"{who} needs {{{shape}}}, which fits: its callers ({len(callers)} task(s) {name}) wait "
            "in ray.get on their children and have lent their CPU back, so this is not a deadlock; the CPU is "
            "free now (worker processes starting, or scheduling in progress)",
        )
    return Link(
        "waits_on",
        f"{who} needs {{{shape}}}, which fits on {fits} node(s) and looks free now "
        "(scheduling in progress, or held by work not listed)",
    )


def job_ended(g: Graph, job_id: str | None) -> str:
    """ ", which ended (SUCCEEDED)" for a holder whose job is over (a detached actor outlives it)."""
    status = (g.jobs.get(str(job_id)) or {}).get("status")
    return f", which ended ({status})" if status in ("SUCCEEDED", "FAILED", "STOPPED") else ""


def holder_name(g: Graph, ent: object) -> str:
    """A holder by what an operator knows it as: a Serve app's replicas, a detached actor (which outlives the job
    that created it: its job may have ended long ago), an actor class, a group, a task."""
    row = getattr(ent, "row", {})
    kind = getattr(ent, "kind", "")
    cls = str(row.get("class_name") or "")
    if kind == "actor" and cls.startswith("ServeReplica:") and cls.count(":") >= 2:
        _, app, dep = cls.split(":", 2)
        return f"replica(s) of Serve app '{app}' (deployment {dep})"
    if kind == "actor" and row.get("is_detached"):
        return f"detached {cls} actor(s)"
    if kind == "actor":
        return f"{cls} actor(s)"
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
        wanted = amounts(need)
        return [
            Link("waits_on", f"{label} needs {{{wanted}}} in all, more than the cluster has (infeasible)")
        ]
    return resource_wait(g, label, need, f"pg:{pg.get('placement_group_id')}")
