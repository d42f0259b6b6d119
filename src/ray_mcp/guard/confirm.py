"""Confirmation of destructive calls: ask the user (elicitation), else a stateless token bound to the object.

When the client supports elicitation, the user is asked, with the exact object and cluster named, and the
tool acts only on an explicit yes. Otherwise a destructive tool called without ``confirm`` changes nothing: it
describes what it would do and returns a token. Calling it again with that token carries the change out.

A token is an HMAC, under a per-process secret, of the tool, the cluster (its name and dashboard URL), the
target, the target's *instance* (a job's start time and job id, an actor's restarts and pid, a Serve app's
deploy time and config, a Kubernetes object's uid and resourceVersion), the exact *change* the user was shown
(``change_digest`` of its diff: a token for "replicas 3 -> 0" does not carry "replicas 3 -> 0, maxReplicas 5 ->
0", nor a smaller or "equivalent" change), and of its expiry time (``Settings.confirm_token_ttl_s``, default ``limits.CONFIRM_TOKEN_TTL_S``: 5 minutes). So it
needs no server-side state, cannot be used on another cluster, on another object, or on a new object that
reuses the old one's name (a resubmitted submission id, a restarted actor, a redeployed app), and dies with the
server process. The elicitation question names the same cluster and instance, and a tool checks right before
acting that the instance is still the one confirmed.

A destructive tool has two parameters filled by ``Resolve`` before its body runs: ``pending``, from the tool's
plan (fetch the object, say what would change: a ``Pending``), and ``answer``, from ``asking(plan)`` (the
user's answer, or nothing on the token path). The body calls ``decide``, acts only on ``Decision.proceed``,
and calls ``ensure_unchanged`` with a fresh plan first.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from ray_mcp.errors import InvalidArgument
from ray_mcp.guard.audit import note_audit
from ray_mcp.limits import CONFIRM_TOKEN_TTL_S

# Per process, unless replicas share one (share_secret): a token must be honoured by the replica it reaches.
_SECRET = bytearray(secrets.token_bytes(32))
_PREFIX = "confirm-"


def share_secret(key: bytes) -> None:
    """Sign tokens under a key every replica holds (--replica-key-file), not this process's own."""
    _SECRET[:] = hashlib.sha256(b"ray-mcp confirm tokens\0" + key).digest()


@dataclass(frozen=True)
class ClusterRef:
    """The cluster a confirmation is for: its name (of the clusters file, or "default") and dashboard URL."""

    name: str
    url: str

    def describe(self) -> str:
        return f"on cluster {self.name!r} ({self.url})"


def _digest(binding: str, expires: int, secret: bytes | bytearray) -> str:
    return hmac.new(secret, f"{binding}\0{expires}".encode(), hashlib.sha256).hexdigest()[:32]


def token_for(
    binding: str,
    *,
    ttl_s: float = CONFIRM_TOKEN_TTL_S,
    now: float | None = None,
    secret: bytes | bytearray = _SECRET,
) -> str:
    """A token for ``binding`` (tool, cluster, target, instance: ``Pending.binding``) valid for ``ttl_s``."""
    expires = int((time.time() if now is None else now) + ttl_s)
    return f"{_PREFIX}{expires}-{_digest(binding, expires, secret)}"


def is_confirmed(
    pending: Pending, confirm: str | None, *, now: float | None = None, secret: bytes | bytearray = _SECRET
) -> bool:
    """True if ``confirm`` is a live token for exactly this pending change; raises if a wrong one was given.

    ``None`` means "dry run": the caller should describe the change and hand out a token.
    """
    if confirm is None:
        return False
    expires_text, _, digest = confirm.removeprefix(_PREFIX).partition("-")
    expires = int(expires_text) if expires_text.isdigit() and len(expires_text) < 12 else None
    valid = expires is not None and hmac.compare_digest(digest, _digest(pending.binding, expires, secret))
    where = pending.cluster.describe() if pending.cluster else ""
    if valid and expires is not None and (time.time() if now is None else now) <= expires:
        return True
    if valid:
        raise InvalidArgument(
            f"The confirm token for {pending.tool} on {pending.target} {where} has expired; nothing was changed. "
            f"Call {pending.tool} without confirm for a fresh token, ask the user again, and use it within "
            "minutes."
        )
    raise InvalidArgument(
        f"The confirm token does not match {pending.tool} on {pending.target} {where}; nothing was changed. "
        "A token is bound to one cluster, one object, that object's instance and the exact change shown: it "
        "was made for another cluster, object or change (any other arguments, a smaller change included), or "
        "the object changed since (a new job reusing the submission id, a restarted actor, a redeployed app, "
        "a Kubernetes object at a new resourceVersion), or it is not a token. Call "
        f"{pending.tool} without confirm to see the change as it stands now and get a fresh token."
    )


def dry_run_text(pending: Pending, token: str, ttl_s: float) -> str:
    where = f" {pending.cluster.describe()}" if pending.cluster else ""
    return (
        f"Not done yet (nothing changed): {pending.tool} would {pending.description}{where}.\n"
        f"To proceed, ask the user, then call {pending.tool} again with the same arguments and "
        f"confirm={token!r} within {ttl_s / 60:g} minutes."
    )


# -- one decision for every destructive tool: the user's answer (elicitation), else the token -------------


class Approval(BaseModel):
    """The form shown to the user: one explicit yes/no."""

    proceed: bool = Field(title="Proceed", description="Yes: carry it out now. No: change nothing.")


@dataclass(frozen=True)
class Pending:
    """A destructive change a tool is about to make, found out before anything changes.

    ``target`` names the object (a submission id, an actor id, an app name); ``instance`` says which
    incarnation of it (a job's start time, an actor's restarts and pid, an app's deploy time and config, a
    Kubernetes object's uid and resourceVersion); ``cluster`` the cluster it lives in; ``change`` the digest of
    the exact change (change_digest). All four bind the confirm token; the first three appear in the question,
    with the change in ``description``.
    ``description`` names the exact object for the user (id, class, name, job, entrypoint...); ``noop`` is the
    answer when there is nothing to do (an actor already dead); ``required`` is False when the call turns out
    not to be destructive (a replace that removes no app). ``subject`` carries what the tool fetched (the
    actor, the job), so the body need not fetch it again.
    """

    tool: str
    target: str
    description: str
    subject: Any = field(default=None, compare=False)
    noop: str | None = None
    instance: str = ""
    cluster: ClusterRef | None = None
    required: bool = True
    ttl_s: float = CONFIRM_TOKEN_TTL_S
    change: str = (
        ""  # change_digest of the exact change shown (its diff); "" when the tool and target say it all
    )

    @property
    def binding(self) -> str:
        cluster = (self.cluster.name, self.cluster.url) if self.cluster else ("", "")
        return "\0".join((self.tool, *cluster, self.target, self.instance, self.change))


def change_digest(diff: Any) -> str:
    """The digest a confirmation binds for a change: of its diff as canonical JSON (keys sorted), so the same
    change always gives the same digest, and any other change (one field more or less) another."""
    canonical = json.dumps(diff, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def ensure_unchanged(confirmed: Pending, now: Pending) -> None:
    """Raise unless the object is still the instance that was confirmed (checked right before acting)."""
    if now.binding != confirmed.binding:
        raise InvalidArgument(
            f"Not done (nothing changed): {confirmed.target} changed since it was confirmed (now: {now.description}"
            f"{' ' + now.cluster.describe() if now.cluster else ''}). Call {confirmed.tool} again without confirm "
            "to see the change as it stands and confirm that."
        )


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
    protocols, an ``InputRequiredResult`` round on 2026-07-28) and injects the answer into the tool. The
    question names the cluster and the instance: on 2026-07-28 an answer counts only for the exact question
    it was given to, so a later round for another cluster or a changed object asks again.
    """
    if pending.noop is not None or not pending.required or not supports_elicitation(ctx):
        return None
    where = f" {pending.cluster.describe()}" if pending.cluster else ""
    return Elicit(f"ray-mcp asks: {pending.description}{where}? This cannot be undone.", Approval)


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
    if not pending.required:
        return Decision(True)
    tool = pending.tool
    if isinstance(answer, AcceptedElicitation) and answer.data is None:  # not asked: the token path
        if is_confirmed(pending, confirm):
            return Decision(True)
        token = token_for(pending.binding, ttl_s=pending.ttl_s)
        note_audit(outcome="dry_run")
        return Decision(False, dry_run_text(pending, token, pending.ttl_s), token)
    if isinstance(answer, AcceptedElicitation) and answer.data.proceed:
        return Decision(True)
    note_audit(outcome="declined")
    how = "said no" if isinstance(answer, AcceptedElicitation) else f"{answer.action}d the confirmation"
    where = f" {pending.cluster.describe()}" if pending.cluster else ""
    return Decision(
        False,
        f"Not done (nothing changed): the user {how} when asked to {pending.description}{where}. "
        f"Do not retry {tool} unless the user asks for it.",
    )
