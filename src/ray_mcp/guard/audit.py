"""The audit log: one structured JSON-lines record per write or destructive call, written before it runs (if
that fails, the call is refused unrun), and again, complete, with its outcome.

Each record is one JSON object: values from the caller or the cluster (an app name, an entrypoint) are JSON
strings in their own fields, so no name can make a record read as another call or another change. What a
record holds is whole; the few bounds there are (``AUDIT_ARGUMENT_CHARS`` per string, ``AUDIT_ERROR_CHARS``)
are marked where they cut and listed in the record's ``cut``.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sys
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ray_mcp.guard.redaction import redact_tree
from ray_mcp.limits import AUDIT_ARGUMENT_CHARS, AUDIT_ERROR_CHARS
from ray_mcp.text import cut_counted

if TYPE_CHECKING:  # the SDK is not imported to check --audit-log before the server loads
    from mcp.server.context import HandlerResult, ServerRequestContext

# Arguments that name the objects a call acts on: each one given is a target of the record.
TARGET_ARGUMENTS = (
    "job",
    "submission_id",
    "actor_id",
    "app",
    "placement_group",
    "name",
    "node_id",
    "rayjob",
    "group",
)


def _serve_apps(arguments: dict[str, Any]) -> dict[str, Any]:
    config = arguments.get("config")
    apps = config.get("applications") if isinstance(config, dict) else None
    names = [str(a.get("name", "default")) for a in apps or [] if isinstance(a, dict)]
    replacing = {"deletes": "every app not in the config"} if arguments.get("replace") else {}
    return {"apps": names, **replacing}


def _new_job(arguments: dict[str, Any]) -> dict[str, Any]:
    if arguments.get("submission_id"):
        return {}
    return {"job": "a new job (Ray names it; the outcome record has its id)"}


def _kube_object(arguments: dict[str, Any]) -> dict[str, Any]:
    """kuberay_apply's object: its name, else the manifest's, else the address's own object."""
    manifest = arguments.get("manifest")
    meta = manifest.get("metadata") if isinstance(manifest, dict) else None
    if arguments.get("name"):
        named = {}
    elif isinstance(meta, dict) and meta.get("name"):
        named = {"object": f"{manifest.get('kind')} {meta.get('namespace') or ''}/{meta['name']}"}  # type: ignore[union-attr]
    elif manifest:
        named = {"object": "the object of the manifest given (YAML)"}
    else:
        named = {"object": "the KubeRay object of the address"}
    where = {k: arguments[k] for k in ("kind", "namespace", "context") if arguments.get(k)}
    return {**named, **where}


# The targets of write and destructive tools that no argument names: derived from the arguments, so that the
# write-ahead record names what the call will change before it runs (tests/test_audit_targets.py checks that
# every write and destructive tool's record names one).
DERIVED_TARGETS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "serve_deploy": _serve_apps,
    "submit_job": _new_job,
    "kuberay_apply": _kube_object,
}


def targets_of(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What a call of ``tool`` will change, as its arguments name it."""
    found = {k: arguments[k] for k in TARGET_ARGUMENTS if arguments.get(k) not in (None, "")}
    derive = DERIVED_TARGETS.get(tool)
    return {**found, **derive(arguments)} if derive is not None else found


class AuditLogUnwritable(ValueError):
    """The audit log cannot be written: ray-mcp refuses to start, or refuses the call (fail closed)."""


class Auditor:
    """Writes the JSON-lines records of write and destructive calls; never secrets.

    Fail closed: ``check`` at startup (the server refuses to start on an unwritable ``--audit-log``), and a
    ``started`` record is written before each call runs; if that write fails, the call is refused unrun.
    Lines are written whole under a lock, from worker threads (a slow disk never blocks the event loop).
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise AuditLogUnwritable unless the audit log can be appended to (created if missing)."""
        if self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8"):
                pass
        except OSError as exc:
            raise AuditLogUnwritable(
                f"cannot write the audit log {self.path} ({exc.strerror or exc}); fix its directory or "
                "permissions, or pass another --audit-log (RAY_MCP_AUDIT_LOG)"
            ) from exc

    def write(self, record: dict[str, Any]) -> None:
        """Append one line (secrets masked); raises OSError if it could not be written in full."""
        line = json.dumps(redact_tree(record), sort_keys=True, default=str, ensure_ascii=True)
        with self._lock:
            if self.path is None:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
                return
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
                out.flush()


# -- who calls --------------------------------------------------------------------------------------------

_SESSION_IDS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def caller_of(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """Who made the call, without any secret: the transport, the MCP session (its id over streamable HTTP,
    else one ray-mcp gives the session), the bearer token's fingerprint (never the token) and what the
    client says it is."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    caller: dict[str, Any] = {"transport": "http" if headers is not None else "stdio"}
    session = headers.get("mcp-session-id") if headers is not None else None
    if session is None:
        try:
            session = _SESSION_IDS.setdefault(ctx.session, secrets.token_hex(8))
        except TypeError:  # a session object that cannot be weakly referenced: none to name
            session = None
    caller["session"] = session
    authorization = headers.get("authorization") if headers is not None else None
    if authorization:
        caller["token_fingerprint"] = "sha256:" + hashlib.sha256(authorization.encode()).hexdigest()[:16]
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    if info is not None:
        caller["client"] = {"name": info.name, "version": info.version}
    return caller


# -- one call's record --------------------------------------------------------------------------------------


@dataclass
class AuditNotes:
    """What a tool learns while it runs that its record must hold: the objects it really acts on (the apps a
    replace deletes) and the ids it creates (a submission id)."""

    targets: dict[str, Any] = field(default_factory=dict)
    created: dict[str, Any] = field(default_factory=dict)
    cluster_url: str | None = None
    # Set by the confirmation's decision when nothing was done: "dry_run" (a token was handed out) or
    # "declined" (the user said no). A kind set where the rule decides it, never read back from our text.
    outcome: Literal["dry_run", "declined"] | None = None


AUDIT_NOTES: ContextVar[AuditNotes | None] = ContextVar("ray_mcp_audit_notes", default=None)


def note_audit(
    *,
    targets: dict[str, Any] | None = None,
    created: dict[str, Any] | None = None,
    cluster_url: str | None = None,
    outcome: Literal["dry_run", "declined"] | None = None,
) -> None:
    """Add to the current call's record (called from inside a write or destructive tool)."""
    notes = AUDIT_NOTES.get()
    if notes is None:
        return
    notes.targets.update(targets or {})
    notes.created.update(created or {})
    if cluster_url is not None:
        notes.cluster_url = cluster_url
    if outcome is not None:
        notes.outcome = outcome


def whole_arguments(arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments as given, each string cut at AUDIT_ARGUMENT_CHARS with a mark saying how much is left
    out (and the paths of those cut), so a record stays one bounded line and never hides that it was cut."""
    cut: list[str] = []

    def keep(value: Any, path: str) -> Any:
        if isinstance(value, str) and len(value) > AUDIT_ARGUMENT_CHARS:
            cut.append(path)
            return cut_counted(value, AUDIT_ARGUMENT_CHARS)
        if isinstance(value, dict):
            return {str(k): keep(v, f"{path}.{k}") for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [keep(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    return keep(arguments, "arguments"), cut


def start_record(
    ctx: ServerRequestContext[Any, Any],
    tool: str,
    kind: str,
    arguments: dict[str, Any],
    cluster: dict[str, str | None],
) -> dict[str, Any]:
    """The record written before the call runs: everything known then."""
    kept, cut = whole_arguments(arguments)
    targets = targets_of(tool, arguments)
    record: dict[str, Any] = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "event": "ray-mcp.audit",
        "call": secrets.token_hex(8),  # pairs the "started" record with the outcome record
        "tool": tool,
        "kind": kind,
        "outcome": "started",
        "caller": caller_of(ctx),
        "cluster": {k: v for k, v in cluster.items() if v},
        "targets": targets,
        "arguments": kept,
    }
    if cut:
        record["cut"] = cut
    return record


def finish_record(
    record: dict[str, Any],
    notes: AuditNotes,
    duration_s: float,
    result: HandlerResult = None,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """The record once the call is over: its outcome, what it acted on and created, its error."""
    out = dict(record)
    out["time"] = datetime.now(UTC).isoformat(timespec="milliseconds")
    out["duration_ms"] = round(duration_s * 1000)
    out["targets"] = {**record["targets"], **notes.targets}
    if notes.cluster_url:
        out["cluster"] = {**record["cluster"], "url": notes.cluster_url}
    if notes.created:
        out["created"] = dict(notes.created)
    if error is not None:
        out.update(outcome="error", error=type(error).__name__)
        return out
    out["outcome"] = call_outcome(result, notes)
    if out["outcome"] == "error":
        message = " ".join(_texts(result))
        if len(message) > AUDIT_ERROR_CHARS:
            out["cut"] = [*out.get("cut", []), "error"]
            message = cut_counted(message, AUDIT_ERROR_CHARS)
        out["error"] = message
    return out


def _texts(result: HandlerResult) -> list[str]:
    data = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result or {}
    return [str(c.get("text", "")) for c in data.get("content") or [] if isinstance(c, dict)]


def call_outcome(result: HandlerResult, notes: AuditNotes) -> str:
    data = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result or {}
    if data.get("isError"):
        return "error"
    if data.get("inputRequests"):  # 2026-07-28: this round asks the user; the next one carries the answer
        return "asking_user"
    return notes.outcome or "ok"
