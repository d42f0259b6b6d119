"""What a process ray-mcp starts inherits from its environment: only what that process needs.

ray-mcp's environment may hold its own bearer token (``RAY_MCP_AUTH_TOKEN``), the header values it sends to
clusters (``RAY_MCP_DASHBOARD_HEADERS``), its other settings, and Ray's token (``RAY_AUTH_TOKEN``). A child
inherits the whole environment unless told otherwise, and the embedded head hands its own to every worker, so
any job submitted to it could read ray-mcp's token in ``os.environ``. So every child gets one of two
environments, made here:

* ``tool_env``, for a tool that runs no code of the user's (py-spy, Prometheus): the path and locale only,
  plus the variables it names.
* ``ray_env``, for Ray processes that run the user's jobs (the embedded head): the user's environment, less
  ray-mcp's own settings and Ray's token as a variable. When the head needs Ray's token, it gets the file form
  (``RAY_AUTH_TOKEN_PATH``, a file only its user can read) rather than a variable every process it starts
  inherits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

# What any program needs to run and to write text: where programs are, who and where the user is, locale.
BASE_NAMES = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TMP", "TEMP"})
BASE_PREFIXES = ("LC_",)
OURS_PREFIX = (
    "RAY_MCP_"  # ray-mcp's settings: its token, header values, clusters file ... no child needs them
)
RAY_TOKEN = "RAY_AUTH_TOKEN"
RAY_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"
TOKEN_FILE = "ray-mcp-auth-token"  # the file form of Ray's token, in the head's own temp dir


def tool_env(needs: Iterable[str] = (), *, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a tool that runs no user code: the base variables and the named ``needs`` only."""
    env = os.environ if source is None else source
    wanted = set(needs)
    return {k: v for k, v in env.items() if k in BASE_NAMES or k.startswith(BASE_PREFIXES) or k in wanted}


def ray_env(
    temp_dir: Path, *, source: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of Ray processes that run the user's jobs (the embedded head): ``source`` (this
    process's environment) and ``extra`` (what the caller sets for this head), less ray-mcp's settings, with
    Ray's token, if either gives one, moved to a file in ``temp_dir`` (RAY_AUTH_TOKEN_PATH)."""
    env = {
        k: v for k, v in (os.environ if source is None else source).items() if not k.startswith(OURS_PREFIX)
    }
    env.update(extra or {})
    token = env.pop(RAY_TOKEN, None)
    if token:
        path = temp_dir / TOKEN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(token)
        env[RAY_TOKEN_PATH] = str(path)
    return env
