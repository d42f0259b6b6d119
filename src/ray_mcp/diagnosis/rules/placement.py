"""Why does this wait? The one answer for a pending task, actor, entrypoint or placement group, whichever tool
asks (diagnose_job, cluster_health, pg_status): every constraint it carries checked on the alive nodes (its label
selector, then its resources), then infeasible (nothing can ever fit it), held (and by whom, and whose release
lets it start), in use (by whom unknown), or free now (scheduling, a worker setting up its runtime_env)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from ray_mcp.diagnosis.facts import Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import (
    Entity,
    Graph,
    GraphInputs,
    Row,
    amount,
    amounts,
    bundle_index,
    count_by,
    num,
)
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import HOLDER_NODE_ID_CHARS, HOLDERS_QUOTED, NAMES_SHOWN
from ray_mcp.text import quoted, short_id

PG_DOC = "ray-docs://reference/15-scheduling-placement-groups"
PG_PROMPT = "prompt:debug-pending-placement-group"

INFEASIBLE = Say(
    "infeasible",
    Edge.WAITS_ON,
    said(
        "{subject} needs {{{shape}}}, which no alive node can ever fit (infeasible: the largest has {most})"
    ),
    infeasible=True,
)
NO_NODE = Say(
    "no_node",
    Edge.WAITS_ON,
    said("{subject} waits: no node is alive to hold it (infeasible)"),
    infeasible=True,
)
SPREAD_TOO_WIDE = Say(
    "spread_too_wide",
    Edge.WAITS_ON,
    said("{subject} is STRICT_SPREAD over {bundles} bundles but only {nodes} node(s) are alive (infeasible)"),
    infeasible=True,
)
MORE_THAN_CLUSTER = Say(
    "more_than_cluster",
    Edge.WAITS_ON,
    said("{subject} needs {{{shape}}} in all, more than the cluster has (infeasible)"),
    infeasible=True,
)
SPREAD_BUSY = Say(
    "spread_busy",
    Edge.WAITS_ON,
    said(
        "{subject} is STRICT_SPREAD over {bundles} bundles, each needing {{{shape}}} on a node of its own, and only "
        "{room} node(s) have that free now"
    ),
)
RAY_INFEASIBLE = Say(
    "ray_infeasible",
    Edge.WAITS_ON,
    said(
        "{subject} fits the nodes' resources, but Ray marks it INFEASIBLE: check its bundles' label selectors and "
        "the nodes' labels (list_nodes)"
    ),
    infeasible=True,
)
LABEL_UNMATCHED = Say(
    "label_unmatched",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject} has label_selector {quoted(f['selector'])}, which no alive node matches "
        f"(infeasible: the nodes have {', '.join(f['seen']) or 'none of these labels'})"
    ),
    infeasible=True,
)
LABEL_FALLBACK = Say(
    "label_fallback",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject} has label_selector {quoted(f['selector'])}, which no alive node matches, nor does its "
        f"fallback_strategy {quoted(f['fallback'])} (infeasible: the nodes have "
        f"{', '.join(f['seen']) or 'none of these labels'})"
    ),
    infeasible=True,
)
LABEL_FALLBACK_USED = Say(
    "label_fallback_used",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject}'s label_selector {quoted(f['selector'])} matches no alive node; its fallback_strategy "
        f"{quoted(f['fallback'])} allows {f['nodes']} node(s)"
    ),
)
LABEL_ONLY = Say(
    "label_only",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject} may run only on the {f['nodes']} alive node(s) that match its label_selector "
        f"{quoted(f['selector'])}"
    ),
)


def _held_words(f: Link) -> str:
    starve = (
        f"; these are its own callers (tasks {f['callers']}), blocked in ray.get on it: nested tasks starve"
        if f["callers"]
        else ""
    )
    first = f["first"]
    release = (
        f"; releasing {first['label']}"
        + (", of a job that ended" if first["ended"] else "")
        + (", reserved whether or not its bundles are used" if first["reserved"] else "")
        + f" first would let it start on node {first['node']}"
        if first
        else ""
    )
    r = f["resource"]
    return (
        f"{f.subject} waits for {r} ({f['shape']}): {amount(r, f['held'])} of {amount(r, f['total'])} {r} on the "
        f"nodes that fit it are held by {f['holders']}{starve}{release}"
    )


HELD = Say("held", Edge.HOLDS, _held_words)
IN_USE = Say(
    "in_use",
    Edge.WAITS_ON,
    lambda f: (
        f"{f.subject} needs {{{f['shape']}}}; it fits, but {', '.join(f['short'])} is in use now"
        + (f" (the most free on a node: {f['free']})" if f.get("free") else "")
    ),
)
FREE_NOW = Say(
    "free_now",
    Edge.WAITS_ON,
    said(
        "{subject} needs {{{shape}}}, which fits on {fits} node(s) and looks free now (scheduling in progress, or "
        "held by work not listed)"
    ),
    free=True,
)
CALLERS_LENT = Say(
    "callers_lent",
    Edge.WAITS_ON,
    said(
        "{subject} needs {{{shape}}}, which fits: its callers ({callers} task(s) {name}) wait in ray.get on their "
        "children and have lent their CPU back, so this is not a deadlock; the CPU is free now (worker processes "
        "starting, or scheduling in progress)"
    ),
    free=True,
)
ENV_SETTING_UP = Say(
    "env_setting_up",
    Edge.WAITS_ON,
    said(
        "{subject} needs resources that look free now: its worker is most likely still setting up its "
        "runtime_env ({fields}); the raylet's runtime_env_setup log says how far"
    ),
    free=True,
)
NEVER_PLACED = Say(
    "never_placed", Edge.ENDED_BY, said("{subject} never started ({reason}) because it was never placed")
)


# -- resources ----------------------------------------------------------------------------------------------


@rule(
    On.HELPER,
    Kind.INFEASIBLE,
    refs=(PG_DOC, PG_PROMPT),
    reads=("nodes", "alive_actors", "running_tasks", "pgs", "tasks", "jobs"),
    also=(Kind.CONTENTION,),
)
def resource_wait(
    g: Graph,
    who: str,
    need: Mapping[str, float],
    self_key: str = "",
    *,
    only: set[str] | None = None,
    free: Mapping[str, Mapping[str, float]] | None = None,
) -> list[Link]:
    """Infeasible (no alive node can ever fit it, with the largest node's amount) or, when it fits, who holds
    what it needs (whose release alone lets it start; nested tasks that starve their children), or that it looks
    free.

    ``only``: the nodes its other constraints allow (a label selector); ``free``: what each node has free when a
    report says so and no holder is known (pg_status)."""
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
        return [INFEASIBLE(who, f"{len(totals)} alive node(s)", need, shape=shape, most=most)]
    # Contention: on every node that could fit it, something holds what it needs. A task blocked in ray.get on
    # its children has lent its CPU back to the node (Ray does so for CPU only): it holds no CPU while it waits.
    blocked = blocked_callers(g)
    held_on: dict[str, dict[str, float]] = {}
    for nid in fits:
        held = held_on[nid] = g.held_on(nid)
        held["CPU"] = held.get("CPU", 0.0) - lent_cpu(g, blocked, nid)
        if free is not None:  # what a report says is free, where no holder is known
            held_on[nid] = {k: totals[nid].get(k, 0.0) - (free.get(nid) or {}).get(k, 0.0) for k in need}
    short_of = {
        k
        for nid in fits
        for k, v in need.items()
        if totals[nid].get(k, 0.0) - held_on[nid].get(k, 0.0) + 1e-9 < v
    }
    if not short_of:
        return [free_now(g, who, need, len(fits), self_key, blocked)]
    links = [
        link
        for resource in sorted(short_of, key=lambda r: (r != "GPU", r))
        if (link := held_link(g, who, need, resource, fits, totals, held_on, self_key, blocked)) is not None
    ]
    if links:
        return links
    most_free = (
        ", ".join(
            f"{k} {amount(k, max((free.get(n) or {}).get(k, 0.0) for n in fits))}" for k in sorted(short_of)
        )
        if free is not None
        else ""
    )
    return [IN_USE(who, "", need, shape=shape, short=sorted(short_of), free=most_free)]


def held_link(
    g: Graph,
    who: str,
    need: dict[str, float],
    resource: str,
    fits: list[str],
    totals: dict[str, dict[str, float]],
    held_on: dict[str, dict[str, float]],
    self_key: str,
    blocked: set[str],
) -> Link | None:
    """Who holds ``resource`` on the nodes that fit the request (named as an operator knows them), whose
    release alone would let it start, and whether they are its own callers (nested tasks starving)."""
    holders = [
        h
        for h in g.holders_of(resource)
        if h[2] in fits and h[0].key != self_key and not (resource == "CPU" and h[0].id in blocked)
    ]
    if not holders:
        return None
    groups = count_by(
        [
            f"{holder_name(g, ent)} of {g.job_label(ent.job_id)}{job_ended(g, ent.job_id)}"
            for ent, _, _ in holders
        ]
    )
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
    if callers:
        quote += f" | Ray lends back the CPU of a task blocked in ray.get, not its {resource}"
    return HELD(
        who,
        quote,
        need,
        resource=resource,
        shape=amounts(need),
        held=sum(a for _, a, _ in holders),
        total=sum(totals[n].get(resource, 0.0) for n in fits),
        holders="; ".join(f"{c} {n}" if c > 1 else n for n, c in groups[:NAMES_SHOWN]),
        callers=callers[0].row.get("name") if callers else "",
        first=first_to_release(g, resource, holders, need, totals, held_on),
    )


def first_to_release(
    g: Graph,
    resource: str,
    holders: list[tuple[Entity, float, str]],
    need: dict[str, float],
    totals: dict[str, dict[str, float]],
    held_on: dict[str, dict[str, float]],
) -> dict[str, object] | None:
    """Of the holders whose release alone would let the waiting request fit on their node, the one an operator
    can let go most cheaply: a holder of an ended job, then a placement group's reservation (held whether or
    not its bundles are used), then the largest. None when the holders are interchangeable (one live job's)."""

    def fits_without(held: float, nid: str) -> bool:
        free = {k: totals[nid].get(k, 0.0) - held_on[nid].get(k, 0.0) for k in need}
        free[resource] += held
        return all(free[k] + 1e-9 >= v for k, v in need.items())

    alone = [(ent, held, nid) for ent, held, nid in holders if fits_without(held, nid)]
    if not alone:
        return None
    ent, _held, nid = min(alone, key=lambda h: (not job_ended(g, h[0].job_id), h[0].kind != "pg", -h[1]))
    groups = {(holder_name(g, h[0]), h[0].job_id) for h in holders}
    if len(groups) == 1 and not job_ended(g, ent.job_id) and ent.kind != "pg":
        return None
    return {
        "label": ent.label,
        "ended": bool(job_ended(g, ent.job_id)),
        "reserved": ent.kind == "pg",
        "node": short_id(nid, HOLDER_NODE_ID_CHARS),
    }


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


def free_now(g: Graph, who: str, need: dict[str, float], fits: int, self_key: str, blocked: set[str]) -> Link:
    """It fits and nothing listed holds what it needs: say so, and when its callers are blocked on it, that this
    is not a deadlock (a blocked task's CPU is lent back)."""
    waiter = g.entities.get(self_key)
    parent = str((waiter.row if waiter else {}).get("parent_task_id") or "")
    if parent in blocked:
        name = (g.attempts.get(parent) or [{}])[-1].get("name")
        callers = [tid for tid in blocked if (g.attempts.get(tid) or [{}])[-1].get("name") == name]
        return CALLERS_LENT(who, "", need, shape=amounts(need), callers=len(callers), name=name or "?")
    return FREE_NOW(who, "", need, shape=amounts(need), fits=fits)


def job_ended(g: Graph, job_id: str | None) -> str:
    """ ", which ended (SUCCEEDED)" for a holder whose job is over (a detached actor outlives it)."""
    status = (g.jobs.get(str(job_id)) or {}).get("status")
    return f", which ended ({status})" if status in ("SUCCEEDED", "FAILED", "STOPPED") else ""


def holder_name(g: Graph, ent: Entity) -> str:
    """A holder by what an operator knows it as: a Serve app's replicas, a detached actor (which outlives the job
    that created it: its job may have ended long ago), an actor class, a group, a task."""
    row = ent.row
    cls = str(row.get("class_name") or "")
    if ent.kind == "actor" and cls.startswith("ServeReplica:") and cls.count(":") >= 2:
        _, app, dep = cls.split(":", 2)
        return f"replica(s) of Serve app '{app}' (deployment {dep})"
    if ent.kind == "actor" and row.get("is_detached"):
        return f"detached {cls} actor(s)"
    if ent.kind == "actor":
        return f"{cls} actor(s)"
    if ent.kind == "pg":
        return g.pg_label(row)
    return f"task(s) {row.get('name') or row.get('func_or_class_name')}"


# -- placement groups ---------------------------------------------------------------------------------------


@rule(On.HELPER, Kind.INFEASIBLE, refs=(PG_DOC, PG_PROMPT), reads=("pgs", "nodes"))
def pg_wait(g: Graph, pg: Row, *, free: Mapping[str, Mapping[str, float]] | None = None) -> list[Link]:
    """Why a placement group is PENDING: a bundle (or a STRICT_PACK group whole) no node can fit, a
    STRICT_SPREAD group wider than the alive nodes (or than those with room now), more than the cluster has in
    all, a group Ray calls INFEASIBLE though it fits (its label selectors), else who holds what a bundle needs,
    or that it looks free."""
    label = g.pg_label(pg)
    bundles = pg.get("bundles") or []
    strategy = pg.get("strategy") or "PACK"
    totals = g.node_totals()
    key = f"pg:{pg.get('placement_group_id')}"
    if not totals and g.ev.nodes is not None:
        return [NO_NODE(label)]
    shapes = [{k: num(v) for k, v in (b.get("unit_resources") or {}).items()} for b in bundles]
    need: dict[str, float] = {}
    for shape in shapes:
        for k, v in shape.items():
            need[k] = need.get(k, 0.0) + v
    if (
        strategy == "STRICT_PACK" or len(bundles) == 1
    ):  # a STRICT_PACK group must fit on one node: one request
        links = resource_wait(g, f"{label} ({strategy}, {len(bundles)} bundle(s))", need, key, free=free)
        return _ray_says(pg, links, label)
    each = []
    for b, shape in zip(bundles, shapes, strict=True):
        links = resource_wait(g, f"bundle {bundle_index(b)} of {label}", shape, key, free=free)
        if links and links[-1].say.infeasible:
            return links
        each.append(links)
    if strategy == "STRICT_SPREAD" and len(bundles) > len(totals):
        return [SPREAD_TOO_WIDE(label, bundles=len(bundles), nodes=len(totals))]
    pooled = {k: sum(t.get(k, 0.0) for t in totals.values()) for k in need}
    if any(pooled[k] + 1e-9 < v for k, v in need.items()):
        return [MORE_THAN_CLUSTER(label, "", need, shape=amounts(need))]
    if strategy == "STRICT_SPREAD":
        room = [
            n
            for n in totals
            if all(_free_on(g, n, free).get(k, 0.0) + 1e-9 >= v for k, v in shapes[0].items())
        ]
        if len(room) < len(bundles):
            return [
                SPREAD_BUSY(
                    label, "", shapes[0], bundles=len(bundles), shape=amounts(shapes[0]), room=len(room)
                )
            ]
    waiting = next((links for links in each if links and not links[-1].say.free), None)
    return waiting or _ray_says(pg, next((links for links in each if links), []), label)


def _free_on(g: Graph, node_id: str, free: Mapping[str, Mapping[str, float]] | None) -> dict[str, float]:
    """What a node has free: what a report says, else its total less what its known holders hold."""
    if free is not None:
        return dict(free.get(node_id) or {})
    total, held = g.node_totals().get(node_id, {}), g.held_on(node_id)
    return {k: v - held.get(k, 0.0) for k, v in total.items()}


def _ray_says(pg: Row, links: list[Link], label: str) -> list[Link]:
    """A group that fits and looks free but that Ray's scheduler calls INFEASIBLE: a constraint beyond its
    resources (its bundles' label selectors) no node meets."""
    if links and links[-1].say.free and (pg.get("stats") or {}).get("scheduling_state") == "INFEASIBLE":
        return [RAY_INFEASIBLE(label)]
    return links


def explain_pending_group(
    nodes: Sequence[Mapping[str, object]],
    group: Row,
    free: Mapping[str, Mapping[str, float]] | None = None,
) -> Link | None:
    """Why one PENDING group waits, for pg_status: the same engine and words as diagnose_job's and
    cluster_health's, over the State API's node rows and group row (with its strategy from the GCS), with what
    each node has free (``free``) standing in for the holders pg_status does not read."""
    links = pg_wait(
        Graph(GraphInputs(nodes=[dict(n) for n in nodes], pgs=[dict(group)])), dict(group), free=free
    )
    return links[-1] if links else None


# -- every constraint a pending task or actor carries ---------------------------------------------------------

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


def fallback_selectors(value: object) -> list[dict[str, str]]:
    """The label selectors of a fallback_strategy, in order: Ray's options (``[{"label_selector": {...}}]``, or
    ``{"options": [...]}`` as the State API may render it), each selector a plain dict or Ray's constraints
    (``label_constraints``: key, operator, values; ``!`` for NOT_IN, ``in(a,b)`` for several values)."""
    out: list[dict[str, str]] = []
    options = value.get("options", [value]) if isinstance(value, dict) else value
    for option in options if isinstance(options, list) else []:
        selector = option.get("label_selector") if isinstance(option, dict) else None
        if not isinstance(selector, dict):
            continue
        constraints = selector.get("label_constraints")
        if isinstance(constraints, list):
            plain = {}
            for c in constraints:
                values = [str(v) for v in c.get("label_values") or []] if isinstance(c, dict) else []
                if not isinstance(c, dict) or not values:
                    continue
                joined = values[0] if len(values) == 1 else f"in({','.join(values)})"
                negated = "NOT" in str(c.get("operator") or "")
                plain[str(c.get("label_key"))] = ("!" if negated else "") + joined
            out.append(plain)
        else:
            out.append({str(k): str(v) for k, v in selector.items()})
    return [s for s in out if s]


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


@rule(On.HELPER, Kind.WAITING, reads=("nodes", "tasks", "actors"))
def constrained_wait(g: Graph, who: str, row: Row, self_key: str) -> list[Link]:
    """Every constraint pending work carries, checked on the live nodes before its wait is put down to
    contention: its label selector (no alive node matches: infeasible), then its resources on the nodes that
    selector allows, then (when those look free) the runtime_env its worker must set up first."""
    from ray_mcp.diagnosis.rules.setup import INSTALLING, runtime_env_fields

    selector = {str(k): str(v) for k, v in (row.get("label_selector") or {}).items()}
    need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
    only = None
    wanted = ", ".join(f"{k}={v}" for k, v in selector.items())
    fell_back = None
    if selector:
        only = selected_nodes(g, selector)
        fallbacks = fallback_selectors(row.get("fallback_strategy"))
        fallback = "; ".join(", ".join(f"{k}={v}" for k, v in f.items()) for f in fallbacks)
        if not only and fallbacks:
            only = set().union(*(selected_nodes(g, f) for f in fallbacks))
            fell_back = LABEL_FALLBACK_USED(who, selector=wanted, fallback=fallback, nodes=len(only))
        if not only:
            keys = set(selector).union(*fallbacks)
            seen = sorted(
                {
                    f"{k}={v}"
                    for n in g.nodes.values()
                    if n.get("state") == "ALIVE"
                    for k, v in (n.get("labels") or {}).items()
                    if k in keys
                }
            )
            if fallbacks:
                return [LABEL_FALLBACK(who, selector=wanted, fallback=fallback, seen=seen[:NAMES_SHOWN])]
            return [LABEL_UNMATCHED(who, selector=wanted, seen=seen[:NAMES_SHOWN])]
    links = resource_wait(g, who, need, self_key, only=only)
    if selector and links:
        links.insert(0, fell_back or LABEL_ONLY(who, nodes=len(only or ()), selector=wanted))
    env = runtime_env_of(row)
    if links and links[-1].say is FREE_NOW and any(env.get(k) for k in INSTALLING):
        links[-1] = ENV_SETTING_UP(who, links[-1].text, fields=runtime_env_fields(env))
    return links


@rule(On.ACTOR_END, Kind.FAILED, order=20, reads=("actors", "nodes", "alive_actors", "running_tasks"))
def never_placed(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor that died without ever starting (its job ended first) because it could never be placed, or
    others held what it needs: why."""
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    reason = str(ctx.get("reason") or "")
    if not ctx.get("never_started") or reason == "RAY_KILL":
        return []
    label = g.actor_label(row)
    need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
    unplaced = resource_wait(g, label, need, f"actor:{row.get('actor_id')}")
    if not ((unplaced and unplaced[-1].kind is Edge.HOLDS) or any(u.say.infeasible for u in unplaced)):
        return []
    return [NEVER_PLACED(label, str(ctx.get("error_message") or ""), reason=reason or "DEAD"), *unplaced]
