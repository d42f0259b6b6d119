"""amounts.py: one formatter per kind of amount, as an operator reads it."""

from __future__ import annotations

import pytest

from ray_mcp.amounts import (
    age,
    byte_size,
    duration,
    percent,
    resource_amount,
    resource_shape,
    resource_use,
    window,
)
from ray_mcp.diagnosis.graph import amounts


@pytest.mark.parametrize(
    ("n", "shown"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1536, "1.5 KiB"),
        (300 * 1024**2, "300 MiB"),
        (3 * 1024**3, "3 GiB"),
        (3.88 * 1024**3, "3.88 GiB"),
        (-2048, "-2 KiB"),
        (None, "?"),
        (float("nan"), "?"),
    ],
)
def test_a_size_is_in_the_largest_binary_unit_it_reaches_to_three_digits(n: float | None, shown: str) -> None:
    assert byte_size(n) == shown


def test_memory_resources_are_sizes_and_the_others_counts() -> None:
    assert resource_amount("memory", 4 * 1024**3) == "4 GiB"
    assert resource_amount("object_store_memory", 100 * 1024**2) == "100 MiB"  # not "0.0977 GiB"
    assert resource_amount("CPU", 0.5) == "0.5" and resource_amount("GPU", 2.0) == "2"
    assert resource_shape({"CPU": 1, "memory": 2 * 1024**3}) == "{CPU: 1, memory: 2 GiB}"


def test_use_against_a_total_says_the_unit_once_only_when_both_share_it() -> None:
    assert resource_use("CPU", 1, 4) == "CPU 1/4"
    assert resource_use("memory", 2 * 1024**3, 8 * 1024**3) == "memory 2/8 GiB"
    assert resource_use("memory", 512 * 1024**2, 8 * 1024**3) == "memory 512 MiB/8 GiB"
    assert resource_use("memory", 0, 8 * 1024**3) == "memory 0/8 GiB"


def test_a_duration_is_to_the_second_then_to_the_minute() -> None:
    assert [duration(s) for s in (-3, 95, 185, 7380)] == ["0s", "95s", "3m05s", "2h03m"]


def test_an_age_is_its_largest_whole_unit_and_a_window_as_it_was_asked() -> None:
    assert [age(s) for s in (None, 40, 720, 5 * 3600, 3 * 86400)] == ["age ?", "40s", "12m", "5h", "3d"]
    assert [window(s) for s in (90, 1800, 3600, 5400, 5430, 172_800)] == [
        "90s",
        "30m",
        "1h",
        "90m",
        "1.5h",
        "2d",
    ]


def test_a_percentage_has_three_digits_and_unknown_is_a_question_mark() -> None:
    assert [percent(v) for v in (87.54, 100.0, None, float("inf"))] == ["87.5%", "100%", "?", "?"]


def test_the_diagnosis_writes_a_resource_shape_as_every_other_answer_does() -> None:
    """One way to write a demand: the rules' braces around graph.amounts read as amounts.resource_shape."""
    shape = {"CPU": 1.0, "memory": 4 * 2**30, "GPU": 0.5}
    from_record = {
        "CPU": "1",
        "memory": 4 * 2**30,
        "GPU": 0.5,
    }  # Ray's REST layer writes some numbers as text
    assert "{" + amounts(from_record) + "}" == resource_shape(shape) == "{CPU: 1, memory: 4 GiB, GPU: 0.5}"
