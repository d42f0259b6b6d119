"""Actors: list them, show one in full, kill one."""

from typing import Annotated, Literal

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.guard import confirm as confirmation
from ray_mcp.guard.confirm import Approval, Pending
from ray_mcp.limits import DEFAULT_LIMIT, MAX_LIMIT
from ray_mcp.models import Actor, ActorKill, ActorList
from ray_mcp.server.context import app_of
from ray_mcp.shaping.actors import kill_preflight, render_actor, render_actor_list
from ray_mcp.shaping.common import clamp_limit, tool_result
from ray_mcp.sources.ids import check_id
from ray_mcp.sources.query import where
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, Api, Confirm, JobFilter
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py

ActorStateName = Literal["DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"]
ActorId = Annotated[str, Field(description="The actor id (32 hex chars), as list_actors prints it.")]


async def list_actors(
    api: Api,
    state: Annotated[ActorStateName | None, Field(description="Only actors in this state.")] = None,
    class_name: Annotated[str | None, Field(description="Only actors of this class (exact name).")] = None,
    name: Annotated[str | None, Field(description="Only the actor of this name (options(name=...)).")] = None,
    namespace: Annotated[str | None, Field(description="Only actors in this Ray namespace.")] = None,
    job: JobFilter = None,
    node_id: Annotated[str | None, Field(description="Only actors on this node (56 hex chars).")] = None,
    placement_group: Annotated[
        str | None, Field(description="Only actors in this placement group (its id).")
    ] = None,
    limit: Annotated[
        int, Field(ge=0, description=f"Most actors to list (0: counts only; max {MAX_LIMIT}).")
    ] = DEFAULT_LIMIT,
    detail: Annotated[
        bool, Field(description="Add job, namespace, resources, detached, full death cause.")
    ] = False,
) -> Annotated[CallToolResult, ActorList]:
    """Actors with exact totals per state, each dead one with its death cause, filtered by state, class, job,
    node or group. get_actor shows one in full."""
    limit, note = clamp_limit(limit, what="actors")
    filters = where(
        state=state,
        class_name=class_name,
        name=name,
        ray_namespace=namespace,
        job_id=await api.jobs.id_of(job),
        node_id=node_id,
        placement_group_id=placement_group,
    )
    page = await api.actors.page(filters=filters, limit=limit, detail=detail, notes=[note] if note else [])
    return tool_result(page, render_actor_list)


async def get_actor(api: Api, actor_id: ActorId) -> Annotated[CallToolResult, Actor]:
    """One actor in full: state, pid, node, restarts, job, namespace, resources and death cause. list_actors
    finds its id."""
    actor = await api.actors.get(actor_id.strip())
    return tool_result(actor, render_actor(actor))


async def kill_plan(ctx: Context, api: Api, actor_id: str, no_restart: bool, force: bool) -> Pending:
    """What kill_actor would do (found before anything changes); a detached actor needs force."""
    actor = await api.actors.get(check_id("actor", actor_id.strip()))
    # The actor's incarnation: a restart gives it a new process (and a restart count), so a token or an answer
    # for the old one does not kill the new one.
    instance = f"restarts={actor.restarts} pid={actor.pid} no_restart={no_restart}"
    description = kill_preflight(actor, no_restart=no_restart, force=force)
    noop = description if actor.state == "DEAD" else None
    app = app_of(ctx)
    return Pending(
        "kill_actor",
        actor.actor_id,
        description,
        subject=actor,
        noop=noop,
        instance=instance,
        cluster=await app.cluster_ref(),
        ttl_s=app.settings.confirm_token_ttl_s,
    )


async def kill_actor(
    ctx: Context,
    api: Api,
    actor_id: ActorId,
    pending: Annotated[Pending, Resolve(kill_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(kill_plan)],
    no_restart: Annotated[
        bool, Field(description="True: the actor stays dead even if it has max_restarts.")
    ] = True,
    force: Annotated[
        bool, Field(description="Required to kill a detached actor (they outlive jobs).")
    ] = False,
    confirm: Confirm = None,
) -> Annotated[CallToolResult, ActorKill]:
    """Kill an actor as ray.kill does: its process stops and its pending calls fail. The user confirms, or a
    first call returns a token to pass back."""
    actor: Actor = pending.subject
    decision = confirmation.decide(pending, confirm, answer)
    if decision.proceed:
        confirmation.ensure_unchanged(pending, await kill_plan(ctx, api, actor_id, no_restart, force))
        result = await api.actors.kill(actor, no_restart=no_restart)
    else:
        result = ActorKill(
            actor_id=actor.actor_id,
            done=False,
            no_restart=no_restart,
            state_before=actor.state,
            message=decision.text,
        )
    return tool_result(result, result.message)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "List actors"}))(list_actors)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Get actor"}))(get_actor)
    server.tool(annotations=DESTRUCTIVE.model_copy(update={"title": "Kill actor"}))(kill_actor)
