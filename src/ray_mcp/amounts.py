"""Amounts as an operator reads them, one formatter per kind: a size in bytes, a Ray resource amount, a
resource in use against its total, a percentage, a duration (exact, an age, a window). Pure; usable from every
floor (as text.py)."""

from __future__ import annotations

import math
from collections.abc import Mapping

# Ray counts these resources in bytes; every other resource (CPU, GPU, custom) in units.
BYTE_RESOURCES = ("memory", "object_store_memory")
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def byte_size(n: float | None) -> str:
    """A size in the largest binary unit it reaches, to 3 significant digits: "512 B", "1.5 KiB", "3 GiB"."""
    if n is None or not math.isfinite(n):
        return "?"
    size, unit = abs(float(n)), _BINARY_UNITS[0]
    for bigger in _BINARY_UNITS[1:]:
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{'-' if n < 0 else ''}{size:.3g} {unit}"


def resource_amount(name: str, value: float) -> str:
    """One resource's amount: memory resources as a size ("4 GiB"), the others as Ray counts them ("0.5")."""
    return byte_size(value) if name in BYTE_RESOURCES else f"{float(value):g}"


def resource_use(name: str, used: float, total: float) -> str:
    """ "CPU 1/4", "memory 2/8 GiB": a resource in use against its total, the unit said once when both
    share it or none is in use ("memory 512 MiB/8 GiB" when they do not)."""
    if name not in BYTE_RESOURCES:
        return f"{name} {float(used):g}/{float(total):g}"
    shown_used, shown_total = byte_size(used), byte_size(total)
    if used == 0 or shown_used.split()[-1] == shown_total.split()[-1]:
        shown_used = shown_used.split()[0]
    return f"{name} {shown_used}/{shown_total}"


def resource_items(shape: Mapping[str, float]) -> str:
    """ "CPU: 1, memory: 4 GiB": a resource shape's items, for text that puts its own braces around them."""
    return ", ".join(f"{k}: {resource_amount(k, v)}" for k, v in shape.items())


def resource_shape(shape: Mapping[str, float]) -> str:
    """ "{CPU: 1, memory: 4 GiB}": a bundle's or a task's resource demand, written one way in every answer."""
    return "{" + resource_items(shape) + "}"


def duration(seconds: float) -> str:
    """A duration to the second under two minutes, to the minute under two hours: "95s", "3m05s", "2h03m"."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def age(seconds: float | None) -> str:
    """An object's age in kubectl's manner: its largest whole unit, rounded ("3d", "5h", "12m", "40s")."""
    if seconds is None:
        return "age ?"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{max(seconds, 0):.0f}s"


def window(seconds: float) -> str:
    """A query's time window as it was asked for: "1h", "90m", "2d"; "90s", "1.5h" when it is no whole unit."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:g}{unit}"
    return f"{seconds:g}s" if seconds < 3_600 else f"{seconds / 3_600:.1f}h"


def percent(value: float | None) -> str:
    """A percentage (0-100) to 3 significant digits: "87.5%"; "?" when unknown."""
    return f"{value:.3g}%" if value is not None and math.isfinite(value) else "?"
