"""tail_logs' grep: a caller's regex matched in linear time over a streamed log, in bounded memory.

- Patterns are compiled with RE2 (``google-re2``), whose matching time is linear in the text whatever the
  pattern: ``(a+)+$`` over a million ``a``s takes milliseconds, not minutes. The few constructs RE2 lacks
  (backreferences, lookahead and lookbehind, atomic groups, possessive quantifiers) are refused with an
  error that names the construct and a way around it.
- The scanner works on bytes: a chunk with no match costs one RE2 search and a newline count, and only the
  lines it keeps are decoded.
- A line with no newline is never accumulated whole: it is matched in pieces of ``GREP_LONG_LINE_BYTES`` as it
  arrives (each byte is scanned once), only its first ``line_cap`` bytes are kept for display, and the
  answer counts such lines. A match that would span two pieces of one such line can be missed.
- The kept output lines are bounded in number (``keep``) and in bytes (``2 * line_cap`` beyond the newest).

The scanner is plain CPU work: callers run ``feed`` in a worker thread (``feed_in_thread``, ``finish_in_thread``), so the
event loop keeps serving other sessions while a large log is searched. RE2 releases the GIL while matching.
"""

from __future__ import annotations

import re
from collections import deque

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import GREP_LONG_LINE_BYTES, GREP_THREADS, MAX_GREP_CHARS
from ray_mcp.text import utf8_prefix

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("ray_mcp_grep_limiter")  # one per event loop

# Constructs of Python's re that RE2 refuses, with what to write instead.
_UNSUPPORTED: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"\(\?<[=!]"),
        "lookbehind (?<=...) / (?<!...)",
        "match the preceding text itself, e.g. 'foo bar' instead of '(?<=foo )bar'",
    ),
    (
        re.compile(r"\(\?[=!]"),
        "lookahead (?=...) / (?!...)",
        "match the following text itself instead ('foobar' instead of 'foo(?=bar)'), or grep for the line and read its neighbours with context=2",
    ),
    (
        re.compile(r"\(\?P=\w+\)|(?<!\\)\\[1-9]"),
        "backreferences (\\1, (?P=name))",
        "spell the repeated text out, e.g. '(ab)ab' instead of '(ab)\\1'",
    ),
    (
        re.compile(r"\(\?>"),
        "atomic groups (?>...)",
        "use a plain group (...) instead: RE2 never backtracks, so it is not needed",
    ),
    (
        re.compile(r"(?<!\\)[*+?}][+]"),
        "possessive quantifiers (*+, ++, ?+)",
        "use the plain quantifier instead (drop the extra '+'): RE2 never backtracks",
    ),
    (re.compile(r"\(\?\("), "conditionals (?(1)...)", "grep for each alternative separately instead"),
]


class GrepPattern:
    """A compiled grep: ``search(data)`` says whether ``data`` (bytes, UTF-8) holds a match on some line."""

    def __init__(self, grep: str) -> None:
        import re2

        self.pattern = grep
        if len(grep) > MAX_GREP_CHARS:
            raise InvalidArgument(
                f"grep is {len(grep)} characters long; at most {MAX_GREP_CHARS} are accepted. Grep for a shorter, "
                "distinctive part of the line."
            )
        options = re2.Options()
        options.never_capture = True  # only "is there a match" is asked: the fastest RE2 engines
        options.longest_match = True
        options.never_nl = True  # a match never spans two lines
        options.log_errors = False
        # Python's \Z is RE2's \z; line anchors ^ and $ hold at every line start and end.
        translated = re.sub(r"(?<!\\)((?:\\\\)*)\\Z", r"\1\\z", grep)
        try:
            self._re = re2.compile(f"(?m:{translated})", options)
        except re2.error as exc:
            try:
                re.compile(grep)  # only to tell a broken pattern from one RE2 lacks a construct for
            except re.error as invalid:
                raise InvalidArgument(
                    f"grep {grep!r} is not a valid regular expression: {invalid}. Fix it and retry."
                ) from invalid
            raise InvalidArgument(_unsupported_message(grep, exc)) from exc

    def search(
        self, data: bytes | bytearray | memoryview, start: int = 0, end: int | None = None
    ) -> tuple[int, int] | None:
        match = self._re.search(data, start, len(data) if end is None else end)
        return match.span() if match is not None else None


def _unsupported_message(grep: str, exc: Exception) -> str:
    detail = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
    for finder, construct, instead in _UNSUPPORTED:
        if finder.search(grep):
            return (
                f"grep {grep!r} uses {construct}, which the linear-time matcher (RE2) does not support: "
                f"{instead}. Nothing was read."
            )
    return (
        f"grep {grep!r} cannot be used: RE2, the linear-time matcher, says {detail!r}. RE2 supports Python's "
        "usual syntax except backreferences, lookaround and atomic groups; repetition counts go up to 1000."
    )


def compile_grep(grep: str) -> GrepPattern:
    return GrepPattern(grep)


def decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


class GrepScanner:
    """Scan a log streamed in chunks, keeping the last ``keep`` output lines (matches and context).

    ``line_cap`` bounds what is kept of one line (bytes); longer lines are kept cut, with a marker.
    """

    def __init__(
        self,
        pattern: GrepPattern,
        *,
        context: int,
        keep: int,
        line_cap: int = 65_536,
        piece: int = GREP_LONG_LINE_BYTES,
    ) -> None:
        self.pattern = pattern
        self.piece = piece
        self.context = context
        self.keep_bytes = 2 * line_cap + 1024  # the newest lines fit; older ones are dropped as they age
        self.line_cap = line_cap
        self.out: deque[tuple[int, str, bool]] = deque(maxlen=keep)
        self._out_bytes = 0
        self.before: deque[tuple[int, str]] = deque(maxlen=context or 1)
        self.after = 0
        self.line_no = 0
        self.matches = 0
        self.first_match: int | None = None
        self.bytes = 0
        self.long_lines = 0  # lines longer than GREP_LONG_LINE_BYTES: matched in pieces, kept cut
        self._last_out = 0
        # the line being read (no newline yet): its unmatched tail, whether a piece matched, its head, its size
        self._partial = bytearray()
        self._partial_hit = False
        self._partial_head: bytes | None = None
        self._partial_size = 0

    # -- input -----------------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        view = memoryview(chunk)
        if self._partial_size:
            newline = chunk.find(b"\n")
            if newline < 0:
                self._extend_partial(view)
                return
            self._extend_partial(view[:newline])
            self._end_partial()
            view = view[newline + 1 :]
            chunk = bytes(view)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._extend_partial(view)
            return
        self._scan_block(chunk[: cut + 1])
        self._extend_partial(view[cut + 1 :])

    def finish(self) -> None:
        if self._partial_size:
            self._end_partial()

    def _extend_partial(self, data: memoryview) -> None:
        if not len(data):
            return
        self._partial += data
        self._partial_size += len(data)
        while len(self._partial) >= self.piece:  # a long line: match this piece now, keep only its head
            piece = self._partial[: self.piece]
            if not self._partial_hit:
                self._partial_hit = self.pattern.search(piece) is not None
            if self._partial_head is None:
                self._partial_head = bytes(piece[: self.line_cap])
            del self._partial[: self.piece]

    def _end_partial(self) -> None:
        rest = self._partial
        hit = self._partial_hit or self.pattern.search(rest) is not None
        head = self._partial_head if self._partial_head is not None else bytes(rest[: self.line_cap])
        size = self._partial_size
        if size > self.piece:
            self.long_lines += 1
        self._partial, self._partial_hit, self._partial_head, self._partial_size = bytearray(), False, None, 0
        self._line(head, hit, size)

    # -- complete lines --------------------------------------------------------------------------------

    def _scan_block(self, block: bytes) -> None:
        """``block`` ends with a newline. Jump from match to match; count the lines in between."""
        pos = 0
        end = len(block)
        while pos < end:
            span = self.pattern.search(block, pos, end - 1)  # not past the final newline: no empty last line
            if span is None:
                self._skip(block, pos, end)
                return
            newline = block.rfind(b"\n", pos, span[0])
            start = newline + 1 if newline >= 0 else pos
            stop = block.find(b"\n", span[0])
            self._skip(block, pos, start)
            line = block[start:stop]
            # never_nl keeps a match on one line; the check on the line alone is cheap insurance
            self._line(line, self.pattern.search(line) is not None, len(line))
            pos = stop + 1

    def _skip(self, block: bytes, start: int, end: int) -> None:
        """Lines ``block[start:end]`` (whole lines) hold no match: emit pending context, count the rest."""
        while self.after and start < end:
            stop = block.find(b"\n", start, end)
            self._line(block[start:stop], False, stop - start)
            start = stop + 1
        if start >= end:
            return
        count = block.count(b"\n", start, end)
        if self.context:
            tail_start = self._nth_line_from_end(block, start, end, min(count, self.context))
            tail = block[tail_start : end - 1].split(b"\n") if tail_start < end else []
            first = self.line_no + count - len(tail) + 1
            for offset, raw in enumerate(tail):
                self.before.append((first + offset, self._text(raw, len(raw))))
        self.line_no += count

    @staticmethod
    def _nth_line_from_end(block: bytes, start: int, end: int, n: int) -> int:
        """Where the last ``n`` lines of ``block[start:end]`` (ending with a newline) begin."""
        if n == 0:
            return end
        position = end - 1  # the final newline
        for _ in range(n):
            found = block.rfind(b"\n", start, position)
            if found < 0:
                return start
            position = found
        return position + 1

    def _line(self, raw: bytes | bytearray, hit: bool, size: int) -> None:
        self.line_no += 1
        if hit:
            self.matches += 1
            if self.first_match is None:
                self.first_match = self.line_no
            text = self._text(raw, size)
            if self.context:
                for number, before in self.before:
                    if number > self._last_out:
                        self._emit(number, before, False)
            self._emit(self.line_no, text, True)
            self.after = self.context
        elif self.after:
            self.after -= 1
            self._emit(self.line_no, self._text(raw, size), False)
        if self.context:
            self.before.append((self.line_no, self._text(raw, size)))

    def _text(self, raw: bytes | bytearray, size: int) -> str:
        if size <= self.line_cap and len(raw) == size:
            return decode(raw)
        shown = decode(utf8_prefix(bytes(raw), self.line_cap))
        return f"{shown}…[line of {size} bytes, cut at {self.line_cap}]"

    def _emit(self, number: int, line: str, is_match: bool) -> None:
        if len(self.out) == self.out.maxlen:
            self._out_bytes -= len(self.out[0][1])
        self.out.append((number, line, is_match))
        self._out_bytes += len(line)
        while self._out_bytes > self.keep_bytes and len(self.out) > 1:  # older lines can no longer be shown
            self._out_bytes -= len(self.out.popleft()[1])
        self._last_out = number


def _limiter() -> anyio.CapacityLimiter:
    try:
        return _LIMITER.get()
    except LookupError:
        _LIMITER.set(limiter := anyio.CapacityLimiter(GREP_THREADS))
        return limiter


async def feed_in_thread(scanner: GrepScanner, chunk: bytes) -> None:
    """Feed one chunk off the event loop (at most GREP_THREADS scans at once in the process)."""
    await anyio.to_thread.run_sync(scanner.feed, chunk, limiter=_limiter())


async def finish_in_thread(scanner: GrepScanner) -> None:
    await anyio.to_thread.run_sync(scanner.finish, limiter=_limiter())
