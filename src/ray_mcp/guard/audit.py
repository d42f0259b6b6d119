"""The audit log: JSON lines for every write or destructive call, one written before it runs (if that fails,
the call is refused unrun) and one with its outcome."""

from __future__ import annotations

import json
import sys
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from mcp.server.context import HandlerResult
from pydantic import BaseModel

from ray_mcp.guard.redaction import redact_tree

# Arguments that name the object a call acts on, in order of preference, for the audit trail.
TARGET_ARGUMENTS = (
    "job",
    "submission_id",
    "actor_id",
    "app",
    "placement_group",
    "name",
    "node_id",
    "entrypoint",
)


class AuditLogUnwritable(ValueError):
    """The audit log cannot be written: ray-mcp refuses to start, or refuses the call (fail closed)."""


class Auditor:
    """Writes JSON lines for each write or destructive call: time, tool, target, outcome; never secrets.

    Fail closed: ``check`` at startup (the server refuses to start on an unwritable ``--audit-log``), and a
    ``started`` line is written before each call runs; if that write fails, the call is refused unrun.
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
        """Append one line; raises OSError if it could not be written in full."""
        line = json.dumps(redact_tree(record), sort_keys=True, default=str)
        with self._lock:
            if self.path is None:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
                return
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(line + "\n")
                out.flush()


def audit_target(arguments: dict[str, Any]) -> str | None:
    for key in TARGET_ARGUMENTS:
        value = arguments.get(key)
        if value not in (None, ""):
            return f"{key}={str(value)[:200]}"  # redacted with the whole line by Auditor.write
    return None


def call_outcome(result: HandlerResult) -> str:
    data = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result or {}
    if data.get("isError"):
        return "error"
    if data.get("inputRequests"):  # 2026-07-28: this round asks the user; the next one carries the answer
        return "asking_user"
    texts = [c.get("text", "") for c in data.get("content") or [] if isinstance(c, dict)]
    if any(t.startswith("Not done yet") for t in texts):
        return "dry_run"
    return "declined" if any(t.startswith("Not done (") for t in texts) else "ok"


class AuditNotes:
    """What a tool learns while it runs that the audit line must name (the apps a replace deletes)."""

    def __init__(self) -> None:
        self.target: str | None = None


AUDIT_NOTES: ContextVar[AuditNotes | None] = ContextVar("ray_mcp_audit_notes", default=None)


def note_audit_target(target: str) -> None:
    """Name the call's real target in its audit line (called from inside a write or destructive tool)."""
    notes = AUDIT_NOTES.get()
    if notes is not None:
        notes.target = target
