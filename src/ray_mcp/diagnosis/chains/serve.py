"""Serve applications that are not RUNNING, each followed to its deployment's own state and settings: its
replicas, the request limits that reject or queue calls, the health check that replaces its replicas in a loop.
Read from ``GraphInputs.serve`` (/api/serve/applications/ as Ray returns it) and the ServeReplica actors."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.chains.links import CONTEXT, LOOP, STUCK, Chain, Link
from ray_mcp.diagnosis.graph import Graph, Row, exception_line, one_line
from ray_mcp.limits import QUOTE_CHARS, SHORT_CAUSE_CHARS
from ray_mcp.text import quoted

SERVE_DOC = "ray-docs://reference/06-ray-serve"
SERVE_OK = (
    "HEALTHY",
    "UPSCALING",
    "DOWNSCALING",
    "UPDATING",
)  # UPDATING: pending replicas say why (cluster.py)
# The deployment settings that decide whether a call is served, queued or rejected, and when a replica is replaced.
LIMITS = ("num_replicas", "max_ongoing_requests", "max_queued_requests")
HEALTH = ("health_check_period_s", "health_check_timeout_s")
REPLACED_LOOP = 2  # dead replicas of one deployment that make its replacement a loop
HEALTH_CHECK = re.compile(r"health.?check", re.I)


def settings(config: Row, keys: tuple[str, ...]) -> str:
    """ "max_ongoing_requests 5, max_queued_requests 10": the settings of a deployment that are set."""
    return ", ".join(
        f"{k} {config[k]:g}" if isinstance(config[k], float) else f"{k} {config[k]}"
        for k in keys
        if config.get(k) is not None
    )


def replicas_line(dep: Row) -> str:
    """ "1 of 2 replicas RUNNING (1 STARTING)": a deployment's replicas by state."""
    states: dict[str, int] = {}
    for r in dep.get("replicas") or []:
        states[str(r.get("state"))] = states.get(str(r.get("state")), 0) + 1
    running = states.pop("RUNNING", 0)
    target = dep.get("target_num_replicas")
    of = f" of {target}" if target is not None else ""
    rest = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
    return f"{running}{of} replica(s) RUNNING" + (f" ({rest})" if rest else "")


def dead_replicas(g: Graph, app: str, dep: str) -> list[Row]:
    return replicas(g, app, dep, ("DEAD",))


def replicas(g: Graph, app: str, dep: str, states: tuple[str, ...]) -> list[Row]:
    cls = f"ServeReplica:{app}:{dep}"
    return [a for a in g.actors.values() if a.get("class_name") == cls and a.get("state") in states]


def serve_app_chains(g: Graph) -> list[Chain]:
    """Each Serve app that is not RUNNING, by its failing deployment: why (its message), its replicas, its
    limits; a deployment whose replicas die and are replaced again and again is a loop, with its health check."""
    apps = (g.ev.serve or {}).get("applications") or {}
    chains = []
    for name, app in apps.items():
        status = str(app.get("status") or "")
        deployments = app.get("deployments") or {}
        for dep_name, dep in deployments.items():
            dep_status = str(dep.get("status") or "")
            dead = dead_replicas(g, name, dep_name)
            config = dep.get("deployment_config") or {}
            message = str(dep.get("message") or "")
            looping = len(dead) >= REPLACED_LOOP and (
                dep_status not in SERVE_OK or HEALTH_CHECK.search(message)
            )
            if dep_status in SERVE_OK and not looping:
                continue
            why = exception_line(message) or one_line(message, SHORT_CAUSE_CHARS) or "no message"
            subject = f"Serve app {quoted(name)} deployment {quoted(dep_name)}"
            details = [f"[replicas] {replicas_line(dep)}"]
            if settings(config, LIMITS):
                details.append(f"[limits] {settings(config, LIMITS)}")
            if looping:
                # The replacement being started is the loop's next turn, not a wait of its own.
                starting = replicas(
                    g, name, dep_name, ("PENDING_CREATION", "DEPENDENCIES_UNREADY", "RESTARTING")
                )
                health = settings(config, HEALTH) or "the default health check (every 10 s, 30 s timeout)"
                checked = "failing its health check" if HEALTH_CHECK.search(message) else "dying"
                text = (
                    f"{subject}: {len(dead)} replica(s) died and were replaced, {checked} ({health}); "
                    f"{dep_status}: {quoted(why)}"
                )
                chains.append(
                    Chain(
                        LOOP,
                        "serve_loop",
                        "",
                        [Link("ended_by", text, one_line(message, QUOTE_CHARS))],
                        [
                            f"serve_status app={name}",
                            f"tail_logs actor_id={dead[-1].get('actor_id')} stream=err",
                        ],
                        subjects={
                            f"serve:{name}:{dep_name}",
                            *(f"actor:{a.get('actor_id')}" for a in [*dead, *starting]),
                        },
                        details=details,
                    )
                )
                continue
            trigger = str(dep.get("status_trigger") or "")
            started = "STARTUP" in trigger or "__init__" in message
            text = f"{subject} is {dep_status}: " + (
                f"its replicas failed to start: {quoted(why)}" if started else quoted(why)
            )
            severity = STUCK if status in ("DEPLOY_FAILED", "UNHEALTHY") else CONTEXT + 10
            chains.append(
                Chain(
                    severity,
                    "serve",
                    f"Serve application {quoted(name)} is {status}",
                    [Link("raised_in" if started else "ended_by", text, one_line(message, QUOTE_CHARS))],
                    [f"serve_status app={name}", f"prompt serve-deployment-unhealthy(app={name})"],
                    subjects={f"serve:{name}:{dep_name}"},
                    details=details,
                )
            )
        if status not in ("RUNNING", "NOT_STARTED", "DELETING", "DEPLOYING") and not any(
            c.subjects & {f"serve:{name}:{d}" for d in deployments} for c in chains
        ):
            text = f"Serve application {quoted(name)} is {status}: {quoted(one_line(str(app.get('message') or ''), SHORT_CAUSE_CHARS))}"
            chains.append(
                Chain(
                    STUCK if status in ("DEPLOY_FAILED", "UNHEALTHY") else CONTEXT + 10,
                    "serve",
                    "",
                    [Link("ended_by", text)],
                    [f"serve_status app={name}"],
                    subjects={f"serve:{name}"},
                )
            )
    return chains


def job_app_chains(g: Graph, job_id: str) -> list[Chain]:
    """The chains of the Serve apps this job deployed (its controller started their replicas, so the replica
    actors carry the job's id)."""
    mine = {
        str(a.get("class_name")).split(":")[1]
        for a in g.actors.values()
        if a.get("job_id") == job_id
        and str(a.get("class_name") or "").count(":") >= 2
        and str(a.get("class_name")).startswith("ServeReplica:")
    }
    return [
        c
        for c in serve_app_chains(g)
        if any(s.split(":")[1] in mine for s in c.subjects if s.startswith("serve:"))
    ]
