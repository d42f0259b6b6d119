"""Actors: State API rows as Actor models (death causes flattened), the bounded list, and their text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import resource_shape
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import (
    ACTOR_FIELD_CHARS,
    EXCEPTION_CHARS,
    EXCEPTION_CHARS_IN_LIST,
    FIELD_CHARS,
    LINE_CHARS,
    LIST_FIELD_CHARS,
)
from ray_mcp.shaping.common import narrowing_hint, to_number
from ray_mcp.text import exception_summary, head_text, quoted, quoted_block, tail_text, user_traceback


def death_cause(raw: Mapping[str, Any] | None, *, exception_chars: int) -> models.DeathCause | None:
    """Flatten Ray's ``death_cause`` (one ``*_context`` key) into reason, error type, message and exception."""
    if not raw:
        return None
    if ctx := raw.get("creation_task_failure_context"):
        traceback = user_traceback(ctx.get("formatted_exception_string"))
        error_type, message = exception_summary(traceback)
        return models.DeathCause(
            reason="CREATION_TASK_ERROR",
            error_type=error_type,
            message=head_text(message, FIELD_CHARS),
            exception=tail_text(traceback, exception_chars),
        )
    for key, ctx in raw.items():
        if not isinstance(ctx, Mapping):
            continue
        reason = ctx.get("reason") or key.removesuffix("_context").upper()
        message = ctx.get("error_message") or ctx.get("message")
        error_type, _ = exception_summary(message)
        return models.DeathCause(
            reason=str(reason),
            error_type=error_type,
            message=head_text(message, max(LIST_FIELD_CHARS, exception_chars)),
        )
    return None


def actor_from_state(raw: Mapping[str, Any], *, detail: bool) -> models.Actor:
    """One row of /api/v0/actors (detail=1) as an Actor: basic fields, plus the rest when ``detail``."""
    state = str(raw.get("state", ""))
    actor = models.Actor(
        actor_id=str(raw.get("actor_id", "")),
        class_name=str(raw.get("class_name", "")),
        state=state,
        name=raw.get("name") or None,
        pid=to_number(raw.get("pid")) or None,
        node_id=raw.get("node_id") or None,
        restarts=to_number(raw.get("num_restarts")),
        death_cause=death_cause(
            raw.get("death_cause"), exception_chars=EXCEPTION_CHARS if detail else EXCEPTION_CHARS_IN_LIST
        )
        if state == "DEAD"
        else None,
    )
    if detail:
        actor.job_id = raw.get("job_id") or None
        actor.namespace = raw.get("ray_namespace") or None
        actor.is_detached = raw.get("is_detached")
        actor.placement_group_id = raw.get("placement_group_id") or None
        actor.repr_name = raw.get("repr_name") or None
        actor.required_resources = {
            k: float(v) for k, v in (raw.get("required_resources") or {}).items()
        } or None
        env = raw.get("serialized_runtime_env")
        actor.runtime_env = env if env and env != "{}" else None
        # Bounded: get_actor is a follow-up of every diagnosis and stays under 6 KB.
        actor.call_site = tail_text(raw.get("call_site"), ACTOR_FIELD_CHARS) or None
        actor.label_selector = dict(raw.get("label_selector") or {}) or None
        actor.fallback_strategy = raw.get("fallback_strategy") or None
        preempted = to_number(raw.get("num_restarts_due_to_node_preemption"))
        actor._restarts_preempted = int(preempted) if preempted else None
    return actor


def build_actor_list(
    *,
    total: int,
    matched: int,
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None,
    limit: int,
    detail: bool,
    notes: list[str],
) -> models.ActorList:
    by_state: dict[str, int] = {}
    by_class: dict[str, int] = {}
    for cls, entry in ((summary or {}).get("summary") or {}).items():
        for state, count in (entry.get("state_counts") or {}).items():
            by_state[state] = by_state.get(state, 0) + int(count)
            by_class[f"{cls} {state}"] = by_class.get(f"{cls} {state}", 0) + int(count)
    actors = [actor_from_state(row, detail=detail) for row in rows]
    # Alive and failing actors first: they are what an agent usually looks for.
    order = {
        s: i
        for i, s in enumerate(("ALIVE", "RESTARTING", "PENDING_CREATION", "DEPENDENCIES_UNREADY", "DEAD"))
    }
    actors.sort(key=lambda a: (order.get(a.state, 9), a.class_name, a.actor_id))
    shown = actors[:limit]  # the edge fits the answer to its byte budget (shaping.common.fit_page)
    hints = []
    hint = narrowing_hint(matched - len(shown), by_class, "actors", "state, class_name, job or name")
    if hint:
        hints.append(hint)
    if shown and not detail:
        hints.append("get_actor(actor_id) shows one actor in full (resources, namespace, full death cause).")
    return models.ActorList(
        total=total,
        matched=matched,
        shown=len(shown),
        by_state=dict(sorted(by_state.items())),
        actors=shown,
        notes=notes,
        hints=hints,
    )


def _actor_line(a: models.Actor) -> str:
    parts = [a.actor_id, quoted(a.class_name), *_set(name=quoted(a.name) if a.name else None), a.state]
    line = "  " + " ".join([*parts, *_set(pid=a.pid, node=a.node_id, restarts=a.restarts)])
    if a.death_cause:
        d = a.death_cause
        cause = f"{d.error_type}: {d.message}" if d.error_type else (d.message or "")
        line += f"\n    died: {d.reason}" + (f" — {quoted(cause, LINE_CHARS)}" if cause else "")
    return line


def _set(**fields: object) -> list[str]:
    """``key=value`` for each field that is set, in order."""
    return [f"{key}={value}" for key, value in fields.items() if value]


def render_actor_list(page: models.ActorList) -> str:
    counts = ", ".join(f"{n:,} {s}" for s, n in page.by_state.items()) or "none"
    lines = [
        f"Actors: {page.matched:,} match of {page.total:,} in the cluster ({counts}); showing {page.shown}."
    ]
    lines += [_actor_line(a) for a in page.actors]
    lines += [f"Note: {n}" for n in page.notes] + [f"Hint: {h}" for h in page.hints]
    return "\n".join(lines)


def render_actor(actor: models.Actor) -> str:
    lines = [_actor_line(actor).strip().split("\n")[0]]
    for key in ("job_id", "namespace", "is_detached", "placement_group_id", "repr_name", "call_site"):
        value = getattr(actor, key)
        if value not in (None, ""):
            lines.append(f"{key}: {quoted(value, FIELD_CHARS) if isinstance(value, str) else value}")
    if actor._restarts_preempted:
        lines.append(
            f"restarts: {actor.restarts} ({actor._restarts_preempted} after node preemption, "
            f"{int(actor.restarts or 0) - actor._restarts_preempted} after failures)"
        )
    if actor.label_selector:
        lines.append(f"label_selector: {quoted(actor.label_selector, FIELD_CHARS)}")
    if actor.fallback_strategy:
        lines.append(f"fallback_strategy: {quoted(actor.fallback_strategy, FIELD_CHARS)}")
    if actor.required_resources:
        lines.append(f"required_resources: {resource_shape(actor.required_resources)}")
    if actor.runtime_env:
        lines.append(f"runtime_env: {head_text(actor.runtime_env, FIELD_CHARS)}")
    if actor.death_cause:
        d = actor.death_cause
        lines.append(f"death cause: {d.reason}" + (f" ({d.error_type})" if d.error_type else ""))
        if d.message:
            lines.append(f"message: {quoted(d.message, FIELD_CHARS)}")
        if d.exception:
            lines.append("exception:\n" + quoted_block(d.exception))
    return "\n".join(lines)


def kill_preflight(actor: models.Actor, *, no_restart: bool, force: bool) -> str:
    """What kill_actor would do to this actor, or why it refuses (a detached actor needs force=true)."""
    # Ids and Ray's own states only: a class or actor name is the cluster's text, not ours to put to the user.
    who = f"actor {actor.actor_id} (" + (f"job {actor.job_id}, " if actor.job_id else "") + f"{actor.state})"
    if actor.state == "DEAD":
        return f"The {who} is already DEAD; nothing to kill."
    if actor.is_detached and not force:
        raise InvalidArgument(
            f"The {who} is detached: it outlives its job and others may rely on it. Nothing was changed. "
            "Call kill_actor again with force=true if you really mean to kill it."
        )
    after = (
        "and keep it dead (no_restart)" if no_restart else "and let Ray restart it if its max_restarts allows"
    )
    where = f" pid {actor.pid} on node {actor.node_id}" if actor.pid else ""
    return f"kill the {who}{where} {after}"
