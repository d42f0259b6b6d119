"""The cluster explained: dead nodes with what they took down, Serve replicas that cannot start, every job's
chains named by cause, and the cluster events worth a look."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.chains.capacity import autoscaler_chains, demand_chains, memory_chains, store_chains
from ray_mcp.diagnosis.chains.ended_by import (
    DRAINED,
    HEALTH_CHECK_LAG_MS,
    actor_end,
    died_with_node,
    node_death,
)
from ray_mcp.diagnosis.chains.jobs import failed_jobs
from ray_mcp.diagnosis.chains.links import CONTEXT, STUCK, Chain, Link
from ray_mcp.diagnosis.chains.serve import serve_app_chains
from ray_mcp.diagnosis.chains.symptoms import (
    BENIGN_ACTOR_END,
    actor_chains,
    failed_task_chains,
    final_attempts,
    pending_chains,
    wait_kind,
)
from ray_mcp.diagnosis.chains.waits_on import actor_wait
from ray_mcp.diagnosis.graph import Graph, GraphInputs, Row, memory_summary, names, num, one_line
from ray_mcp.limits import (
    ALIKE_SHOWN,
    DEAD_NODES_SHOWN,
    EVENT_CHARS,
    NAMES_SHOWN,
    NODE_DEATH_CHARS,
    OOM_DETAIL_CHARS,
)
from ray_mcp.text import single_line

# The task errors a node's death gives the work on it (not the work's own exceptions).
SYSTEM_ENDS = ("NODE_DIED", "LOCAL_RAYLET_DIED", "WORKER_DIED", "ACTOR_DIED", "ACTOR_UNAVAILABLE")


def death_reason(row: Row) -> tuple[str, Row]:
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    return str(ctx.get("reason") or ""), ctx


# -- the cluster: every problem named by its cause the same way ---------------------------------------------


def node_chains(g: Graph) -> list[Chain]:
    """Each dead node, with what it took down (actors and tasks that died with it), newest death first."""
    chains = []
    dead = sorted(
        (n for n in g.nodes.values() if n.get("state") == "DEAD"), key=lambda n: -num(n.get("end_time_ms"))
    )
    for node in dead[:DEAD_NODES_SHOWN]:
        nid = str(node.get("node_id"))
        actors = [
            a
            for a in g.actors.values()
            if a.get("node_id") == nid
            and (
                a.get("state") == "RESTARTING"
                or (a.get("state") == "DEAD" and died_with_node(g, a, *death_reason(a)))
            )
            and not any(b in actor_end(g, a)[-1].text for b in BENIGN_ACTOR_END)
        ]
        since = num(node.get("end_time_ms")) - HEALTH_CHECK_LAG_MS
        tasks = [
            t
            for t in final_attempts(g, None)
            if t.get("node_id") == nid
            and t.get("state") == "FAILED"
            and t.get("error_type") in SYSTEM_ENDS
            and num(t.get("end_time_ms") or since) >= since
        ]
        took = []
        if actors:
            took.append(f"{len(actors)} actor(s) ({names(str(a.get('class_name')) for a in actors)})")
        if tasks:
            took.append(f"{len(tasks)} task(s)")
        jobs = sorted({str(x.get("job_id")) for x in [*actors, *tasks] if x.get("job_id")})
        links = node_death(g, nid)
        if took:
            links.append(
                Link(
                    "ended_by",
                    f"it took down {' and '.join(took)} of job(s) {', '.join(jobs)}",
                    "; ".join(g.actor_label(a) for a in actors[:NAMES_SHOWN]),
                )
            )
        recent = num(node.get("end_time_ms")) > g.ev.now_ms - 3600_000 if g.ev.now_ms else True
        chains.append(
            Chain(
                STUCK if recent else CONTEXT,
                "node_died",
                f"{g.node_label(nid)} is DEAD",
                links,
                ["list_nodes state=DEAD"],
                None,
                {
                    f"node:{nid}",
                    *(f"actor:{a.get('actor_id')}" for a in actors),
                    *(f"task:{t.get('task_id')}" for t in tasks),
                },
            )
        )
    return chains


def draining_chains(g: Graph) -> list[Chain]:
    """An ALIVE node Ray is draining (scale-down, preemption, `ray drain-node`) with work still on it: that work
    ends when the drain does."""
    chains = []
    for nid, node in g.nodes.items():
        message = str(node.get("state_message") or "")
        if node.get("state") != "ALIVE" or not DRAINED.search(message):
            continue
        actors = [a for a in g.actors.values() if a.get("node_id") == nid and a.get("state") == "ALIVE"]
        tasks = [t for t in g.running.values() if t.get("node_id") == nid]
        if not actors and not tasks:
            continue
        on = " and ".join(
            x
            for x in (
                f"{len(actors)} actor(s) ({names(str(a.get('class_name')) for a in actors)})"
                if actors
                else "",
                f"{len(tasks)} running task(s)" if tasks else "",
            )
            if x
        )
        chains.append(
            Chain(
                STUCK - 10,
                "node_draining",
                "",
                [
                    Link(
                        "ended_by",
                        f"{g.node_label(nid)} is being drained ({one_line(message, NODE_DEATH_CHARS)}) while {on} still run on it",
                        message,
                    )
                ],
                ["list_nodes", "list_actors node_id=" + nid],
                subjects={f"node:{nid}"},
            )
        )
    return chains


def serve_chains(g: Graph) -> list[Chain]:
    chains = []
    for row in g.actors.values():
        cls = str(row.get("class_name") or "")
        if not cls.startswith("ServeReplica:") or row.get("state") not in (
            "PENDING_CREATION",
            "DEPENDENCIES_UNREADY",
        ):
            continue
        parts = cls.split(":")
        app, dep = (parts[1], parts[2]) if len(parts) >= 3 else ("?", cls)
        links = actor_wait(g, row)
        if links:
            chains.append(
                Chain(
                    STUCK,
                    wait_kind(links),
                    f"a replica of Serve app '{app}' (deployment {dep}) cannot start",
                    links,
                    [f"serve_status app={app}", "cluster_status"],
                    row.get("job_id"),
                    {f"actor:{row.get('actor_id')}"},
                )
            )
    # One chain per app and cause: replicas of the same deployment waiting for the same thing.
    merged: dict[str, Chain] = {}
    for c in chains:
        key = c.symptom + re.sub(r"\([0-9a-f]{16,}\)", "", c.cause)
        if key in merged:
            merged[key].subjects |= c.subjects
        else:
            merged[key] = c
    for c in merged.values():
        if len(c.subjects) > 1:
            c.symptom = c.symptom.replace("a replica of", f"{len(c.subjects)} replicas of").replace(
                "cannot", "can not"
            )
    return list(merged.values())


EVENT_KINDS = (
    ("oom", re.compile(r"running low on memory|killed due to memory pressure", re.I)),
    (
        "node",
        re.compile(r"node .*(dead|removed|added|died|failed)|health check|Adding node|Removing node", re.I),
    ),
    ("autoscaler", re.compile(r"autoscal|Resized|launch|terminat|upscal|downscal", re.I)),
    ("worker", re.compile(r"worker died|Worker exit", re.I)),
)


def event_lines(ev: GraphInputs, limit: int) -> list[str]:
    """Cluster events worth an agent's attention, the most recent first, one line each."""
    out = []
    for e in reversed(ev.events or []):
        msg = str(e.get("message") or "")
        kind = next((k for k, p in EVENT_KINDS if p.search(msg)), None)
        if kind is None and e.get("severity") not in ("ERROR", "FATAL", "WARNING"):
            continue
        first = msg.strip().splitlines()[0] if msg.strip() else ""
        if kind == "oom":
            first = f"OOM kill: {memory_summary(msg)}; " + one_line(
                " ".join(re.findall(r"Selected to kill: \(([^)]*)\)?", msg))[:1], OOM_DETAIL_CHARS
            )
        out.append(
            single_line(f"{e.get('time') or '?'} {e.get('severity') or ''} {e.get('source_type') or ''}: ")
            + one_line(first, EVENT_CHARS)
        )
        if len(out) >= limit:
            break
    return out


def explain_cluster(ev: GraphInputs) -> list[Chain]:
    """Every cluster rule over one graph, ranked: dead nodes and what they took down, Serve, each job's chains
    named by cause, failed jobs, demands and memory."""
    g = Graph(ev)
    chains = node_chains(g)
    chains += draining_chains(g)
    chains += serve_app_chains(g)
    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    chains += [c for c in serve_chains(g) if not c.subjects <= covered]
    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    by_cause: dict[str, Chain] = {}
    # Pending groups first: an actor or task that waits in a group ends at the group's own chain.
    for c in [*pending_chains(g, None), *failed_task_chains(g, None), *actor_chains(g, None, "RUNNING")]:
        if c.subjects and c.subjects <= covered:
            continue
        if c.kind in ("cancelled", "killed", "ended_with_job"):
            continue
        c.symptom = f"{c.symptom} [{g.job_label(c.job_id)}]" if c.job_id else c.symptom
        if c.kind in ("failed", "raised", "owner_died", "worker_crash", "oom", "node_died", "pg_removed"):
            c.severity = min(c.severity, CONTEXT + 10)
        if (same := by_cause.get(c.cause)) is not None:  # one cause, one finding: what else it holds up
            same.subjects |= c.subjects
            same.severity = max(same.severity, c.severity)
            if len(same.details) < ALIKE_SHOWN:
                same.details.append(f"also held up by it: {c.symptom}")
            continue
        by_cause[c.cause] = c
        chains.append(c)
    chains += failed_jobs(g)
    chains += demand_chains(g, chains)
    chains += autoscaler_chains(g, chains)
    chains += memory_chains(g)
    chains += store_chains(g)
    chains.sort(key=lambda c: -c.severity)
    return chains
