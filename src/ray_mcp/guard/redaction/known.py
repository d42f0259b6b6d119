"""Known secret values, matched exactly (case included) in one pass: an Aho-Corasick automaton over each value's
first characters, the rest compared once found."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import ahocorasick

from ray_mcp.limits import SECRET_KEY_CHARS

SHORT_SECRET_CHARS = 4  # values shorter than this are masked only where they stand as whole words


CUT_MARKS = ("…", "...")  # where a cut copy of a value ends


def key_of(value: str) -> str:
    """What a value is found by: its first SECRET_KEY_CHARS characters (the rest is compared once found)."""
    return value[:SECRET_KEY_CHARS]


class KnownValues:
    """An immutable Aho-Corasick automaton over secret values, matched exactly (case included). A value longer
    than its key is masked where the text repeats it whole, or cut (up to the text's end or a cut mark); a text
    that merely shares its first characters is left alone."""

    def __init__(self, values: Iterable[str]) -> None:
        by_key: dict[str, list[str]] = {}
        for value in values:
            by_key.setdefault(key_of(value), []).append(value)
        self.automaton: Any = None
        if by_key:
            automaton = ahocorasick.Automaton()
            for key, found in by_key.items():
                automaton.add_word(key, (key, tuple(sorted(found, key=len, reverse=True))))
            automaton.make_automaton()
            self.automaton = automaton

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Spans to mask: long values anywhere, short ones where they stand as whole words."""
        if self.automaton is None or not text:
            return []
        spans: list[tuple[int, int]] = []
        for end, (key, values) in self.automaton.iter(text):
            start = end - len(key) + 1
            stop = end + 1
            whole = False
            for value in values:  # longest first
                agreed = _agreed(text, start, value)
                cut = start + agreed == len(text) or text.startswith(CUT_MARKS, start + agreed)
                if (agreed == len(value) or cut) and _stands(text, start, start + agreed, value):
                    stop, whole = max(stop, start + agreed), True
                    break
            if whole:  # a text that only shares a value's first characters (a path, a URL) is not that value
                spans.append((start, stop))
        return spans


def _agreed(text: str, start: int, value: str) -> int:
    """How many characters of ``value`` the text repeats from ``start`` (bisected: each probe is in C)."""
    low, high = len(key_of(value)), min(len(value), len(text) - start)
    while low < high:
        mid = (low + high + 1) // 2
        if text.startswith(value[:mid], start):
            low = mid
        else:
            high = mid - 1
    return low


def _stands(text: str, start: int, stop: int, value: str) -> bool:
    """Whether ``text[start:stop]`` may be masked as ``value``: a long value anywhere; a short one, or one that
    reads as a number ("0.05", "8080"), only as a whole token, so that it is not found inside other words or
    numbers (a job's env var of "0.05" must not mask the digits of "10.0568 s")."""
    numeric = NUMBER.fullmatch(value) is not None
    if len(value) >= SHORT_SECRET_CHARS and not numeric:
        return True
    before, after = text[max(0, start - 2) : start], text[stop : stop + 2]
    if numeric:  # a decimal point or separator between digits joins two parts of one number
        return not (JOINED_BEFORE.search(before) or JOINED_AFTER.match(after))
    return not ((before and before[-1].isalnum()) or (after and after[0].isalnum()))


NUMBER = re.compile(r"[+-]?[0-9][0-9._,:eE+-]*")  # what reads as a number, a version or a port
JOINED_BEFORE = re.compile(r"(?:\w|[0-9][.,])$")
JOINED_AFTER = re.compile(r"\w|[.,][0-9]")
