"""Local files a job's runtime_env makes ray-mcp read: only from the directories the operator named.

Ray's Jobs SDK reads local paths on the machine that submits, that is, on the machine running ray-mcp:

* ``working_dir`` and ``py_modules`` (directories, or .whl/.zip files) are zipped and uploaded to the cluster.
  Ray's packaging (``ray._private.runtime_env.packaging._dir_travel`` and ``_zip_files``) follows symlinks:
  ``Path.is_dir``/``iterdir`` descend into linked directories and ``ZipFile.write`` stores a linked file's
  target. It skips what ``excludes``, ``.gitignore`` and ``.rayignore`` exclude.
* ``pip`` and ``uv`` given as a string are a requirements file, and ``conda`` ending in .yaml/.yml an environment
  file: Ray reads them here and sends their content in the runtime_env, where get_job shows it.

A remote client (HTTP) could so read any file the server can. Every such path must resolve (symlinks and
``..`` resolved) under an upload root (``--upload-root``, RAY_MCP_UPLOAD_ROOTS; default: the starting
directory on stdio, none over HTTP), and every symlink Ray would follow inside an uploaded directory must
resolve under a root too. The checked, resolved paths are what is handed to Ray.

Not covered: hard links (they need write access inside a root) and a file swapped for a symlink between this
check and Ray's packaging (it needs write access inside a root too).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ray_mcp import sdk_private
from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import MAX_UPLOAD_ENTRIES

# Ray's switch to ignore .gitignore files when packaging (ray_constants.RAY_RUNTIME_ENV_IGNORE_GITIGNORE).
IGNORE_GITIGNORE_ENV = "RAY_RUNTIME_ENV_IGNORE_GITIGNORE"
UPLOAD_ROOT_HINT = "--upload-root DIR (repeatable; env RAY_MCP_UPLOAD_ROOTS)"

# Ray's walk logs "Issue with path" at ERROR before re-raising our refusal: keep that off stderr.
_RAY_WALK_LOG = logging.getLogger("ray_mcp.uploads.walk")
_RAY_WALK_LOG.propagate = False
_RAY_WALK_LOG.addHandler(logging.NullHandler())


def is_uri(value: str) -> bool:
    head, sep, _ = value.partition("://")
    return bool(sep) and head[:1].isalpha() and all(c.isalnum() or c in "+.-" for c in head)


def _roots_text(roots: list[Path]) -> str:
    return ", ".join(str(r) for r in roots) if roots else "none"


def _outside(
    field: str, given: str, resolved: Path, roots: list[Path], *, link: Path | None = None
) -> InvalidArgument:
    if not roots:
        where = (
            "this server allows no local uploads (over HTTP they are off unless the operator names upload "
            f"roots with {UPLOAD_ROOT_HINT})"
        )
    else:
        where = f"it is outside the upload roots of this server ({_roots_text(roots)}; set with {UPLOAD_ROOT_HINT})"
    what = (
        f"runtime_env.{field} {given!r} holds a symlink {str(link)!r} that leads to {str(resolved)!r}, which "
        "Ray would upload; " + where.replace("it is", "that is")
        if link is not None
        else f"runtime_env.{field} {given!r} (resolved: {str(resolved)!r}) would be read on the machine running "
        f"ray-mcp, but {where}"
    )
    return InvalidArgument(
        f"Refused, nothing was submitted: {what}. Use a path under an upload root, a remote URI "
        "(s3://bucket/code.zip, https://…/code.zip), or ask the operator to add a root."
    )


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _resolve(field: str, given: str, *, strict: bool) -> Path:
    try:
        return Path(given).expanduser().resolve(strict=strict)
    except (OSError, RuntimeError) as exc:  # missing, or a symlink loop
        raise InvalidArgument(
            f"Invalid runtime_env, nothing was submitted: runtime_env.{field} {given!r} does not exist or cannot "
            f"be read on the machine running ray-mcp ({type(exc).__name__}: {getattr(exc, 'strerror', None) or exc})."
            " Give an existing local path under an upload root, or a remote URI such as s3://bucket/code.zip."
        ) from exc


def confine_uploads(env: Mapping[str, Any], roots: list[Path]) -> dict[str, Any]:
    """Check every local path Ray would read for this runtime_env; return it with those paths resolved.

    Raises InvalidArgument naming the field, the path and the option (--upload-root) when one is outside the
    roots. Runs before any other check of the runtime_env, so that no answer tells whether a path outside the
    roots exists. Blocking (it walks directories): run it in a worker thread.
    """
    out = dict(env)
    working_dir = out.get("working_dir")
    if isinstance(working_dir, str) and not is_uri(working_dir):
        out["working_dir"] = str(_check_tree("working_dir", working_dir, roots, out.get("excludes")))
    modules = out.get("py_modules")
    if isinstance(modules, list):
        out["py_modules"] = [
            str(_check_tree("py_modules", m, roots, out.get("excludes")))
            if isinstance(m, str) and not is_uri(m)
            else m
            for m in modules
        ]
    for field in ("pip", "uv"):
        value = out.get(field)
        if isinstance(value, str) and not is_uri(value):
            out[field] = str(_check_file(field, value, roots))
    conda = out.get("conda")
    if isinstance(conda, str) and Path(conda).suffix in (".yaml", ".yml"):
        out["conda"] = str(_check_file("conda", conda, roots))
    return out


def _check_file(field: str, given: str, roots: list[Path]) -> Path:
    # The roots first, on the path as far as it exists: a refusal must not tell whether a file exists.
    resolved = _resolve(field, given, strict=False)
    if not _under(resolved, roots):
        raise _outside(field, given, resolved, roots)
    return _resolve(field, given, strict=True)


def _check_tree(field: str, given: str, roots: list[Path], excludes: Any) -> Path:
    """The directory (or file), resolved, after checking every symlink Ray's packaging would follow in it."""
    resolved = _check_file(field, given, roots)
    if not resolved.is_dir():
        return resolved
    seen = 0

    def check(path: Path) -> None:
        nonlocal seen
        seen += 1
        if seen > MAX_UPLOAD_ENTRIES:
            raise InvalidArgument(
                f"Refused, nothing was submitted: runtime_env.{field} {given!r} has more than "
                f"{MAX_UPLOAD_ENTRIES:,} files and directories. Leave large data out with runtime_env.excludes "
                "or a .rayignore file, or upload it to remote storage."
            )
        if not path.is_symlink():
            return
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return  # a dangling link: Ray cannot read it either (and fails the upload itself)
        if not _under(target, roots):
            raise _outside(field, given, target, roots, link=path.relative_to(resolved.parent))
        if target.is_dir() and any(target == a or a.is_relative_to(target) for a in _chain(path, resolved)):
            raise InvalidArgument(
                f"Refused, nothing was submitted: runtime_env.{field} {given!r} holds a symlink "
                f"{str(path.relative_to(resolved.parent))!r} to a directory that contains it (a loop Ray's "
                "packaging would never leave). Remove the link, or exclude it with runtime_env.excludes."
            )

    _travel(resolved, excludes if isinstance(excludes, list) else [], check)
    return resolved


def _chain(path: Path, top: Path) -> list[Path]:
    """The physical directories from ``top`` down to ``path``'s parent (what a link must not point back to)."""
    out = [top]
    current = top
    for part in path.parent.relative_to(top).parts if path.parent != top else ():
        current = (current / part).resolve()
        out.append(current)
    return out


def _travel(top: Path, excludes: list[str], check: Callable[[Path], None]) -> None:
    """Walk ``top`` exactly as Ray's packaging does (same excludes and ignore files), calling ``check``."""

    include_gitignore = os.environ.get(IGNORE_GITIGNORE_ENV, "0") != "1"
    sdk_private.walk_like_ray_packaging(
        top, excludes, check, include_gitignore=include_gitignore, logger=_RAY_WALK_LOG
    )


# The most a working_dir or py_module may weigh zipped: Ray uploads it through the GCS (its gRPC message limit).
UPLOAD_LIMIT_BYTES = sdk_private.RAY_UPLOAD_LIMIT_BYTES


def tree_bytes(top: Path, excludes: Any) -> int:
    """What the files Ray's packaging would take from ``top`` weigh, unzipped (its excludes and ignore files)."""
    if not top.is_dir():
        return top.stat().st_size
    total = 0

    def add(path: Path) -> None:
        nonlocal total
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size

    _travel(top, excludes if isinstance(excludes, list) else [], add)
    return total
