"""A named actor's name taken: the answer names who holds it (often a detached actor an earlier job left)."""

from __future__ import annotations

from tests.test_causal_reasoning import HEAD, NOW, actor, job, node

from ray_mcp.diagnosis import chains as causal
from ray_mcp.diagnosis.graph import Evidence

TAKEN = (
    "ray.exceptions.ActorAlreadyExistsError: The name replay_buffer (namespace=None) is already taken. Please "
    "use a different name or get the existing actor using ray.get_actor('replay_buffer')"
)


def evidence(holders: list[dict]) -> Evidence:
    earlier = {**job("07000000", "SUCCEEDED", "python warmup.py")}
    return Evidence(
        now_ms=NOW, job=job("08000000", "FAILED"), nodes=[node(HEAD)], jobs=[job("08000000", "FAILED"), earlier],
        pgs=[], actors=[], tasks=[], related_actors=holders,
        driver_lines=["Traceback (most recent call last):", '  File "main.py", line 18, in <module>',
                      '    buf = ReplayBuffer.options(name="replay_buffer", lifetime="detached").remote()', TAKEN],
    )  # fmt: skip


def test_a_taken_actor_name_names_the_detached_holder_and_its_ended_job() -> None:
    holder = actor("b" * 32, "ReplayBuffer", "07000000", "ALIVE", name="replay_buffer", is_detached=True)
    phrase, chains, _ = causal.explain_job(evidence([holder]))
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("FAILED") and len(line.encode()) <= 300, line
    assert "replay_buffer" in line and "detached" in line and "07000000" in line and "SUCCEEDED" in line, line


def test_a_taken_name_with_no_holder_left_says_so_rather_than_guessing() -> None:
    dead = actor("c" * 32, "ReplayBuffer", "07000000", "DEAD", name="replay_buffer")
    phrase, chains, _ = causal.explain_job(evidence([dead]))
    line = causal.verdict_line(phrase, chains)
    assert "no actor holds it now" in line and "07000000" not in line, line
