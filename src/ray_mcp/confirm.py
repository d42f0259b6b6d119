"""Confirmation of destructive calls, with a stateless token bound to the exact object.

A destructive tool called without ``confirm`` changes nothing: it describes what it would do and returns a
token. Calling it again with that token carries the change out. The token is an HMAC of the tool name and the
target under a per-process secret, so it needs no server-side state, cannot be reused for another object, and
dies with the server process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

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
