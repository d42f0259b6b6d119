"""Where the driver's exception came from: joined to the chain of the remote work that raised it, the dead
owner, the named actor it looked up, or the work it timed out waiting on."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp.diagnosis.chains.ended_by import actor_end, exc_quote, owner_chain
from ray_mcp.diagnosis.chains.holds import pg_wait, resource_wait
from ray_mcp.diagnosis.chains.links import ROOT, Chain, Link
from ray_mcp.diagnosis.chains.symptoms import wait_kind
from ray_mcp.diagnosis.chains.waits_on import driver_wait
from ray_mcp.diagnosis.graph import NAME_TAKEN, Graph, exception_line, first_raise, num, one_line, parse_owner
from ray_mcp.limits import (
    DRIVER_QUOTE_LINES,
    INNER_MESSAGE_CHARS,
    LOG_QUOTE_LINE_CHARS,
    MESSAGE_HEAD_CHARS,
    OWNER_SEARCH_LINES,
    QUOTE_CHARS,
    RUNTIME_ENV_SEARCH_LINES,
    SHORT_CAUSE_CHARS,
    TIMED_OUT_WORK_NAMED,
)


def driver_chain(g: Graph, lines: Sequence[str] | None, chains: Sequence[Chain], job_id: str) -> Chain | None:
    """Where the driver's exception was raised, joined to the chain of the remote work that raised it."""
    from ray_mcp.diagnosis import tracebacks as diagnosis

    if not lines:
        return None
    tb = diagnosis.last_traceback(lines)
    if tb is None or not tb.exceptions:
        return None
    text = "\n".join(tb.lines + tb.remote)
    inner_type, inner_msg = tb.innermost or ("", "")
    outer_type = tb.outermost[0] if tb.outermost else inner_type
    where = tb.user_frame.short() if tb.user_frame else "?"
    excerpt = " | ".join(
        diagnosis.cut_text(line, LOG_QUOTE_LINE_CHARS)
        for line in diagnosis.user_lines(tb.lines)[-DRIVER_QUOTE_LINES:]
    )
    raised = Link(
        "raised_in",
        f"the driver raised {diagnosis.short_type(outer_type)}"
        + (
            f" ({diagnosis.short_type(inner_type)}: {one_line(inner_msg, INNER_MESSAGE_CHARS)})"
            if inner_type != outer_type
            else f": {one_line(inner_msg, MESSAGE_HEAD_CHARS)}"
        )
        + f" at {where}",
        excerpt,
    )
    # 1. Where it was first raised: "ray::f() (pid=…)" of a task or actor method, the innermost one.
    remote = first_raise(text)
    if remote:
        for c in chains:
            if any(g.entities.get(s) and g.entities[s].row.get("name") == remote["name"] for s in c.subjects):
                # Ray's own error (an actor or owner that died) inside that task came from a call it made.
                deeper = called_chain(g, c, chains) if RAY_SYSTEM_ERROR.search(inner_type) else None
                return merge(raised, deeper or c)
    # A runtime_env that could not be set up for a task or actor of the job: that failure, in the installer's words.
    if any("RuntimeEnvSetupError" in line for line in [*tb.lines, *lines[-RUNTIME_ENV_SEARCH_LINES:]]):
        env = next((c for c in chains if c.kind == "runtime_env"), None)
        if env is not None:
            return merge(raised, env)
    # A Serve application that could not be deployed: why, in its deployment's words (a replica's constructor).
    serve = serve_failure(g, text)
    if serve:
        return Chain(ROOT, "serve", "", [raised, *serve], ["serve_status"], job_id)
    # 2. An object whose owner died; 3. a named actor that is not where it was looked up.
    # (The owner's id is on the lines after the exception line: a multi-line message the traceback ends with.)
    owned = (
        text
        if parse_owner(text)
        else "\n".join(lines[-OWNER_SEARCH_LINES:])
        if "OwnerDiedError" in text
        else ""
    )
    if parse_owner(owned):
        return Chain(ROOT, "owner_died", "", [raised, *owner_chain(g, owned)], job_id=job_id)
    m = re.search(r"Failed to look up actor(?: with name)? '(?P<name>[^']+)'", text)
    if m:
        return Chain(ROOT, "named_actor", "", [raised, *named_actor(g, m["name"])], job_id=job_id)
    m = NAME_TAKEN.search(text)
    if m:
        return Chain(ROOT, "named_actor", "", [raised, *name_holder(g, m["name"])], job_id=job_id)
    # 4. A dead actor it names (ActorDiedError and kin).
    dead = dead_actor_named(g, raised, chains, text, job_id)
    if dead is not None:
        return dead
    # 5. It timed out waiting: on what (open work, or work that was never placed).
    if "GetTimeoutError" in text:
        waiting = driver_wait(g, job_id)
        if waiting is not None:
            return Chain(
                ROOT, waiting.kind, "", [raised, *waiting.links], waiting.next_steps, job_id, waiting.subjects
            )
        unplaced = never_placed(g, job_id)
        if unplaced:
            return Chain(ROOT, wait_kind(unplaced), "", [raised, *unplaced], ["cluster_status"], job_id)
    # 6. The driver's own frames name the remote call it waited on: "ray.get(tokenize_shard.remote(1))".
    failed = [c for c in chains if c.kind not in ("retried", "cancelled", "killed", "ended_with_job")]
    # Work the driver stopped waiting for (a timeout it raised): still running when the job ended.
    gave_up = gave_up_chain(g, raised, chains, job_id) if TIMED_OUT.search(text) else None
    if gave_up is not None:
        return gave_up
    called = called_by_name(g, raised, chains, text)
    if called is not None:
        return called
    if (
        diagnosis.is_ray_wrapper(outer_type)
        or "RayTaskError" in outer_type
        or outer_type.startswith("ray.exceptions.")
    ) and failed:
        return merge(raised, failed[0])
    return Chain(
        ROOT, "raised", "", [raised], [f"tail_logs job={job_id} grep='Traceback|Error' context=20"], job_id
    )


def dead_actor_named(g: Graph, raised: Link, chains: Sequence[Chain], text: str, job_id: str) -> Chain | None:
    """An ActorDiedError (and kin) that names its actor: that actor's chain, or how it ended."""
    if not re.search(r"ActorDied|RayActorError|ActorUnavailable|ActorUnschedulable", text):
        return None
    for ids in re.findall(
        r"actor_id=([0-9a-f]{32})|Actor(?:ID)?\(([0-9a-f]{32})\)|actor ([0-9a-f]{32})", text
    ):
        aid = next(i for i in ids if i)
        explained = next((c for c in chains if f"actor:{aid}" in c.subjects), None)
        if explained is not None:
            return merge(raised, explained)
        if aid in g.actors:
            return Chain(
                ROOT,
                "raised",
                "",
                [raised, *actor_end(g, g.actors[aid])],
                job_id=job_id,
                subjects={f"actor:{aid}"},
            )
    return None


def gave_up_chain(g: Graph, raised: Link, chains: Sequence[Chain], job_id: str) -> Chain | None:
    """The driver raised a timeout of its own: the work it stopped waiting for, still running when the job ended."""
    late = [c for c in chains if c.kind == "ended_with_job"]
    if not late:
        return None
    rows = [g.entities[k].row for c in late for k in sorted(c.subjects) if k in g.entities]
    who = ", ".join(g.task_label(r) for r in rows[:TIMED_OUT_WORK_NAMED]) + (
        f" and {len(rows) - TIMED_OUT_WORK_NAMED} more" if len(rows) > TIMED_OUT_WORK_NAMED else ""
    )
    gave_up = Link(
        "waits_on",
        f"{raised.text}; it stopped waiting on {who}, still running when the job ended",
        "; ".join(c.links[-1].quote for c in late[:TIMED_OUT_WORK_NAMED]),
    )
    return Chain(
        ROOT,
        "timeout",
        "",
        [raised, gave_up],
        [f"list_tasks job={job_id}", "cpu_profile or stack_traces of the slow task"],
        job_id,
        set().union(*(c.subjects for c in late)),
    )


def called_by_name(g: Graph, raised: Link, chains: Sequence[Chain], text: str) -> Chain | None:
    """The chain of work the driver's traceback names (a ray.kill of an actor it called is the cause when the
    driver failed on it); a call made inside a task the traceback names explains that task's failure, so the
    callee comes first."""
    named = [c for c in chains if c.kind not in ("retried", "cancelled", "ended_with_job") and c.links]
    matched: list[tuple[Chain, dict]] = []
    for c in named:
        for key in sorted(c.subjects):
            ent = g.entities.get(key)
            called = ent and (ent.row.get("name") or ent.row.get("class_name") or "").split(".")[-1]
            if ent and called and re.search(rf"\b{re.escape(called)}\b", text):
                matched.append((c, ent.row))
    if not matched:
        return None
    callers = {str(row.get("task_id")) for _, row in matched if row.get("task_id")}
    callee = next((c for c, row in matched if str(row.get("parent_task_id") or "") in callers), None)
    return merge(raised, callee or matched[0][0])


TIMED_OUT = re.compile(r"GetTimeoutError|[Tt]ime ?out|timed out|did not finish|not ready|deadline|too long")


def never_placed(g: Graph, job_id: str) -> list[Link]:
    """The job's actors that died without ever starting, and why they could not be placed."""
    for row in g.actors.values():
        ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
        if row.get("job_id") != job_id or not ctx.get("never_started"):
            continue
        need = {k: num(v) for k, v in (row.get("required_resources") or {}).items()}
        links = resource_wait(g, g.actor_label(row), need, f"actor:{row.get('actor_id')}")
        if links:
            return [Link("waits_on", f"{g.actor_label(row)} never started (it was never placed)"), *links]
    for pg in g.pgs.values():
        stats = pg.get("stats") or {}
        never = str(stats.get("end_to_end_creation_latency_us") or "0") == "0"
        if pg.get("creator_job_id") != job_id or pg.get("state") == "CREATED" or not never:
            continue
        links = pg_wait(g, pg)
        if links:
            return [
                Link(
                    "waits_on",
                    f"{g.pg_label(pg)} was never created ({stats.get('scheduling_state') or pg.get('state')})",
                ),
                *links,
            ]
    return []


RAY_SYSTEM_ERROR = re.compile(r"ActorDied|ActorUnavailable|RayActorError|OwnerDied|ObjectLost|WorkerCrashed")


def called_chain(g: Graph, caller: Chain, chains: Sequence[Chain]) -> Chain | None:
    """The chain of a failed call made from inside ``caller``'s task (a task whose parent is that task)."""
    ids = {str(g.entities[s].row.get("task_id")) for s in caller.subjects if s in g.entities}
    ids.discard("None")
    for c in chains:
        if c is caller:
            continue
        for s in c.subjects:
            ent = g.entities.get(s)
            if ent is not None and str(ent.row.get("parent_task_id") or "") in ids:
                return c
    return None


def merge(raised: Link, chain: Chain) -> Chain:
    """The driver's exception joined to the chain it came from; that chain's symptom stays counted ("4 tasks
    decode failed": the driver re-raised one of them, the same cause ended them all)."""
    counted = [f"[counted] {chain.symptom}, all with this cause"] if re.match(r"\d+ ", chain.symptom) else []
    return Chain(
        ROOT,
        chain.kind,
        "",
        [raised, *chain.links],
        chain.next_steps,
        chain.job_id,
        chain.subjects,
        details=[*counted, *chain.details],
    )


def name_holder(g: Graph, name: str) -> list[Link]:
    """Who holds the actor name the job tried to take: an actor still alive under it (often a detached one
    left by an earlier job), with that job and how it ended."""
    holders = [a for a in g.ev.related_actors if a.get("name") == name and a.get("state") != "DEAD"]
    if not holders:
        return [
            Link(
                "created_by", f"the name '{name}' was taken when the job asked for it (no actor holds it now)"
            )
        ]
    a = holders[0]
    job_id = str(a.get("job_id") or "")
    ended = (g.jobs.get(job_id) or {}).get("status")
    detached = "detached " if a.get("is_detached") else ""
    of_job = g.job_label(job_id) + (
        f", which ended ({ended})" if ended in ("SUCCEEDED", "FAILED", "STOPPED") else ""
    )
    return [
        Link(
            "created_by",
            f"the name '{name}' is already taken (ActorAlreadyExistsError): held by {detached}{g.actor_label(a)} "
            f"of {of_job}; kill it (kill_actor) or use another name",
            f"{g.actor_label(a)} state={a.get('state')} namespace={a.get('ray_namespace')} "
            f"detached={bool(a.get('is_detached'))}",
        )
    ]


def named_actor(g: Graph, name: str) -> list[Link]:
    job_ns = (g.ev.job or {}).get("runtime_env") or {}
    del job_ns
    found = [a for a in g.ev.related_actors if a.get("name") == name]
    alive = [a for a in found if a.get("state") != "DEAD"]
    if alive:
        a = alive[0]
        return [
            Link(
                "created_by",
                f"an actor named '{name}' exists, but in namespace '{a.get('ray_namespace')}' "
                f"(created by {g.job_label(a.get('job_id'))}); look it up with namespace='{a.get('ray_namespace')}'",
                f"{g.actor_label(a)} state={a.get('state')} namespace={a.get('ray_namespace')}",
            )
        ]
    if found:
        a = found[0]
        return [
            Link(
                "created_by", f"the actor named '{name}' (created by {g.job_label(a.get('job_id'))}) is DEAD"
            ),
            *actor_end(g, a),
        ]
    return [
        Link("created_by", f"no actor named '{name}' exists in any namespace (never created, or not yet)")
    ]


SERVE_APP = re.compile(r"Deploying application '?(?P<app>[\w.-]+)'? failed")
SERVE_BAD = ("DEPLOY_FAILED", "UNHEALTHY")


def serve_failure(g: Graph, text: str) -> list[Link]:
    """The Serve app the driver failed to deploy (or call), and why its deployment failed."""
    apps = (g.ev.serve or {}).get("applications") or {}
    m = SERVE_APP.search(text)
    if not apps or not (m or re.search(r"RayServeException|DeploymentUnavailable", text)):
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
                Link(
                    "raised_in",
                    f"Serve app '{name}' deployment {dep} is {d.get('status')}: "
                    + (f"its replicas failed to start: {why}" if started else why),
                    exc_quote(msg),
                )
            ]
        msg = str(app.get("message") or "")
        if msg:
            return [
                Link(
                    "ended_by",
                    f"Serve app '{name}' is {app.get('status')}: {exception_line(msg) or one_line(msg, SHORT_CAUSE_CHARS)}",
                    one_line(msg, QUOTE_CHARS),
                )
            ]
    return []
