"""Text helpers shared by every layer: colour codes, caret markers, exception lines, cutting, quoting."""

from __future__ import annotations

import json
import re
import unicodedata

from ray_mcp.limits import QUOTED_CHARS

ANSI = re.compile(r"\x1b\[[0-9;]*m")
CARETS = re.compile(r"\s*[\^~]+\s*")
EXCEPTION_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Died)\w*): ?(.*)$"
)


def clean_text(text: str | None) -> str:
    return ANSI.sub("", text or "").strip()


# -- cutting: one cutter per job ------------------------------------------------------------------------------
# Characters: truncate_text (the head, "…" at the end), one_line (the same on one line of single spaces),
# cut_counted (the head and a note of how much was cut), tail_text (the end, "…" at the start). Bytes:
# utf8_prefix (at most so many bytes, never inside a character), fit_bytes (a str within so many bytes, "…").


def utf8_prefix(raw: bytes, limit: int) -> bytes:
    """The first ``limit`` bytes of UTF-8 ``raw`` or fewer, never ending inside a character: the cut backs off
    over continuation bytes (0b10xxxxxx) to the start of the character it would split."""
    if len(raw) <= limit:
        return raw
    end = max(0, limit)
    # A character is at most 4 bytes: in bytes that are not UTF-8, back off no further than that.
    while end > max(0, limit - 3) and raw[end] & 0xC0 == 0x80:
        end -= 1
    return raw[:end]


def fit_bytes(line: str, limit: int) -> str:
    """``line`` within ``limit`` bytes of UTF-8, marked with "…" when cut (nothing if not even that fits)."""
    raw = line.encode()
    if len(raw) <= limit:
        return line
    return utf8_prefix(raw, limit - 3).decode() + "…" if limit >= 3 else ""


def truncate_text(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, its last one "…" when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def one_line(text: str | None, chars: int) -> str:
    """``text`` on one line (each run of whitespace one space), cut to ``chars`` characters with "…"."""
    return truncate_text(" ".join((text or "").split()), chars)


def cut_counted(text: str, chars: int) -> str:
    """``text``'s first ``chars`` characters and a note of how many more were cut, for a value whose size
    matters to the reader (an audit record, a structured field, a single log line)."""
    if len(text) <= chars:
        return text
    return f"{text[:chars]}… [cut: {len(text) - chars} more characters]"


def tail_text(text: str | None, max_chars: int) -> str | None:
    """The end of a long text (tracebacks end with what matters), marked when cut."""
    text = "\n".join(ln for ln in clean_text(text).splitlines() if ln.strip() and not CARETS.fullmatch(ln))
    if not text:
        return None
    if len(text) <= max_chars:
        return text
    return "…" + text[-(max_chars - 1) :]


def head_text(text: str | None, max_chars: int) -> str | None:
    """The start of a text without colour codes, on one line, cut with "…"; None when nothing is left."""
    return one_line(clean_text(text), max_chars) or None


def exception_summary(text: str | None) -> tuple[str | None, str | None]:
    """The exception class and message from a Python traceback: its last ``SomeError: message`` line."""
    for line in reversed(clean_text(text).splitlines()):
        match = EXCEPTION_LINE.match(line.strip() if line.startswith(("ray.", "builtins.")) else line)
        if match:
            return match.group(1).rsplit(".", 1)[-1], match.group(2).strip() or None
    return None, None


def user_traceback(text: str | None) -> str:
    """Ray wraps the user's exception in its own; keep the user's part (before "During handling ...")."""
    text = clean_text(text).split("During handling of the above exception", 1)[0]
    # Python's ^^^^ markers under each frame cost bytes and tell an agent nothing.
    return "\n".join(line for line in text.splitlines() if not CARETS.fullmatch(line)).strip()


def first_sentence(text: str) -> str:
    """The first sentence of an error message (what failed), ended by one period."""
    return text.split(". ")[0].rstrip(".") + "."


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """Text from the cluster (a name, a message, a command) as data inside one of our sentences: one line,
    in double quotes, control and line-breaking characters escaped, cut to ``limit`` characters with "…".
    Whatever the cluster puts in it, it cannot end our sentence, start a line of its own or pose as ours.

    A value quoted already (by sources/ids.py, where the records come in) is left as it is, not quoted twice."""
    text = str(value)
    if _QUOTED.fullmatch(text) and len(text) <= limit + 2:
        return text
    body = json.dumps(truncate_text(text, limit), ensure_ascii=False)[1:-1]
    if body.isascii() and body.isprintable():  # the usual case (DEL is not printable): nothing more to escape
        return f'"{body}"'
    # json escapes C0 controls; the line and paragraph separators, C1 controls and format characters
    # (bidirectional overrides among them) would still break or reorder the line a reader sees.
    body = "".join(
        f"\\u{ord(ch):04x}" if ch in "\u2028\u2029" or unicodedata.category(ch) in ("Cc", "Cf") else ch
        for ch in body
    )
    return f'"{body}"'


# What ``quoted`` makes: in double quotes, with nothing inside that is unescaped but printable characters.
_QUOTED = re.compile(
    r'"(?:[^"\\\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufeff]|\\.)*"'
)
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")


def single_line(text: str) -> str:
    """``text`` kept on the line it is put on: every character that would start a new line is escaped
    (``\\n``), the rest left as it is. For a line of cluster text shown as such (a quote under a finding)."""
    return _LINE_BREAKS.sub(lambda m: json.dumps(m.group())[1:-1], text)


def quoted_block(text: str, prefix: str = "  > ") -> str:
    """Many lines of cluster text (a traceback) under one of our lines: each line marked with ``prefix`` and
    kept on its own line, so none of them can pose as a line of ours."""
    return "\n".join(prefix + single_line(line) for line in text.splitlines())


# One plain token (an id, an address, a Python name, ray::Class.method, a path): it can stand in one of our
# sentences as it is, since it can neither end the sentence nor start a line.
PLAIN_TOKEN = re.compile(r"[A-Za-z0-9_.:@#/<>+=,~*-]{1,512}")


def as_token(value: str) -> str:
    """An id or a name from the cluster as it may stand in one of our sentences: itself when it is one plain
    token (a well-formed id always is), else quoted as data (``quoted``; quoting it again leaves it as it is)."""
    return value if not value or PLAIN_TOKEN.fullmatch(value) else quoted(value)


def short_id(value: str, chars: int) -> str:
    """The first ``chars`` characters of a hex id (enough to tell nodes apart); anything else whole, so that an
    id that came in quoted (an odd one) is never cut inside its quotes."""
    return value[:chars] if re.fullmatch(r"[0-9a-fA-F]+", value) else as_token(value)
