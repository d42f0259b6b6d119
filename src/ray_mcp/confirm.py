"""Confirmation of destructive calls: ask the user (elicitation), else a stateless token bound to the object.

When the client supports elicitation, the user is asked, with the exact object named, and the tool acts only
on an explicit yes. Otherwise a destructive tool called without ``confirm`` changes nothing: it describes what
it would do and returns a token. Calling it again with that token carries the change out. The token is an HMAC
of the tool name and the target under a per-process secret, so it needs no server-side state, cannot be reused
for another object, and dies with the server process.

A destructive tool has two parameters filled by ``Resolve`` before its body runs: ``pending``, from the tool's
plan (fetch the object, say what would change: a ``Pending``), and ``answer``, from ``asking(plan)`` (the
user's answer, or nothing on the token path). The body calls ``decide`` and acts only on
``Decision.proceed``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from ray_mcp.errors import InvalidArgument

_SECRET = secrets.token_bytes(32)


def token_for(tool: str, target: str, *, secret: bytes = _SECRET) -> str:
    digest = hmac.new(secret, f"{tool}\0{target}".encode(), hashlib.sha256).hexdigest()
    return f"confirm-{digest[:24]}"


def is_confirmed(tool: str, target: str, confirm: str | None, *, secret: bytes = _SECRET) -> bool:
    """True if ``confirm`` is the token for this tool and target; raises if a wrong token was given.

    ``None`` means "dry run": the caller should describe the change and hand out ``token_for(...)``.
    """
    if confirm is None:
        return False
    if hmac.compare_digest(confirm, token_for(tool, target, secret=secret)):
        return True
    raise InvalidArgument(
        f"The confirm token does not match {tool} on {target}; nothing was changed. Tokens are bound to one "
        f"object and expire when the server restarts. Call {tool} without confirm to get a fresh token."
    )


def dry_run_text(tool: str, target: str, description: str) -> str:
    token = token_for(tool, target)
    return (
        f"Not done yet (nothing changed): {tool} would {description}.\n"
        f"To proceed, ask the user, then call {tool} again with the same arguments and confirm={token!r}."
    )


# -- one decision for every destructive tool: the user's answer (elicitation), else the token -------------


class Approval(BaseModel):
    """The form shown to the user: one explicit yes/no."""

    proceed: bool = Field(title="Proceed", description="Yes: carry it out now. No: change nothing.")


@dataclass(frozen=True)
class Pending:
    """A destructive change a tool is about to make, found out before anything changes.

    ``target`` binds the confirm token; ``description`` names the exact object for the user (id, class,
    name, job, entrypoint...); ``noop`` is the answer when there is nothing to do (an actor already dead).
    ``subject`` carries what the tool fetched (the actor, the job), so the body need not fetch it again.
    """

    tool: str
    target: str
    description: str
    subject: Any = None
    noop: str | None = None


@dataclass(frozen=True)
class Decision:
    proceed: bool
    text: str = ""  # when not proceeding: what to tell the caller (nothing changed, and why)
    token: str | None = None  # the confirm token, on the token path's dry run


def supports_elicitation(ctx: Context[Any, Any]) -> bool:
    """True if the client declared (form) elicitation, so that the user can be asked directly."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def ask(ctx: Context[Any, Any], pending: Pending) -> Elicit[Approval] | None:
    """The question for the user, for a client that supports elicitation; None means the token path.

    Return it from a tool's ``Resolve`` resolver: mcp asks the client (a standalone request on older
    protocols, an ``InputRequiredResult`` round on 2026-07-28) and injects the answer into the tool.
    """
    if pending.noop is not None or not supports_elicitation(ctx):
        return None
    return Elicit(f"ray-mcp asks: {pending.description}? This cannot be undone.", Approval)


def asking(plan: Callable[..., Awaitable[Pending]]) -> Resolve:
    """The ``Resolve`` of a destructive tool's ``answer``: the user's yes or no about the change ``plan`` found.

    Annotate the tool's parameter ``Annotated[ElicitationResult[Approval], asking(plan)]``; the plan runs once
    per call, shared with the tool's ``pending`` parameter.
    """

    async def ask_user(ctx: Context[Any, Any], pending: Pending) -> Elicit[Approval] | None:
        return ask(ctx, pending)

    ask_user.__annotations__["pending"] = Annotated[Pending, Resolve(plan)]
    ask_user.__qualname__ = f"ask_user_about_{plan.__name__}"
    return Resolve(ask_user)


def decide(pending: Pending, confirm: str | None, answer: ElicitationResult[Approval]) -> Decision:
    """Proceed only on the user's explicit yes, or, without elicitation, on the token of a first dry call."""
    if pending.noop is not None:
        return Decision(False, pending.noop)
    tool = pending.tool
    if isinstance(answer, AcceptedElicitation) and answer.data is None:  # not asked: the token path
        if is_confirmed(tool, pending.target, confirm):
            return Decision(True)
        token = token_for(tool, pending.target)
        return Decision(False, dry_run_text(tool, pending.target, pending.description), token)
    if isinstance(answer, AcceptedElicitation) and answer.data.proceed:
        return Decision(True)
    how = "said no" if isinstance(answer, AcceptedElicitation) else f"{answer.action}d the confirmation"
    return Decision(
        False,
        f"Not done (nothing changed): the user {how} when asked to {pending.description}. "
        f"Do not retry {tool} unless the user asks for it.",
    )
