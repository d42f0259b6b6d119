"""Ray Serve: status of applications, deploying a config, deleting one application."""

import hashlib
import json
from typing import Annotated, Any

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.answers.serve import validate_serve_config
from ray_mcp.errors import InvalidArgument
from ray_mcp.guard import confirm as confirmation
from ray_mcp.guard.audit import note_audit
from ray_mcp.guard.confirm import Approval, Pending
from ray_mcp.limits import SERVE_LOG_LINES
from ray_mcp.models import ServeChange, ServeStatus
from ray_mcp.server.context import app_of
from ray_mcp.shaping.common import tool_result
from ray_mcp.shaping.serve import render_serve_status
from ray_mcp.text import quoted
from ray_mcp.tools import DESTRUCTIVE, READ_ONLY, WRITE, Api, Confirm
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.SERVE  # see ray_mcp/toolsets.py


async def serve_status(
    api: Api,
    app: Annotated[str | None, Field(description="One application; all if omitted.")] = None,
    log_lines: Annotated[
        int,
        Field(
            ge=SERVE_LOG_LINES.low,
            le=SERVE_LOG_LINES.high,
            description="Log lines per failing deployment.",
        ),
    ] = SERVE_LOG_LINES.default,
) -> Annotated[CallToolResult, ServeStatus]:
    """Ray Serve's applications, deployments and replicas, with the error and log tail of anything failing.
    cluster_health only sums up Serve errors."""
    status = await api.serve.status(app=app, log_lines=log_lines)
    return tool_result(status, render_serve_status(status))


async def replace_plan(ctx: Context, api: Api, config: dict[str, Any], replace: bool) -> Pending:
    """A replace deletes every declared app the config leaves out: that is what must be confirmed."""
    if not replace:
        return Pending("serve_deploy", "merge", "merge the config", required=False)
    server = app_of(ctx)
    if not server.settings.allow_destructive:
        raise InvalidArgument(
            "serve_deploy with replace=true deletes every Serve application the config leaves out, so it needs "
            "--allow-destructive (RAY_MCP_ALLOW_DESTRUCTIVE), which this server runs without; nothing was "
            "changed. Deploy without replace (a merge keeps the other apps), or delete one app with "
            "serve_delete_app."
        )
    validated = validate_serve_config(config)
    keep = {str(a.get("name", "default")) for a in validated.get("applications") or []}
    instances = await api.serve.app_instances(
        deleting=False
    )  # one already being deleted is not ours to confirm
    deleting = sorted(set(instances) - keep)
    cluster = await server.cluster_ref()
    if not deleting:
        return Pending("serve_deploy", "replace", "replace, deleting no app", required=False, cluster=cluster)
    status = await api.serve.status(app=None, log_lines=0)
    config_digest = hashlib.sha256(json.dumps(validated, sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]
    instance = " ".join(f"{name}:{instances[name]}" for name in deleting) + f" config={config_digest}"
    description = (
        f"replace every Serve application with the config's {', '.join(quoted(n) for n in sorted(keep))}, "
        f"DELETING {len(deleting)} application(s) not in it: {', '.join(quoted(n) for n in deleting)}"
    )
    return Pending(
        "serve_deploy",
        f"replace deleting {', '.join(deleting)}",
        description,
        subject={"deleting": deleting, "status": status},
        instance=instance,
        cluster=cluster,
        ttl_s=server.settings.confirm_token_ttl_s,
    )


async def serve_deploy(
    ctx: Context,
    api: Api,
    config: Annotated[
        dict[str, Any],
        Field(
            description='As for `serve deploy`: {"applications": [{"name", "import_path": "module:app", '
            '"route_prefix", "runtime_env", "deployments": [...]}], "http_options"}.'
        ),
    ],
    pending: Annotated[Pending, Resolve(replace_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(replace_plan)],
    replace: Annotated[
        bool,
        Field(
            description="True: apps not in the config are DELETED (needs --allow-destructive and a confirmation)."
        ),
    ] = False,
    confirm: Annotated[
        str | None, Field(description="For replace=true: the token from a first call without it.")
    ] = None,
) -> Annotated[CallToolResult, ServeChange]:
    """Deploy or update Serve applications from a declarative config, merged with the applications that run. With
    replace=true it also removes the applications the config leaves out (destructive, confirmed)."""
    deleting: list[str] = pending.subject.get("deleting", []) if isinstance(pending.subject, dict) else []
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        status = pending.subject["status"]
        return tool_result(ServeChange(action="not done", applications=[], status=status), decision.text)
    if pending.required:
        confirmation.ensure_unchanged(pending, await replace_plan(ctx, api, config, replace))
    names = [str(a.get("name", "default")) for a in config.get("applications") or [] if isinstance(a, dict)]
    note_audit(targets={"apps": names, **({"deletes": deleting} if replace else {})})
    change = await api.serve.deploy(config, replace=replace)
    deleted = f" Deleted (replace): {', '.join(quoted(n) for n in deleting)}." if deleting else ""
    text = (
        f"Applied a Serve config with applications {', '.join(quoted(n) for n in change.applications)}.{deleted}\n"
        + render_serve_status(change.status)
    )
    return tool_result(change, text)


async def delete_app_plan(ctx: Context, api: Api, app: str) -> Pending:
    """What serve_delete_app would delete (NotFound for an unknown application)."""
    server = app_of(ctx)
    status = await api.serve.status(app=app, log_lines=0)
    instance = (await api.serve.app_instances()).get(app, "gone")
    deployed = f", deployed {status.apps[0].last_deployed}" if status.apps[0].last_deployed else ""
    description = (
        f"delete Serve application {quoted(app)} ({status.apps[0].status}{deployed}) and keep the others"
    )
    return Pending(
        "serve_delete_app",
        app,
        description,
        subject=status,
        instance=instance,
        cluster=await server.cluster_ref(),
        ttl_s=server.settings.confirm_token_ttl_s,
    )


async def serve_delete_app(
    ctx: Context,
    api: Api,
    app: Annotated[str, Field(description="The application to delete, by name.")],
    pending: Annotated[Pending, Resolve(delete_app_plan)],
    answer: Annotated[ElicitationResult[Approval], confirmation.asking(delete_app_plan)],
    confirm: Confirm = None,
) -> Annotated[CallToolResult, ServeChange]:
    """Delete one Serve application while the others keep running. The user confirms, or a first call returns a
    token to pass back."""
    decision = confirmation.decide(pending, confirm, answer)
    if not decision.proceed:
        return tool_result(
            ServeChange(action="not done", applications=[], status=pending.subject), decision.text
        )
    confirmation.ensure_unchanged(pending, await delete_app_plan(ctx, api, app))
    change = await api.serve.delete_app(app)
    return tool_result(change, f"Deleted {quoted(app)}.\n" + render_serve_status(change.status))


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Serve status"}))(serve_status)
    server.tool(annotations=WRITE.model_copy(update={"title": "Deploy Serve applications"}))(serve_deploy)
    delete = DESTRUCTIVE.model_copy(update={"title": "Delete a Serve application"})
    server.tool(annotations=delete)(serve_delete_app)
