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


def fit_bytes(line: str, limit: int) -> str:
    """``line`` within ``limit`` bytes of UTF-8, marked with "…" when cut (nothing if not even that fits)."""
    raw = line.encode()
    if len(raw) <= limit:
        return line
    return raw[: limit - 3].decode(errors="ignore") + "…" if limit >= 3 else ""


def truncate_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tail_text(text: str | None, max_chars: int) -> str | None:
    """The end of a long text (tracebacks end with what matters), marked when cut."""
    text = "\n".join(ln for ln in clean_text(text).splitlines() if ln.strip() and not CARETS.fullmatch(ln))
    if not text:
        return None
    if len(text) <= max_chars:
        return text
    return "…" + text[-(max_chars - 1) :]


def head_text(text: str | None, max_chars: int) -> str | None:
    text = re.sub(r"\s+", " ", clean_text(text))
    if not text:
        return None
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


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
    Whatever the cluster puts in it, it cannot end our sentence, start a line of its own or pose as ours."""
    body = json.dumps(truncate_text(str(value), limit), ensure_ascii=False)[1:-1]
    # json escapes C0 controls; the line and paragraph separators, C1 controls and format characters
    # (bidirectional overrides among them) would still break or reorder the line a reader sees.
    body = "".join(
        f"\\u{ord(ch):04x}" if ch in "\u2028\u2029" or unicodedata.category(ch) in ("Cc", "Cf") else ch
        for ch in body
    )
    return f'"{body}"'
