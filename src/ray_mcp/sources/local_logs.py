"""A log of a node that runs on this machine, read straight from its file instead of through the dashboard.

The dashboard reads a log through the node's agent (HTTP, then gRPC, then the file) on every call; when the
node runs here, the same bytes are on this machine's disk. Which directory holds them comes from what the
cluster reports about the node (its GcsNodeInfo, through the dashboard's ``/nodes/<id>``): its address must be
one of this host's, its raylet's socket must exist here, and its session directory must hold ``logs``. Never a
guessed ``/tmp/ray`` path.

Nothing outside that directory is ever read: a name with ``..`` or an absolute path elsewhere is refused, and
the file is opened one path component at a time without following any link (``O_NOFOLLOW`` under a directory
descriptor), so a link cannot lead out of it either. A link that stays inside is left to the dashboard. The
tail is read from the end in blocks and only its last ``keep`` bytes are kept; what is returned is what the
dashboard's ``/api/v0/logs/file?lines=N`` would have streamed (Ray's log agent: the last N lines, a last line
without a newline counting as one), so the answer is the same either way.

Every function here blocks on the file system: run them in a worker thread.
"""

from __future__ import annotations

import datetime
import errno
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ray_mcp.errors import InvalidArgument
from ray_mcp.sources.hosts import local_addresses

BLOCK = 64 * 1024
# How far back from the end the start of the asked lines is looked for; past it (a few very long lines), the
# dashboard reads the file instead, so that a local read stays bounded.
SCAN_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LogDir:
    """A node's logs directory on this machine: its real path, and the path the cluster reports."""

    real: Path
    reported: Path


def node_logs_dir(raylet: Mapping[str, Any], addresses: set[str] | None = None) -> LogDir | None:
    """The logs directory of the node whose GcsNodeInfo (camelCase, as ``/nodes/<id>`` reports it under
    ``raylet``) says it runs on this machine; None when it does not, or when this machine cannot see its files."""
    ip, session, socket_name = (
        raylet.get(k) for k in ("nodeManagerAddress", "sessionDir", "rayletSocketName")
    )
    if not all(isinstance(v, str) and v for v in (ip, session, socket_name)):
        return None
    if ip not in (addresses if addresses is not None else local_addresses()):
        return None
    session_dir = Path(str(session))
    if not session_dir.is_absolute() or not Path(str(socket_name)).is_absolute():
        return None
    try:
        if not stat.S_ISSOCK(os.stat(str(socket_name)).st_mode):  # the raylet of that session runs here
            return None
        logs = Path(os.path.realpath(session_dir / "logs"))
        if not stat.S_ISDIR(os.stat(logs).st_mode):
            return None
    except OSError:
        return None
    return LogDir(real=logs, reported=session_dir / "logs")


def _parts_inside(logs_dir: Path, filename: str, reported: Path) -> list[str]:
    """The path components of ``filename`` under ``logs_dir``; InvalidArgument when it names a place outside."""
    outside = InvalidArgument(
        f"{filename!r} is not a file inside the node's Ray log directory: give a name relative to it "
        "(raylet.out, job-driver-<id>.log, old/raylet.out, ...), without '..'."
    )
    path = PurePosixPath(filename)
    if path.is_absolute():
        for root in (logs_dir, reported):
            if path.is_relative_to(root) and path != PurePosixPath(root):
                path = path.relative_to(root)
                break
        else:
            raise outside
    parts = [p for p in path.parts if p not in ("", ".")]
    if not parts or ".." in parts:
        raise outside
    return parts


def open_log(where: LogDir, filename: str) -> int | None:
    """A read-only descriptor of the regular file ``filename`` inside ``logs_dir``, opened without following
    any link. None when it is not a regular file of that directory here (missing, a directory, a link that stays
    inside, unreadable): the dashboard answers then, with its own error. InvalidArgument when the name, or a
    link on its way, leads outside the directory."""
    logs_dir = where.real
    parts = _parts_inside(logs_dir, filename, where.reported)
    fd = os.open(logs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _leads_outside(logs_dir, parts[: i + 1]):
                    raise InvalidArgument(
                        f"{filename!r} is a link to a place outside the node's Ray log directory; ray-mcp does "
                        "not read it. Give the name of a log file in that directory."
                    ) from exc
                return None
            os.close(fd)
            fd = child
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        opened, fd = fd, -1
        return opened
    finally:
        if fd >= 0:
            os.close(fd)


def _leads_outside(logs_dir: Path, parts: list[str]) -> bool:
    real = Path(os.path.realpath(logs_dir.joinpath(*parts)))
    return not real.is_relative_to(logs_dir)


def read_tail(
    fd: int, lines: int, keep: int, *, scan_bytes: int = SCAN_BYTES, block: int = BLOCK
) -> tuple[bytes, int] | None:
    """What Ray's log agent streams for the last ``lines`` lines of the open file: (its last ``keep`` bytes, its
    whole size). None if the file shrank while being read, or if the start of those lines lies more than
    ``scan_bytes`` before the end."""
    size = os.fstat(fd).st_size
    if size == 0:
        return b"", 0
    # The newline to start after, counted from the end: a last line without one counts as a line.
    need = lines + 1 if os.pread(fd, 1, size - 1) == b"\n" else lines
    kept: list[bytes] = []  # newest block first
    kept_bytes = 0
    found = 0
    pos = size
    start = 0
    while pos > 0:
        n = min(block, pos)
        pos -= n
        chunk = os.pread(fd, n, pos)
        if len(chunk) != n:
            return None  # truncated under us (rotated, rewritten): let the dashboard read it
        count = chunk.count(b"\n")
        if found + count >= need:
            cut = len(chunk)
            for _ in range(need - found):
                cut = chunk.rindex(b"\n", 0, cut)
            start = pos + cut + 1
            if kept_bytes < keep:
                kept.append(chunk[cut + 1 :])
            break
        found += count
        if kept_bytes < keep:
            kept.append(chunk)
            kept_bytes += n
        if size - pos >= scan_bytes:
            return None
    data = b"".join(reversed(kept))
    total = size - start
    return data[-keep:] if len(data) > keep else data, total


def tail_of(where: LogDir, filename: str, lines: int, keep: int) -> tuple[bytes, int] | None:
    """open_log + read_tail: the tail of ``filename`` in the node's logs directory, or None to let the dashboard
    read it."""
    fd = open_log(where, filename)
    if fd is None:
        return None
    try:
        return read_tail(fd, lines, keep)
    finally:
        os.close(fd)


def missing(where: LogDir, filename: str) -> bool:
    """True when nothing of that name is in the node's logs directory: no file, directory or link (a name that
    leads outside is refused, as by open_log)."""
    return not os.path.lexists(where.real.joinpath(*_parts_inside(where.real, filename, where.reported)))


def is_pattern(filename: str) -> bool:
    """A filename with glob characters: tail_logs lists the files it matches instead of reading one."""
    return any(c in filename for c in "*?[")


@dataclass(frozen=True)
class FileStat:
    """A log file's size and modification time (UTC, to the second); None when it is not a plain file here."""

    name: str
    bytes: int | None = None
    modified: str | None = None


def stat_files(where: LogDir, names: list[str]) -> list[FileStat]:
    """Size and modification time of each listed file of the logs directory, newest first (no link is
    followed; a name that is not a plain file inside it keeps no size)."""
    out = []
    for name in names:
        try:
            path = where.real
            for part in _parts_inside(where.real, name, where.reported):
                path /= part
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    raise InvalidArgument("a link")
        except (OSError, InvalidArgument):
            out.append(FileStat(name))
            continue
        if not stat.S_ISREG(st.st_mode):
            out.append(FileStat(name))
            continue
        when = datetime.datetime.fromtimestamp(st.st_mtime, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        out.append(FileStat(name, st.st_size, when))
    out.sort(key=lambda f: f.modified or "", reverse=True)
    return out
