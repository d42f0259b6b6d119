"""limits.py: a bound an agent picks per call keeps its default inside the range the tool accepts."""

import pytest

from ray_mcp.limits import Bound


def test_a_bound_refuses_a_default_outside_its_range() -> None:
    assert Bound(default=5, low=1, high=30).high == 30
    with pytest.raises(ValueError, match="between low and high"):
        Bound(default=0, low=1, high=30)
    with pytest.raises(ValueError, match="between low and high"):
        Bound(default=64_001, low=1_000, high=64_000)
