"""The house's rooms stay small enough to read (docs/architecture.md): no module of ray_mcp holds more than
MAX_MODULE_LINES lines as the formatter lays it out. A module that grows past it holds two concerns: split it
along its seam (as cluster.py / local_head.py, sources/kubernetes.py / kube_proxy.py / kube_target.py)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ray_mcp"
MAX_MODULE_LINES = 600


def test_no_module_in_src_holds_more_than_600_lines() -> None:
    sizes = {p.relative_to(SRC).as_posix(): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}
    assert len(sizes) > 100  # the package was found, and read whole
    over = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"split by concern: {over}"
