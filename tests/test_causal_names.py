"""A named actor's name taken: the answer names who holds it (often a detached actor an earlier job left)."""

from __future__ import annotations

from tests.test_causal_reasoning import HEAD, NOW, actor, job, node, task

from ray_mcp.diagnosis import explain as causal
from ray_mcp.diagnosis.graph import GraphInputs

TAKEN = (
    "ray.exceptions.ActorAlreadyExistsError: The name replay_buffer (namespace=None) is already taken. Please "
    "use a different name or get the existing actor using ray.get_actor('replay_buffer')"
)


def evidence(holders: list[dict]) -> GraphInputs:
    earlier = {**job("07000000", "SUCCEEDED", "python warmup.py")}
    return GraphInputs(
        now_ms=NOW,
        job=job("08000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[job("08000000", "FAILED"), earlier],
        pgs=[],
        actors=[],
        tasks=[],
        related_actors=holders,
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 18, in <module>',
            '    buf = ReplayBuffer.options(name="replay_buffer", lifetime="detached").remote()',
            TAKEN,
        ],
    )


def test_a_taken_actor_name_names_the_detached_holder_and_its_ended_job() -> None:
    holder = actor("b" * 32, "ReplayBuffer", "07000000", "ALIVE", name="replay_buffer", is_detached=True)
    phrase, chains, _ = causal.explain_job(evidence([holder]))
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("FAILED") and len(line.encode()) <= 300, line
    assert "replay_buffer" in line and "detached" in line and "07000000" in line and "SUCCEEDED" in line, line


def test_a_namesake_in_another_namespace_is_not_named_as_the_holder() -> None:
    """Ray keys a name by its namespace: the error names "training", so the actor of that name in "eval" holds
    nothing here, and the one in "training" does."""
    taken = TAKEN.replace("namespace=None", "namespace=training")
    elsewhere = actor(
        "d" * 32, "ReplayBuffer", "05000000", "ALIVE", name="replay_buffer", ray_namespace="eval"
    )
    ev = evidence([elsewhere])
    ev.driver_lines = [*ev.driver_lines[:-1], taken]
    line = causal.verdict_line(*causal.explain_job(ev)[:2])
    assert "no actor holds it now" in line and "05000000" not in line, line
    holder = actor(
        "b" * 32, "ReplayBuffer", "07000000", "ALIVE", name="replay_buffer", ray_namespace="training"
    )
    ev.related_actors = [elsewhere, holder]
    line = causal.verdict_line(*causal.explain_job(ev)[:2])
    assert "07000000" in line and "05000000" not in line, line


def test_a_taken_name_with_no_holder_left_says_so_rather_than_guessing() -> None:
    dead = actor("c" * 32, "ReplayBuffer", "07000000", "DEAD", name="replay_buffer")
    phrase, chains, _ = causal.explain_job(evidence([dead]))
    line = causal.verdict_line(phrase, chains)
    assert "no actor holds it now" in line and "07000000" not in line, line


def test_a_task_that_failed_calling_a_killed_actor_names_the_kill_not_its_own_reraise() -> None:
    """run_rollouts called ps.get_weights() after the driver killed ps: the driver re-raises run_rollouts' error,
    whose origin is the call it made (its child task), which failed because ray.kill ended the actor."""
    ps, caller = "e" * 32, "t-run"
    killed = {
        "actor_died_error_context": {
            "reason": "RAY_KILL",
            "error_message": "The actor is dead because it was killed by `ray.kill`.",
        }
    }
    died = "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
    ev = GraphInputs(
        now_ms=NOW,
        job=job("06000000", "FAILED"),
        nodes=[node(HEAD)],
        jobs=[job("06000000", "FAILED")],
        pgs=[],
        actors=[actor(ps, "ParameterServer", "06000000", "DEAD", death_cause=killed)],
        tasks=[
            task(
                caller,
                "run_rollouts",
                "06000000",
                "FAILED",
                error_type="TASK_EXECUTION_EXCEPTION",
                error_message=f"ray::run_rollouts() (pid=1, ip=10.0.0.1)\n{died}",
            ),
            task(
                "t-get",
                "ParameterServer.get_weights",
                "06000000",
                "FAILED",
                type="ACTOR_TASK",
                actor_id=ps,
                parent_task_id=caller,
                error_type="ACTOR_DIED",
                error_message="The actor is dead because it was killed by `ray.kill`.",
            ),
        ],
        driver_lines=[
            "Traceback (most recent call last):",
            '  File "main.py", line 30, in <module>',
            "    ray.get(run_rollouts.remote(ps))",
            "ray.exceptions.RayTaskError(ActorDiedError): ray::run_rollouts() (pid=1, ip=10.0.0.1)",
            '  File "main.py", line 19, in run_rollouts',
            "    version, weights = ray.get(ps.get_weights.remote())",
            died,
        ],
    )
    phrase, chains, _ = causal.explain_job(ev)
    line = causal.verdict_line(phrase, chains)
    assert line.startswith("FAILED") and "ParameterServer" in line and "ray.kill" in line, line
