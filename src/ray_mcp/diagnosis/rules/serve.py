"""Serve: applications that are not RUNNING, each followed to its deployment's own state and settings (its
replicas, the request limits that reject or queue calls, the health check that replaces its replicas in a
loop), replicas that cannot start, and a Serve app the driver failed to deploy. Read from ``GraphInputs.serve``
(/api/serve/applications/ as Ray returns it) and the ServeReplica actors."""

from __future__ import annotations

from ray_mcp.diagnosis.facts import CONTEXT, INFO, LOOP, PROBLEM, STUCK, Chain, Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row
from ray_mcp.diagnosis.recognise import HEALTH_CHECK, SERVE_APP_FAILED, SERVE_ERROR, exc_quote, exception_line
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import QUOTE_CHARS, SHORT_CAUSE_CHARS
from ray_mcp.shaping.serve import serve_autoscaling, unscheduled
from ray_mcp.text import one_line, quoted

SERVE_DOC = "ray-docs://reference/06-ray-serve"
FT_DOC = "ray-docs://reference/14-fault-tolerance"
SERVE_OK = (
    "HEALTHY",
    "UPSCALING",
    "DOWNSCALING",
    "UPDATING",
)  # UPDATING: pending replicas say why (serve_pending)
SERVE_BAD = ("DEPLOY_FAILED", "UNHEALTHY")
# The deployment settings that decide whether a call is served, queued or rejected, and when a replica is replaced.
LIMITS = ("num_replicas", "max_ongoing_requests", "max_queued_requests")
HEALTH = ("health_check_period_s", "health_check_timeout_s")
REPLACED_LOOP = 2  # dead replicas of one deployment that make its replacement a loop
STARTING = ("PENDING_CREATION", "DEPENDENCIES_UNREADY", "RESTARTING")  # a replica actor not yet serving

SERVE_LOOP = Say(
    "serve_loop",
    Edge.ENDED_BY,
    lambda f: (
        f"Serve app {quoted(f['app'])} deployment {quoted(f['deployment'])}: {f['dead']} replica(s) died "
        f"and were replaced, {'failing its health check' if f['health_check'] else 'dying'} ({f['health']}); "
        f"{f['status']}: {quoted(f['why'])}"
    ),
)
DEPLOYMENT_BAD = Say(
    "deployment_bad",
    Edge.ENDED_BY,
    lambda f: (
        f"Serve app {quoted(f['app'])} deployment {quoted(f['deployment'])} is {f['status']}: "
        + (f"its replicas failed to start: {quoted(f['why'])}" if f["started"] else quoted(f["why"]))
    ),
)
DEPLOYMENT_RAISED = Say("deployment_raised", Edge.RAISED_IN, DEPLOYMENT_BAD.words)
APP_BAD = Say(
    "app_bad",
    Edge.ENDED_BY,
    lambda f: f"Serve application {quoted(f['app'])} is {f['status']}: {quoted(f['message'])}",
)
APP_IS = Say("app_is", Edge.ENDED_BY, lambda f: f"Serve application {quoted(f['app'])} is {f['status']}")
REPLICAS = Say("replicas", Edge.ENDED_BY, said("[replicas] {line}"))
LIMITS_SET = Say("limits_set", Edge.ENDED_BY, said("[limits] {settings}"))
REPLICA_PENDING = Say(
    "replica_pending",
    Edge.WAITS_ON,
    lambda f: (
        f"{f['count']} replicas of Serve app '{f['app']}' (deployment {f['deployment']}) can not start"
        if f["count"] > 1
        else f"a replica of Serve app '{f['app']}' (deployment {f['deployment']}) cannot start"
    ),
)
# The driver's failed serve.run, followed to the deployment (plain words: the app's name is Ray's).
DRIVER_DEPLOYMENT = Say(
    "driver_deployment",
    Edge.RAISED_IN,
    lambda f: (
        f"Serve app '{f['app']}' deployment {f['deployment']} is {f['status']}: "
        + (f"its replicas failed to start: {f['why']}" if f["started"] else f["why"])
    ),
)
DRIVER_APP = Say("driver_app", Edge.ENDED_BY, said("Serve app '{app}' is {status}: {why}"))
# A deployment's autoscaler, in its own decisions: "scaled 5 → 2 at 14:05 because ...", and "wants 8, held at 3".
SCALED = Say(
    "serve_scaled",
    Edge.ENDED_BY,
    lambda f: (
        f"Serve app {quoted(f['app'])} deployment {quoted(f['deployment'])} scaled {f['prev']} → {f['new']} "
        f"at {f['at']} because {f['reason']}"
        + (f" (policy {quoted(f['policy'])})" if f.get("policy") else "")
    ),
)
HELD = Say(
    "serve_held",
    Edge.WAITS_ON,
    lambda f: (
        f"Serve app {quoted(f['app'])} deployment {quoted(f['deployment'])} wants {f['target']} replicas, held at "
        f"{f['running']}: each replica needs {f['need']}, the cluster has {f['free']} free"
    ),
)


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


def replicas(g: Graph, app: str, dep: str, states: tuple[str, ...]) -> list[Row]:
    cls = f"ServeReplica:{app}:{dep}"
    return [a for a in g.actors.values() if a.get("class_name") == cls and a.get("state") in states]


def _details(dep: Row, config: Row) -> list[Link]:
    details = [REPLICAS(line=replicas_line(dep))]
    if settings(config, LIMITS):
        details.append(LIMITS_SET(settings=settings(config, LIMITS)))
    return details


def deployment_loop(g: Graph, app: str, app_status: str, name: str, dep: Row) -> Chain | None:
    """A deployment whose replicas die and are replaced again and again: the loop, with its health check (the
    replacement being started is the loop's next turn, not a wait of its own). As severe as the app being
    UNHEALTHY when it is: the loop is how the engine tells that app's failing deployment once it has seen
    replicas replaced, the same problem and not a lesser one."""
    dead = replicas(g, app, name, ("DEAD",))
    message = str(dep.get("message") or "")
    status = str(dep.get("status") or "")
    if len(dead) < REPLACED_LOOP or (status in SERVE_OK and not HEALTH_CHECK.search(message)):
        return None
    config = dep.get("deployment_config") or {}
    starting = replicas(g, app, name, STARTING)
    loop = SERVE_LOOP(
        "",
        one_line(message, QUOTE_CHARS),
        app=app,
        deployment=name,
        dead=len(dead),
        health_check=bool(HEALTH_CHECK.search(message)),
        health=settings(config, HEALTH) or "the default health check (every 10 s, 30 s timeout)",
        status=status,
        why=exception_line(message) or one_line(message, SHORT_CAUSE_CHARS) or "no message",
    )
    return Chain(
        STUCK if app_status in SERVE_BAD else LOOP,
        Kind.SERVE_LOOP,
        None,
        [loop],
        [f"serve_status app={app}", f"tail_logs actor_id={dead[-1].get('actor_id')} stream=err"],
        subjects={f"serve:{app}:{name}", *(f"actor:{a.get('actor_id')}" for a in [*dead, *starting])},
        details=_details(dep, config),
    )


def deployment_failing(g: Graph, app: str, status: str, name: str, dep: Row) -> Chain | None:
    """A deployment that is not healthy: why (its message: the replicas' constructor error, or another), with its
    replicas and limits. Its dead and starting replica actors are its own: a replica killed for failing its
    health check, and its replacement waiting for a worker, are this finding's, not findings of their own."""
    dep_status = str(dep.get("status") or "")
    if dep_status in SERVE_OK:
        return None
    message = str(dep.get("message") or "")
    started = "STARTUP" in str(dep.get("status_trigger") or "") or "__init__" in message
    why = exception_line(message) or one_line(message, SHORT_CAUSE_CHARS) or "no message"
    say = DEPLOYMENT_RAISED if started else DEPLOYMENT_BAD
    link = say(
        "",
        one_line(message, QUOTE_CHARS),
        app=app,
        deployment=name,
        status=dep_status,
        started=started,
        why=why,
    )
    return Chain(
        STUCK if status in SERVE_BAD else CONTEXT + 10,
        Kind.SERVE,
        APP_IS(app=app, status=status),
        [link],
        [f"serve_status app={app}", f"prompt serve-deployment-unhealthy(app={app})"],
        subjects={
            f"serve:{app}:{name}",
            *(f"actor:{a.get('actor_id')}" for a in replicas(g, app, name, ("DEAD", *STARTING))),
        },
        details=_details(dep, dep.get("deployment_config") or {}),
    )


@rule(
    On.CLUSTER, Kind.SERVE_LOOP, order=30, severity=LOOP, refs=(SERVE_DOC, FT_DOC), reads=("serve", "actors")
)
def serve_loops(g: Graph, chains: list[Chain]) -> list[Chain]:
    """A deployment whose replicas die and are replaced again and again (failing their health check, or
    dying): the loop, its health check's settings, its replicas and limits."""
    return [c for c in serve_app_chains(g) if c.kind is Kind.SERVE_LOOP]


@rule(
    On.CLUSTER,
    Kind.SERVE,
    order=31,
    refs=(SERVE_DOC, "prompt:serve-deployment-unhealthy"),
    reads=("serve", "actors"),
)
def serve_apps(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Each Serve app that is not RUNNING, by its failing deployment: why (its message: the replicas'
    constructor error, or another), its replicas, its limits."""
    return [c for c in serve_app_chains(g) if c.kind is Kind.SERVE]


def serve_app_chains(g: Graph) -> list[Chain]:
    """Every Serve app's chains: its deployments in a loop or failing, else the app's own status."""
    apps = (g.ev.serve or {}).get("applications") or {}
    out: list[Chain] = []
    for name, app in apps.items():
        status = str(app.get("status") or "")
        deployments = app.get("deployments") or {}
        for dep_name, dep in deployments.items():
            found = deployment_loop(g, name, status, dep_name, dep) or deployment_failing(
                g, name, status, dep_name, dep
            )
            if found is not None:
                out.append(found)
        told = any(c.subjects & {f"serve:{name}:{d}" for d in deployments} for c in out)
        if status not in ("RUNNING", "NOT_STARTED", "DELETING", "DEPLOYING") and not told:
            message = one_line(str(app.get("message") or ""), SHORT_CAUSE_CHARS)
            out.append(
                Chain(
                    STUCK if status in SERVE_BAD else CONTEXT + 10,
                    Kind.SERVE,
                    None,
                    [APP_BAD(app=name, status=status, message=message)],
                    [f"serve_status app={name}"],
                    subjects={f"serve:{name}"},
                )
            )
    return out


@rule(On.JOB, Kind.SERVE, order=50, reads=("serve", "actors"))
def job_apps(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The chains of the Serve apps this job deployed (its controller started their replicas, so the replica
    actors carry the job's id)."""
    if not job_id:
        return []
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


@rule(
    On.CLUSTER,
    Kind.WAITING,
    order=40,
    severity=STUCK,
    reads=("actors", "pgs", "nodes", "alive_actors", "running_tasks"),
)
def serve_pending(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Replicas of a Serve app that cannot start, and why they wait (one finding per deployment and cause),
    unless an app's finding already tells them."""
    from ray_mcp.diagnosis.rules.symptoms import wait_kind
    from ray_mcp.diagnosis.rules.waiting import actor_wait

    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    merged: dict[tuple[object, ...], Chain] = {}
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
        if not links:
            continue
        c = Chain(
            STUCK,
            wait_kind(links),
            REPLICA_PENDING(app=app, deployment=dep, count=1),
            links,
            [f"serve_status app={app}", "cluster_status"],
            row.get("job_id"),
            {f"actor:{row.get('actor_id')}"},
        )
        key = (app, dep, c.cause_key())  # one chain per deployment and cause
        if key in merged:
            merged[key].subjects |= c.subjects
        else:
            merged[key] = c
    for c in merged.values():
        if c.what is not None:
            c.what.values["count"] = len(c.subjects)
    return [c for c in merged.values() if not c.subjects <= covered]


def scaling_chains(g: Graph) -> list[Chain]:
    """Each autoscaling deployment's autoscaler: replicas it wants and the cluster cannot place (Ray's message
    says what each needs and what is free), else its latest decision (Ray's autoscaling_detail, or the line
    its controller logged)."""
    apps = (g.ev.serve or {}).get("applications") or {}
    logged: dict[tuple[str, str], list[Row]] = {}
    for row in g.ev.serve_decisions or []:
        logged.setdefault((str(row.get("app")), str(row.get("deployment"))), []).append(row)
    out: list[Chain] = []
    for app, raw in apps.items():
        for name, dep in (raw.get("deployments") or {}).items():
            subject = {f"serve:{app}:{name}"}
            steps = [f"serve_status app={app}"]
            running = sum(1 for r in dep.get("replicas") or [] if r.get("state") == "RUNNING")
            target = dep.get("target_num_replicas")
            held = unscheduled(str(dep.get("message") or ""))
            if isinstance(target, int) and running < target and held is not None:
                link = HELD(
                    "",
                    one_line(str(dep.get("message")), QUOTE_CHARS),
                    app=app,
                    deployment=name,
                    target=target,
                    running=running,
                    need=held[1],
                    free=held[2],
                )
                out.append(
                    Chain(
                        PROBLEM,
                        Kind.SERVE_SCALING,
                        None,
                        [link],
                        [*steps, "cluster_status"],
                        subjects=subject,
                    )
                )
                continue
            rows = logged.get((app, name)) or []
            decided = serve_autoscaling(dep, None, None, None)  # Ray's autoscaling_detail, where it fills it
            if decided is not None and decided.decisions:
                rows = [decided.decisions[0].model_dump()]
            if not rows:
                continue
            latest = rows[0]
            link = SCALED(
                app=app,
                deployment=name,
                prev=latest["prev_replicas"],
                new=latest["new_replicas"],
                at=latest["at"],
                reason=latest["reason"],
                policy=latest.get("policy"),
                source=latest["source"],
            )
            out.append(Chain(INFO, Kind.SERVE_SCALING, None, [link], steps, subjects=subject))
    return out


@rule(On.CLUSTER, Kind.SERVE_SCALING, order=32, refs=(SERVE_DOC,), reads=("serve", "serve_decisions"))
def serve_scaling(g: Graph, chains: list[Chain]) -> list[Chain]:
    """Each autoscaling deployment's latest decision ("scaled 3 → 1 at 14:04 because 0 requests ongoing"), or
    the replicas it wants and cannot get ("wants 8, held at 3": what each needs, what is free)."""
    covered = set().union(*(c.subjects for c in chains)) if chains else set()
    return [c for c in scaling_chains(g) if not c.subjects <= covered]


@rule(On.JOB, Kind.SERVE_SCALING, order=51, reads=("serve", "serve_decisions", "actors"))
def job_scaling(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """The autoscaler decisions of the Serve apps this job deployed."""
    if not job_id:
        return []
    mine = {
        str(a.get("class_name")).split(":")[1]
        for a in g.actors.values()
        if a.get("job_id") == job_id
        and str(a.get("class_name") or "").startswith("ServeReplica:")
        and str(a.get("class_name")).count(":") >= 2
    }
    return [c for c in scaling_chains(g) if any(s.split(":")[1] in mine for s in c.subjects)]


def serve_failure(g: Graph, text: str) -> list[Link]:
    """The Serve app the driver failed to deploy (or call), and why its deployment failed."""
    apps = (g.ev.serve or {}).get("applications") or {}
    m = SERVE_APP_FAILED.search(text)
    if not apps or not (m or SERVE_ERROR.search(text)):
        return []
    names = (
        [m["app"]] if m and m["app"] in apps else [a for a, d in apps.items() if d.get("status") in SERVE_BAD]
    )
    for name in names:
        app = apps[name]
        for dep, d in (app.get("deployments") or {}).items():
            if d.get("status") not in SERVE_BAD:
                continue
            msg = str(d.get("message") or "")
            started = "STARTUP" in str(d.get("status_trigger") or "") or "__init__" in msg
            why = exception_line(msg) or one_line(msg, SHORT_CAUSE_CHARS)
            return [
                DRIVER_DEPLOYMENT(
                    "",
                    exc_quote(msg),
                    app=name,
                    deployment=dep,
                    status=d.get("status"),
                    started=started,
                    why=why,
                )
            ]
        msg = str(app.get("message") or "")
        if msg:
            why = exception_line(msg) or one_line(msg, SHORT_CAUSE_CHARS)
            return [DRIVER_APP("", one_line(msg, QUOTE_CHARS), app=name, status=app.get("status"), why=why)]
    return []
