"""Reading tracebacks out of logs: the last one, its frames and exceptions, without Ray's own frames."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ray_mcp.limits import (
    ERROR_LINES,
    EVIDENCE_LINE_CHARS,
    REMOTE_LINES_KEPT,
    TRACEBACK_HEAD_LINES,
    TRACEBACK_LINES,
)
from ray_mcp.text import ANSI, CARETS, one_line, truncate_text

_TRACEBACK = re.compile(r"Traceback \(most recent call last\):")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
# "ValueError: bad lr", "ray.exceptions.ActorDiedError: ...", "foo.bar.BazError", "KeyboardInterrupt"
_EXCEPTION = re.compile(
    r"^(?:\([^)]*pid=\d+[^)]*\)\s*)?(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Died|Lost|Timeout|Cancelled|Warning)\w*)(?::\s*(?P<msg>.*))?$"
)


# A log record of Ray or the logging module starts with a timestamp: the traceback ended before it.
_LOG_RECORD = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")
# Ray prefixes lines that remote workers print to the driver with "(ClassName pid=123, ip=...)".
_REMOTE_PREFIX = re.compile(r"^\((?P<who>[\w.<>-]+) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def forwarded(line: str) -> bool:
    """A line a remote worker printed, forwarded with Ray's "(ClassName pid=…)" prefix (colour codes apart)."""
    return bool(_REMOTE_PREFIX.match(_ANSI.sub("", line)))


_INTERNAL = re.compile(
    r"/site-packages/|/dist-packages/|/lib/python3[.\d]*/|<frozen |/ray/_private/|/ray/_raylet"
)


RAY_WRAPPERS = (
    "RayTaskError",
    "RayActorError",
    "ActorDiedError",
    "ActorUnavailableError",
    "TaskCancelledError",
    "WorkerCrashedError",
    "RaySystemError",
    "GetTimeoutError",
)


@dataclass
class Frame:
    file: str
    line: int
    func: str

    @property
    def internal(self) -> bool:
        return bool(_INTERNAL.search(self.file))

    def short(self) -> str:
        return f"{self.line_ref()} in {self.func}"

    def line_ref(self) -> str:
        """ "main.py:7": the file's name and the line."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"


@dataclass
class Traceback:
    """The last exception block of a log: its frames, the exceptions in it, and a bounded excerpt."""

    lines: list[str]
    frames: list[Frame]
    exceptions: list[tuple[str, str]]  # (type, message), outermost first
    remote: list[str] = field(default_factory=list)  # "(Class pid=…)" lines and RayTaskError(...) lines

    @property
    def innermost(self) -> tuple[str, str] | None:
        return self.exceptions[-1] if self.exceptions else None

    @property
    def outermost(self) -> tuple[str, str] | None:
        return self.exceptions[0] if self.exceptions else None

    @property
    def user_frame(self) -> Frame | None:
        """The deepest frame in the user's own code (not Ray's or the standard library's)."""
        for frame in reversed(self.frames):
            if not frame.internal:
                return frame
        return self.frames[-1] if self.frames else None

    def excerpt(self, max_lines: int = TRACEBACK_LINES) -> list[str]:
        """The block without Ray's own frames and caret lines, cut in the middle if still too long."""
        lines = user_lines(self.lines)
        if len(lines) <= max_lines:
            return lines
        head = lines[:TRACEBACK_HEAD_LINES]
        tail = lines[-(max_lines - len(head) - 1) :]  # and the line that says how many were left out
        return [*head, f"  … {len(lines) - len(head) - len(tail)} lines of frames left out …", *tail]


def last_user_frame(text: str) -> Frame | None:
    """The innermost frame of the user's code in an error text, with or without a "Traceback" header (a task's
    error message lists its frames after "ray::f() (pid=…)")."""
    frames = [
        Frame(m["file"], int(m["line"]), m["func"]) for line in text.splitlines() if (m := _FRAME.match(line))
    ]
    return next((f for f in reversed(frames) if not f.internal), None)


def last_traceback(lines: Sequence[str]) -> Traceback | None:
    """Find the last exception in a log tail: the block from its last ``Traceback`` line to the exception."""
    starts = [i for i, line in enumerate(lines) if _TRACEBACK.search(line)]
    if not starts:
        return _bare_exception(lines)
    # A process's own traceback before what workers printed to it ("(Class pid=…) Traceback …", forwarded by
    # Ray's log monitor, often after the process's own exception): the log's own last one, when it has one.
    own = [i for i in starts if not forwarded(lines[i])]
    starts = own or starts
    start = starts[-1]
    # Chained exceptions ("During handling ..." / "The above exception ...") belong to the same block.
    while start > 0:
        earlier = [i for i in starts if i < start]
        if not earlier:
            break
        gap = lines[earlier[-1] : start]
        if any(
            "During handling of the above exception" in g or "direct cause of the following" in g for g in gap
        ):
            start = earlier[-1]
        else:
            break
    block: list[str] = []
    for line in lines[start:]:
        if block and _LOG_RECORD.match(line):
            break
        block.append(line.rstrip("\n"))
    # Drop a trailing run of blank lines and Ray's shutdown chatter after the final exception line.
    last_exc = max(
        (i for i, line in enumerate(block) if _EXCEPTION.match(line.strip())), default=len(block) - 1
    )
    block = block[: last_exc + 1]
    frames = [
        Frame(m["file"], int(m["line"]), m["func"]) for line in block if (m := _FRAME.match(line)) is not None
    ]
    exceptions = []
    for line in block:
        m = _EXCEPTION.match(line.strip())
        if m and not line.startswith((" ", "\t")):
            exceptions.append((m["type"], (m["msg"] or "").strip()))
    remote = [line.strip() for line in lines if _REMOTE_PREFIX.match(line) or "RayTaskError(" in line][
        -REMOTE_LINES_KEPT:
    ]
    return Traceback(block, frames, exceptions, remote)


def _bare_exception(lines: Sequence[str]) -> Traceback | None:
    """No traceback printed: fall back to the last line that looks like an exception."""
    for line in reversed(lines):
        m = _EXCEPTION.match(line.strip())
        if m and m["msg"]:
            return Traceback([line.strip()], [], [(m["type"], m["msg"].strip())])
    return None


def short_type(exc_type: str) -> str:
    return exc_type.rsplit(".", 1)[-1]


def is_ray_wrapper(exc_type: str) -> bool:
    return short_type(exc_type).startswith(RAY_WRAPPERS) or short_type(exc_type) in RAY_WRAPPERS


_WORKING_DIR = re.compile(
    r"/\S*?/runtime_resources/(?:working_dir_files|py_modules_files)/_ray_pkg_[0-9a-f]+/"
)


_SITE = re.compile(r"/\S*?/(site-packages|dist-packages)/")


def tidy(line: str) -> str:
    """A log line as an agent should read it: no colour codes, short paths."""
    line = ANSI.sub("", line)
    line = _WORKING_DIR.sub("<working_dir>/", line)
    return _SITE.sub(r".../\1/", line)


def readable(lines: Iterable[str]) -> list[str]:
    """Tidy lines, without the ^^^ markers Python puts under a failing expression."""
    return [tidy(line) for line in lines if line.strip() and not CARETS.fullmatch(line)]


def user_lines(lines: Iterable[str]) -> list[str]:
    """Traceback lines without Ray's and the standard library's frames (and their source lines)."""
    out: list[str] = []
    skip_source = False
    for line in readable(lines):
        frame = _FRAME.match(line)
        if frame:
            skip_source = bool(_INTERNAL.search(frame["file"]) or frame["file"].endswith(".pyx"))
            if not skip_source:
                out.append(line)
            continue
        if skip_source and line.startswith((" ", "\t")):
            continue
        skip_source = False
        out.append(line)
    return out


def cut_text(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters with "…": a text of several lines keeps its lines (a message's
    lines are read one by one after), a single line is put on single spaces."""
    return one_line(text, chars) if "\n" not in text else truncate_text(text.strip(), chars)


def first_line(text: str | None, limit: int = EVIDENCE_LINE_CHARS) -> str:
    if not text:
        return ""
    for line in text.strip().splitlines():
        if line.strip():
            return cut_text(line.strip(), limit)
    return ""


def error_lines(text: str | None, limit: int = ERROR_LINES) -> list[str]:
    """The lines of a message that carry the error (pip's ERROR lines, an exception line), bounded."""
    if not text:
        return []
    picked = [
        line.strip()
        for line in text.splitlines()
        if re.search(r"(?i)\berror\b|exception|failed|not found|no such|cannot|could not", line)
    ]
    return [cut_text(line, EVIDENCE_LINE_CHARS) for line in picked[-limit:]] or [first_line(text)]
