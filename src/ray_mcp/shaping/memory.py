"""memory_profile and gpu_profile, the pure part: read memray's flame graph report (the page Ray's
``/memory_profile`` answers) into allocating lines, leak candidates and a verdict, and put them in words.

memray's flamegraph page carries its data as one JSON object (``const packed_data = {...};``): a tree of
frames (``nodes``: children, function, filename, lineno, value = bytes under the frame, n_allocations) over an
interned ``strings`` table, HTML-escaped. The ``table`` report names only each allocation's innermost frame;
the tree gives both a line's own bytes and the bytes under it, and the project frame a library allocation
was made for.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import byte_size
from ray_mcp.limits import MEMORY_LEAKS_SHOWN, MEMORY_STACK_FRAMES
from ray_mcp.shaping.stacks import USER, frame_kind
from ray_mcp.text import as_token

_PACKED = re.compile(r"const packed_data = (?P<data>\{.*?\});\s*$", re.M)
# Ray prepends this to a task's report when the worker runs other tasks too (reporter_head.py).
_SHARED_WORKER = re.compile(
    r"Warning: This task is running in a worker process that is running multiple tasks"
)
_SITE = re.compile(r".*/(?:site-packages|dist-packages)/")
_STDLIB = re.compile(r".*/lib/python3\.\d+/")


@dataclass
class Node:
    """One frame of memray's tree: a call site and what was allocated under it."""

    function: str
    path: str
    line: int
    total: int
    allocations: int
    parent: int | None
    children: list[int] = field(default_factory=list)
    own: int = 0
    own_allocations: int = 0

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.function, self.path, self.line)

    @property
    def project(self) -> bool:
        if self.path.startswith("<"):  # <frozen runpy>, <string>: never a project file
            return frame_kind(self.path) == USER
        return frame_kind(short_path(self.path), self.path) == USER

    def where(self) -> str:
        return f"{as_token(short_path(self.path))}:{self.line} in {as_token(self.function)}"


def short_path(path: str) -> str:
    """A file as an agent reads it: package-relative for installed code, the base name for project code."""
    if m := _SITE.match(path):
        return path[m.end() :]
    if m := _STDLIB.match(path):
        return path[m.end() :]
    return path.rsplit("/", 1)[-1]


def parse_flamegraph(page: str) -> list[Node]:
    """The frames of memray's flame graph page, root first; ValueError when the page holds no report."""
    m = _PACKED.search(page)
    if m is None:
        raise ValueError("no memray report in the answer")
    data: dict[str, Any] = json.loads(m["data"])
    tree, strings = data["nodes"], [html.unescape(s) for s in data["strings"]]
    nodes = [
        Node(
            function=strings[tree["function"][i]],
            path=strings[tree["filename"][i]],
            line=int(tree["lineno"][i]),
            total=int(tree["value"][i]),
            allocations=int(tree["n_allocations"][i]),
            parent=None,
            children=[int(c) for c in tree["children"][i]],
        )
        for i in range(len(tree["value"]))
    ]
    for i, node in enumerate(nodes):
        for c in node.children:
            nodes[c].parent = i
        node.own = max(0, node.total - sum(nodes[c].total for c in node.children))
        node.own_allocations = max(0, node.allocations - sum(nodes[c].allocations for c in node.children))
    return nodes


def shared_worker(page: str) -> bool:
    return bool(_SHARED_WORKER.search(page))


def _ancestors(nodes: list[Node], i: int) -> list[int]:
    """``i`` and its ancestors, innermost first, without memray's root."""
    out = []
    at: int | None = i
    while at is not None and nodes[at].parent is not None:
        out.append(at)
        at = nodes[at].parent
    return out


def allocators(nodes: list[Node], top: int) -> tuple[list[models.MemoryAllocator], int]:
    """Allocating lines by own bytes (a line's total counts each recursion once), and how many there are."""
    own: dict[tuple[str, str, int], list[int]] = {}
    total: dict[tuple[str, str, int], int] = {}
    for i, node in enumerate(nodes):
        if node.parent is None:
            continue
        if node.own:
            mine = own.setdefault(node.key, [0, 0])
            mine[0] += node.own
            mine[1] += node.own_allocations
        if node.key not in {nodes[a].key for a in _ancestors(nodes, i)[1:]}:
            total[node.key] = total.get(node.key, 0) + node.total
    ranked = sorted(own, key=lambda k: (-own[k][0], -total[k]))
    first = {n.key: n for n in nodes}
    return (
        [
            models.MemoryAllocator(  # names a process chose itself: one plain token each, or quoted as data
                function=as_token(key[0]),
                file=as_token(short_path(key[1])),
                line=key[2],
                own_bytes=own[key][0],
                total_bytes=total[key],
                allocations=own[key][1],
                project=first[key].project,
            )
            for key in ranked[:top]
        ],
        len(own),
    )


def leak_candidates(nodes: list[Node]) -> list[models.LeakCandidate]:
    """Held memory charged to the innermost project frame above each allocation: the project line that asked
    for it, even when a library made the allocation."""
    held: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        if not node.own or node.parent is None:
            continue
        mine = next((nodes[a] for a in _ancestors(nodes, i) if nodes[a].project), None)
        if mine is None:
            continue
        slot = held.setdefault(mine.where(), [0, 0])
        slot[0] += node.own
        slot[1] += node.own_allocations
    ranked = sorted(held.items(), key=lambda kv: -kv[1][0])[:MEMORY_LEAKS_SHOWN]
    return [models.LeakCandidate(where=w, held_bytes=b, allocations=n) for w, (b, n) in ranked]


def largest_stack(nodes: list[Node]) -> list[str]:
    """The stack of the frame that allocated the most itself, innermost first."""
    inner = [i for i, n in enumerate(nodes) if n.parent is not None and n.own]
    if not inner:
        return []
    biggest = max(inner, key=lambda i: nodes[i].own)
    return [nodes[a].where() for a in _ancestors(nodes, biggest)][:MEMORY_STACK_FRAMES]


def memory_verdict(
    label: str,
    mode: str,
    duration_s: int,
    total: int,
    rows: list[models.MemoryAllocator],
    leaks: list[models.LeakCandidate],
) -> str:
    if mode == "leaks":
        if not total:
            return f"{label}: nothing allocated in the {duration_s} s window was still held at its end: no leak seen."
        head = f"{label}: {byte_size(total)} allocated in {duration_s} s was still held at the end"
        if leaks:
            top = leaks[0]
            return f"{head}; leak candidate {top.where} holds {byte_size(top.held_bytes)} ({top.allocations} allocations)."
        return f"{head}, all of it under Ray's or a library's frames; the largest lines follow."
    if not total:
        return f"{label}: allocated nothing memray saw in {duration_s} s (it waits, or allocates before the window)."
    hot = rows[0]
    verdict = (
        f"{label}: {byte_size(total)} allocated at the peak of {duration_s} s; largest line {hot.function} "
        f"({hot.file}:{hot.line}) {byte_size(hot.own_bytes)} own"
    )
    project = next((r for r in rows if r.project), None)
    if project is not None and project is not hot:
        verdict += f"; largest project line {project.function} ({project.file}:{project.line}) {byte_size(project.own_bytes)}"
    return verdict + "."


def render_memory_profile(p: models.MemoryProfile) -> str:
    lines = [p.verdict, ""]
    if p.warning:
        lines += [f"Warning (Ray): {p.warning}", ""]
    if p.leak_candidates:
        lines.append("Leak candidates (project lines under which memory stayed held):")
        lines += [
            f"  {byte_size(c.held_bytes):>10}  {c.allocations:>7} allocs  {c.where}"
            for c in p.leak_candidates
        ]
        lines.append("")
    if p.allocators:
        shown = f"{len(p.allocators)} of {p.allocators_total}"
        lines.append(f"Allocating lines ({shown}), by own size   [* = project code]")
        lines.append("       own       total   allocs  function (file:line)")
        for a in p.allocators:
            star = "*" if a.project else " "
            lines.append(
                f"{byte_size(a.own_bytes):>10} {byte_size(a.total_bytes):>11} {a.allocations:>8}  "
                f"{star}{a.function} ({a.file}:{a.line})"
            )
    if p.largest_stack:
        lines += ["", "Stack of the largest line (innermost first):", *[f"    {s}" for s in p.largest_stack]]
    lines += [f"Hint: {h}" for h in p.hints]
    return "\n".join(lines)


def render_gpu_profile(p: models.GpuProfile) -> str:
    return "\n".join([p.verdict, *[f"Hint: {h}" for h in p.hints]])
