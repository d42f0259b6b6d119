"""What leaves the server is safe to show: known secrets and secret shapes masked, control characters made
visible, structured content bounded.

Used by the one choke point in middleware.py (every message the server sends, whatever its method) and by the
logging hook (the server's own stderr). One room per concern:

* names.py: which fields and variables hold secrets (``*SECRET*``, ``*_TOKEN``, every ``env_vars`` value).
* known.py: the matcher of known secret *values* (Aho-Corasick, exact, case included). Values of 4 characters
  or more are masked wherever they occur; shorter ones where they stand as whole words.
* registry.py: ``SECRETS``, the process-wide registry of the values the server knows of (Ray's token,
  ray-mcp's bearer token, configured header values, every job's and Serve app's ``env_vars`` values as the
  cluster reports them), never what a caller sends. Thread-safe and bounded in bytes.
* shapes.py and detectors.py: secret *shapes*, ours and detect-secrets' plugins, behind one anchor pass.
* controls.py: ``escape_controls`` (ESC, bidi overrides, zero-width characters made visible escapes).
* masking.py: the pipeline for a string and for a structure (``clean_text``, ``redact_tree``, ...).
* logs.py: the hook that masks every log record and uncaught exception of the process.

This package's top level is what other packages import.
"""

from __future__ import annotations

from ray_mcp.guard.bounds import bound_structured
from ray_mcp.guard.redaction.controls import escape_controls
from ray_mcp.guard.redaction.detectors import DETECTORS, detected
from ray_mcp.guard.redaction.logs import install_log_redaction
from ray_mcp.guard.redaction.masking import clean_text, redact, redact_text, redact_tree
from ray_mcp.guard.redaction.names import SECRET_KEY, is_secret_key, secret_values
from ray_mcp.guard.redaction.registry import (
    CONFIGURED,
    NOT_SECRET_VALUES,
    SECRETS,
    SecretRegistry,
    credential_values,
    hold_job,
    job_owner,
    remember_settings_secrets,
)
from ray_mcp.guard.redaction.shapes import REDACTED

__all__ = [
    "CONFIGURED",
    "DETECTORS",
    "NOT_SECRET_VALUES",
    "REDACTED",
    "SECRETS",
    "SECRET_KEY",
    "SecretRegistry",
    "bound_structured",
    "clean_text",
    "credential_values",
    "detected",
    "escape_controls",
    "hold_job",
    "install_log_redaction",
    "is_secret_key",
    "job_owner",
    "redact",
    "redact_text",
    "redact_tree",
    "remember_settings_secrets",
    "secret_values",
]
