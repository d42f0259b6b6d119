"""A job's runtime_env, checked on the machine running ray-mcp before anything is submitted: our schema,
local paths that must exist (they are uploaded), then Ray's own validation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ray.runtime_env import RuntimeEnv

from ray_mcp import models
from ray_mcp.errors import InvalidArgument
from ray_mcp.text import truncate_text

_RUNTIME_ENV_FIXES = {
    "working_dir": "a local directory path or a remote URI such as s3://bucket/code.zip",
    "py_modules": "a list of local directories or URIs",
    "excludes": 'a list of gitignore-style patterns, e.g. [".git", "*.ckpt"]',
    "pip": 'a list of requirement strings, e.g. ["requests==2.31"], a requirements.txt path, or a dict',
    "uv": "a list of requirement strings, a requirements.txt path, or a dict",
    "conda": "the name of a conda env, or an environment.yml as a dict",
    "env_vars": 'a mapping of names to STRING values, e.g. {"MODE": "fast", "N": "3"}',
    "config": '{"setup_timeout_seconds": 600, "eager_install": true}',
}


_RUNTIME_ENV_CONFIG_KEYS = {"setup_timeout_seconds", "eager_install", "log_files"}


def _is_uri(value: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", value))


def check_runtime_env(raw: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    """Validate a runtime_env before anything is submitted; return it (nulls dropped) and its local paths.

    Raises InvalidArgument naming the field and the fix: an unknown key, a wrong type, a local working_dir or
    py_module that does not exist.
    """
    if not raw:
        return {}, []
    if not isinstance(raw, Mapping):
        raise InvalidArgument(
            f"runtime_env must be an object such as {{'working_dir': '.', 'pip': ['requests']}}, not {raw!r}."
        )
    try:
        spec = models.RuntimeEnvSpec.model_validate(dict(raw))
    except ValidationError as exc:
        problems: dict[str, str] = {}  # one problem per field: a union type fails once per member
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "runtime_env"
            if err["type"] == "extra_forbidden":
                known = ", ".join(models.RuntimeEnvSpec.model_fields)
                problems[field] = f"unknown key runtime_env.{field}: use one of {known}"
            elif field not in problems:
                union_tags = ("list[", "dict[", "str")
                where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(union_tags))
                fix = _RUNTIME_ENV_FIXES.get(field, "see the field's description")
                got = truncate_text(repr(err.get("input")), 80)
                problems[field] = f"runtime_env.{where} has a wrong type or value (got {got}); use {fix}"
        detail = "; ".join(problems.values())
        raise InvalidArgument(f"Invalid runtime_env, nothing was submitted: {detail}.") from exc
    env = spec.model_dump(exclude_none=True)
    unknown_config = set(env.get("config") or {}) - _RUNTIME_ENV_CONFIG_KEYS
    if unknown_config:
        raise InvalidArgument(
            f"Invalid runtime_env, nothing was submitted: unknown key(s) {sorted(unknown_config)} in "
            f"runtime_env.config; use {sorted(_RUNTIME_ENV_CONFIG_KEYS)}."
        )
    local: list[str] = []
    paths = [("working_dir", env["working_dir"])] if "working_dir" in env else []
    paths += [("py_modules", p) for p in env.get("py_modules") or []]
    for field, value in paths:
        if _is_uri(value):
            continue
        path = Path(value).expanduser()
        if not path.exists():
            raise InvalidArgument(
                f"Invalid runtime_env, nothing was submitted: runtime_env.{field} {value!r} does not exist "
                f"on the machine running ray-mcp ({Path.cwd()} is the current directory). Give an existing "
                "local directory (it is zipped and uploaded) or a remote URI such as s3://bucket/code.zip."
            )
        if field == "working_dir" and not path.is_dir():
            raise InvalidArgument(
                f"Invalid runtime_env, nothing was submitted: runtime_env.working_dir {value!r} is a file; "
                "give a directory, or a .zip URI."
            )
        resolved = str(path.resolve())
        local.append(resolved)
        if field == "working_dir":
            env["working_dir"] = resolved
        else:
            env["py_modules"] = [resolved if p == value else p for p in env["py_modules"]]
    return env, local


def validate_with_ray(env: dict[str, Any]) -> None:
    """Run Ray's own RuntimeEnv validation (types of pip, conda, uv...) without submitting anything."""
    if not env:
        return
    try:
        RuntimeEnv(**env)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"Invalid runtime_env, nothing was submitted: Ray says {exc}") from exc
