"""Logs: the tail within line and byte budgets, grep over a streamed file, and the text of a section."""

from __future__ import annotations

from ray_mcp import models
from ray_mcp.amounts import byte_size
from ray_mcp.limits import GREP_LONG_LINE_BYTES
from ray_mcp.shaping import grep as log_grep
from ray_mcp.text import ANSI, utf8_prefix


def cut_to_budget(raw_lines: list[str], *, max_bytes: int) -> tuple[list[str], int, int]:
    """Keep the newest lines that fit ``max_bytes`` (UTF-8, newline included).

    A single line longer than the whole budget is cut to fit, keeping its start, and counted as truncated.
    Returns (lines kept, bytes left out, lines truncated).
    """
    kept: list[str] = []
    used = 0
    left_out = 0
    truncated = 0
    for index in range(len(raw_lines) - 1, -1, -1):
        text = raw_lines[index]
        size = len(text.encode()) + 1
        if used + size <= max_bytes:
            kept.append(text)
            used += size
            continue
        if not kept:  # the newest line alone is over budget: show its start
            room = max(0, max_bytes - 40)
            head = utf8_prefix(text.encode(), room).decode()
            cut = size - 1 - len(head.encode())
            kept.append(f"{head}…[{cut} bytes cut]")
            left_out += cut
            truncated += 1
            used = max_bytes
            continue
        left_out += sum(len(t.encode()) + 1 for t in raw_lines[: index + 1])
        break
    kept.reverse()
    return kept, left_out, truncated


def count_lines(data: bytes) -> int:
    """Lines in ``data``, counting a last line without a newline."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def tail_section(
    data: bytes,
    *,
    lines: int,
    max_bytes: int,
    complete: bool,
    dropped: int = 0,
    base: models.LogSection,
    followed_s: float | None = None,
) -> models.LogSection:
    """Shape the end of a log into a section within the line and byte budgets, keeping the newest lines.

    ``complete`` says ``data`` starts at the beginning of the file (so counts are exact); ``dropped`` is how
    many bytes before ``data`` were read and thrown away (its first line is then partial and is dropped too).
    """
    raw = decode_log(data).split("\n")
    if raw and raw[-1] == "":
        raw.pop()
    if dropped and raw:
        dropped += len(raw.pop(0).encode()) + 1
    fetched = len(raw)
    if len(raw) > lines:
        dropped += sum(len(t.encode()) + 1 for t in raw[:-lines])
        raw = raw[-lines:]
    kept, cut, truncated = cut_to_budget(raw, max_bytes=max_bytes)
    left_lines = fetched - len(kept)
    return base.model_copy(
        update={
            "lines": kept,
            "lines_shown": len(kept),
            "lines_left_out": left_lines if complete else None,
            "more_before": left_lines > 0 or not complete,
            "bytes_left_out": cut + dropped,
            "truncated_lines": truncated,
            "followed_s": followed_s,
        }
    )


def decode_log(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def without_colour(tail: models.LogTail) -> models.LogTail:
    """The tail as shown to an agent: without terminal colour codes (Ray colours its "(pid=...)" prefixes),
    noise that reads "\\x1b[36m" once escaped. The diagnosis reads the lines as they are: there the codes
    mark the output Ray forwarded from workers."""
    sections = [
        s.model_copy(update={"lines": [ANSI.sub("", line) for line in s.lines]}) for s in tail.sections
    ]
    return tail.model_copy(update={"sections": sections})


def grep_section(
    scanner: log_grep.GrepScanner, *, max_bytes: int, complete: bool, grep: str, base: models.LogSection
) -> models.LogSection:
    entries = list(scanner.out)
    kept, _cut, truncated = cut_to_budget([t for _, t, _ in entries], max_bytes=max_bytes)
    offset = len(entries) - len(kept)
    numbers = [number for number, _, _ in entries[offset:]]
    return base.model_copy(
        update={
            "lines": kept,
            "line_numbers": numbers,
            "match_numbers": [number for number, _, is_match in entries[offset:] if is_match],
            "lines_shown": len(kept),
            "lines_left_out": scanner.line_no - len(kept),
            "more_before": bool(numbers) and numbers[0] > 1,
            "bytes_left_out": max(0, scanner.bytes - sum(len(x.encode()) + 1 for x in kept)),
            "truncated_lines": truncated,
            "grep": grep,
            "matches": scanner.matches,
            "scanned_bytes": scanner.bytes,
            "scanned_lines": scanner.line_no,
            "scan_complete": complete,
            "long_lines": scanner.long_lines or None,
        }
    )


def render_log_section(section: models.LogSection) -> str:
    where = f"{section.filename or '?'} on node {section.node_id or '?'}"
    head = f"== {section.source}: {where}"
    if section.grep is not None:
        scope = "whole file" if section.scan_complete else "stopped at max_scan_mb, the rest was not searched"
        head += (
            f"\ngrep /{section.grep}/: {section.matches} matching line(s) in {section.scanned_lines} lines "
            f"({byte_size(section.scanned_bytes or 0)} scanned, {scope})"
            + (f"; showing the last {section.lines_shown} output lines" if section.lines_shown else "")
        )
        if section.long_lines:
            piece = byte_size(GREP_LONG_LINE_BYTES)
            head += (
                f"\n{section.long_lines} line(s) longer than {piece} without a newline: each was matched in "
                f"{piece} pieces (a match across two pieces can be missed) and is shown cut"
            )
    else:
        head += f"\nlast {section.lines_shown} line(s)"
    left = []
    if section.grep is None:
        if section.lines_left_out is None and section.more_before:
            left.append("earlier lines left out (not counted: the tail is read from the end of the file)")
        elif section.lines_left_out:
            left.append(f"{section.lines_left_out} earlier line(s) left out")
        elif not section.more_before:
            left.append("this is the whole file")
    elif section.lines_left_out:
        left.append(f"{section.lines_left_out} line(s) not shown")
    if section.bytes_left_out:
        left.append(f"{byte_size(section.bytes_left_out)} not shown")
    if section.truncated_lines:
        left.append(f"{section.truncated_lines} over-long line(s) cut")
    if section.followed_s is not None:
        left.append(f"followed {section.followed_s:g} s: {section.new_lines} new line(s)")
    if left:
        head += " — " + "; ".join(left)
    body = list(section.lines)
    if section.line_numbers is not None:
        matches = set(section.match_numbers or [])
        numbered = zip(section.line_numbers, body, strict=True)
        body = [f"{n}{':' if n in matches else '-'} {t}" for n, t in numbered]
    return head + ":\n" + ("\n".join(body) if body else "(no lines)")


def render_log_tail(tail: models.LogTail) -> str:
    parts = [render_log_section(s) for s in tail.sections]
    parts += [f"Hint: {h}" for h in tail.hints]
    return "\n".join(parts)


def log_hints(sections: list[models.LogSection], *, lines: int, max_bytes: int, max_lines: int) -> list[str]:
    hints = []
    budget_cut = [s for s in sections if s.grep is None and s.more_before and s.lines_shown < lines]
    if budget_cut or any(s.truncated_lines for s in sections):
        hints.append(f"The {max_bytes}-byte budget cut lines: raise max_bytes, or narrow with grep.")
    elif any(s.more_before and s.grep is None for s in sections) and lines < max_lines:
        hints.append(f"For more, raise lines (max {max_lines}) or search the whole file with grep.")
    if any(s.grep is not None and s.scan_complete is False for s in sections):
        hints.append(
            "grep stopped at max_scan_mb before the end of the file: raise max_scan_mb to search it all."
        )
    if any(s.grep is not None and (s.matches or 0) > s.lines_shown for s in sections):
        hints.append("More matches than shown: only the last ones are kept; make the regex more specific.")
    return hints
