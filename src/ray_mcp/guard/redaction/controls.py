"""Control characters: ESC, BEL, CR, BS, other C0/C1, bidi overrides and zero-width characters become visible
escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay."""

from __future__ import annotations

import re

# C0 but newline and tab, DEL, C1, and the invisible format characters that reorder or hide text.
CONTROL_CHARS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]] + [
    "\u061c",
    "\u180e",
    *map(chr, range(0x200B, 0x2010)),
    *map(chr, range(0x2028, 0x202F)),
    *map(chr, range(0x2060, 0x206A)),
    "\ufeff",
    "\ufff9",
    "\ufffa",
    "\ufffb",
]
_CONTROL = re.compile("[" + "".join(CONTROL_CHARS) + "]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def escape_controls(text: str) -> str:
    """Make control and invisible formatting characters visible; newlines and tabs stay (CRLF becomes LF)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text.replace("\r\n", "\n"))
