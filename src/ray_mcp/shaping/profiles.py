"""cpu_profile, the pure part: parse py-spy's raw (collapsed) profile and rank its functions."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ray_mcp import models
from ray_mcp.shaping.stacks import USER, Frame, folded

_RAW_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_RAW_FRAME = re.compile(r"^(?P<func>.+?) \((?P<file>.+?)(?::(?P<line>\d+))?\)$")


def parse_raw_profile(text: str) -> list[tuple[list[Frame], int]]:
    """``py-spy record --format raw``: one collapsed stack per line, outermost first, then a sample count."""
    out = []
    for line in text.splitlines():
        m = _RAW_LINE.match(line.strip())
        if not m or line.startswith("py-spy>"):
            continue
        frames = []
        for part in m["stack"].split(";"):
            fm = _RAW_FRAME.match(part.strip())
            if fm:
                frames.append(Frame(fm["func"], fm["file"], int(fm["line"] or 0)))
            elif part.strip():
                frames.append(Frame(part.strip(), "?", 0))
        out.append((frames, int(m["count"])))
    return out


def profile_functions(
    stacks: Sequence[tuple[list[Frame], int]], top: int
) -> tuple[list[models.HotFunction], int]:
    """Functions by own samples (the leaf of each stack), with total samples (anywhere on the stack)."""
    own: dict[tuple[str, str], int] = {}
    total: dict[tuple[str, str], int] = {}
    lines: dict[tuple[str, str], dict[int, int]] = {}
    kinds: dict[tuple[str, str], str] = {}
    samples = 0
    for frames, count in stacks:
        if not frames:
            continue
        samples += count
        leaf = frames[-1]
        key = (leaf.func, leaf.file)
        own[key] = own.get(key, 0) + count
        lines.setdefault(key, {})[leaf.line] = lines.get(key, {}).get(leaf.line, 0) + count
        for k in {(f.func, f.file) for f in frames}:
            total[k] = total.get(k, 0) + count
        for f in frames:
            kinds[(f.func, f.file)] = f.kind
    ranked = sorted(total, key=lambda k: (-own.get(k, 0), -total[k]))
    out = []
    for key in ranked[:top]:
        hot_line = max(lines[key].items(), key=lambda kv: kv[1])[0] if key in lines else None
        out.append(
            models.HotFunction(
                function=key[0],
                file=key[1],
                line=hot_line,
                own_samples=own.get(key, 0),
                total_samples=total[key],
                own_pct=round(100 * own.get(key, 0) / samples, 1) if samples else 0.0,
                total_pct=round(100 * total[key] / samples, 1) if samples else 0.0,
                project=kinds.get(key) == USER,
            )
        )
    return out, samples


def hottest_path(stacks: Sequence[tuple[list[Frame], int]], max_frames: int) -> list[str]:
    """The single stack with the most samples, project frames first (innermost first), Ray's folded."""
    if not stacks:
        return []
    frames, _count = max(stacks, key=lambda s: s[1])
    return folded(list(reversed(frames)), max_frames)


def render_profile(p: models.CpuProfile) -> str:
    lines = [p.verdict, ""]
    if p.functions:
        lines.append("own%  total%  function (file:line)   [* = project code]")
        for f in p.functions:
            star = "*" if f.project else " "
            at = f"{f.file}:{f.line}" if f.line else f.file
            lines.append(f"{f.own_pct:5.1f} {f.total_pct:6.1f}  {star}{f.function} ({at})")
    if p.hottest_stack:
        lines += ["", "Hottest stack (innermost first):", *[f"    {s}" for s in p.hottest_stack]]
    lines += [f"Hint: {h}" for h in p.hints]
    return "\n".join(lines)
