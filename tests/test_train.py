"""Ray Train runs through list_train_runs and get_train_run, on the session cluster (ray[train], no torch).

Two real DataParallelTrainer runs (Train v2, Ray 2.60's default) submitted as jobs with state tracking on: one
that reports three checkpoints and finishes, one where rank 1 raises. The first test must run before any run
with state tracking exists on the cluster (Ray keeps the Train state actor for the cluster's lifetime).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
import ray.train.v2._internal.state.schema  # noqa: F401  (ray[train], of the dev extras: the Train API needs it)
from mcp import Client
from tests.support import mcp_client

from ray_mcp.models import TrainRun, TrainRunList
from ray_mcp.server.build import build_server
from ray_mcp.settings import Settings
from support import call_ok, run_to_end, text_of

TRAIN = textwrap.dedent(
    """
    import json, os, sys, tempfile
    import ray.train
    from ray.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    def loop(config):
        rank = ray.train.get_context().get_world_rank()
        for epoch in range(3):
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"epoch": epoch}, f)
                checkpoint = Checkpoint.from_directory(d) if rank == 0 else None
                ray.train.report({"epoch": epoch, "loss": 1.0 / (epoch + 1)}, checkpoint=checkpoint)
            if epoch == 1 and rank == config["fail_rank"]:
                raise ValueError(f"rank {rank} saw a NaN loss at epoch {epoch}")

    name, storage, fail_rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
    trainer = DataParallelTrainer(
        loop,
        train_loop_config={"fail_rank": fail_rank},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 0.01}),
        run_config=RunConfig(name=name, storage_path=storage, failure_config=FailureConfig(max_failures=0)),
    )
    try:
        print("RESULT", trainer.fit().metrics)
    except Exception as exc:
        print("FIT_FAILED", type(exc).__name__)
        sys.exit(1)
    """
)
STATE_TRACKING = {"env_vars": {"RAY_TRAIN_ENABLE_STATE_TRACKING": "1"}}


async def test_train_runs_are_unknown_not_empty_without_state_tracking(client: Client) -> None:
    """Before: list_train_runs was an error; it lists nothing and says the runs are unknown, and why."""
    result = await call_ok(client, "list_train_runs", {})
    data = result.structured_content
    assert data["known"] is False and data["runs"] == [], (
        "a tracked Train run ran on the session cluster first"
    )
    text = text_of(result)
    assert text.startswith("Train runs unknown") and "RAY_TRAIN_ENABLE_STATE_TRACKING=1" in text
    assert (await client.call_tool("get_train_run", {"run": "anything"})).is_error
    # the default toolsets: no Train tools until Train keeps its runs (they still answer, as above)
    assert "list_train_runs" not in {t.name for t in (await client.list_tools()).tools}


@pytest.fixture(scope="module")
def runs(ray_cluster, tmp_path_factory) -> dict[str, str]:
    """Run both trainings once, side by side (each of their workers asks for 0.01 CPU and Train's controller for
    none, so both fit the session head's 2 CPUs at once); their job ids by run name."""
    work = tmp_path_factory.mktemp("train")
    script, storage = work / "train.py", work / "results"
    script.write_text(TRAIN)

    async def run_all() -> dict[str, str]:
        server = build_server(Settings(address=ray_cluster.dashboard_url))
        jobs: dict[str, str] = {}

        async def run(c: Client, name: str, fail_rank: int) -> None:
            entrypoint = f"{sys.executable} {script} {name} {storage} {fail_rank}"
            sid, info = await run_to_end(c, 420, entrypoint=entrypoint, runtime_env=STATE_TRACKING)
            assert info["status"] == ("SUCCEEDED" if fail_rank < 0 else "FAILED"), info
            jobs[name] = sid

        try:
            async with Client(server) as c, anyio.create_task_group() as tg:
                for name, fail_rank in (("mcp_good_run", -1), ("mcp_rank1_fails", 1)):
                    tg.start_soon(run, c, name, fail_rank)
            return jobs
        finally:
            await server.app.aclose()

    return anyio.run(run_all)


async def test_list_train_runs_shows_both_runs_with_their_status(
    client: Client, runs: dict[str, str]
) -> None:
    # Train's state actor is alive now: a fresh server's default toolsets list the Train tools (a list made
    # before the read ends, on a loaded machine, lists without them: the next one has them)
    with anyio.fail_after(60):
        while not {"list_train_runs", "get_train_run"} <= {t.name for t in (await client.list_tools()).tools}:
            await anyio.sleep(0.5)
    page = TrainRunList.model_validate((await call_ok(client, "list_train_runs", {})).structured_content)
    by_name = {r.name: r for r in page.runs}
    assert by_name["mcp_good_run"].status == "FINISHED"
    assert by_name["mcp_rank1_fails"].status == "ERRORED"
    assert by_name["mcp_good_run"].submission_id == runs["mcp_good_run"]
    assert by_name["mcp_good_run"].workers == 2 and by_name["mcp_good_run"].attempts == 1
    errored = TrainRunList.model_validate(
        (await call_ok(client, "list_train_runs", {"status": "ERRORED"})).structured_content
    )
    assert [r.name for r in errored.runs] == ["mcp_rank1_fails"] and errored.total >= 2


async def test_get_train_run_shows_the_worker_group_by_rank_and_the_latest_checkpoint(
    client: Client, runs: dict[str, str]
) -> None:
    result = await call_ok(client, "get_train_run", {"run": "mcp_good_run"})
    run = TrainRun.model_validate(result.structured_content)
    assert run.status == "FINISHED" and run.errors == []
    assert [w.world_rank for w in run.worker_group] == [0, 1]
    assert all(w.actor_id and w.node_id and w.pid for w in run.worker_group)
    assert run.latest_checkpoint is not None
    assert run.latest_checkpoint.metrics == {"epoch": 2, "loss": pytest.approx(1 / 3)}
    assert run.latest_checkpoint.reports == 3 and run.latest_checkpoint.checkpoints_kept == 3
    assert run.latest_checkpoint.checkpoint_dir and run.latest_checkpoint.checkpoint_dir.startswith(
        "checkpoint_"
    )
    assert text_of(result).startswith('Train run "mcp_good_run"')
    # The same run by id.
    by_id = TrainRun.model_validate(
        (await call_ok(client, "get_train_run", {"run": run.run_id})).structured_content
    )
    assert by_id.name == "mcp_good_run"


async def test_get_train_run_names_the_rank_that_raised_and_its_error(
    client: Client, runs: dict[str, str]
) -> None:
    result = await call_ok(client, "get_train_run", {"run": "mcp_rank1_fails"})
    run = TrainRun.model_validate(result.structured_content)
    assert run.status == "ERRORED"
    (error,) = run.errors
    assert error.ranks == [1] and error.error_type == "ValueError"
    assert "rank 1 saw a NaN loss at epoch 1" in error.message
    ranks = {w.world_rank: w for w in run.worker_group}
    assert ranks[1].error is not None and ranks[0].error is None
    assert run.latest_checkpoint is not None and run.latest_checkpoint.metrics["epoch"] == 1
    text = text_of(result)
    assert "rank(s) 1 failed (ValueError)" in text.splitlines()[0]
    assert "Error on rank(s) 1: ValueError" in text


async def test_an_unknown_train_run_is_a_clear_error(client: Client, runs: dict[str, str]) -> None:
    result = await client.call_tool("get_train_run", {"run": "no_such_run"})
    assert result.is_error
    assert "No Train run with id or name 'no_such_run'" in text_of(result) and "mcp_good_run" in text_of(
        result
    )


class NoTrainDashboard(httpx.AsyncBaseTransport):
    """A dashboard whose cluster lacks ray[train]: Ray's TrainHead answers 500 'Train is not installed'."""

    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/api/train/"):
            text = "Train is not installed. Please run `pip install ray[train]` when setting up Ray on your cluster."
            return httpx.Response(500, text=text, request=request)
        return await self.real.handle_async_request(request)


@pytest.fixture
async def no_train_client(ray_cluster) -> AsyncIterator[Client]:
    async with mcp_client(
        Settings(address=ray_cluster.dashboard_url), http_transport=NoTrainDashboard()
    ) as c:
        yield c


async def test_a_cluster_without_ray_train_is_an_error_saying_so(no_train_client: Client) -> None:
    for tool, args in (("list_train_runs", {}), ("get_train_run", {"run": "x"})):
        result = await no_train_client.call_tool(tool, args)
        assert result.is_error
        assert "Ray Train is not installed" in text_of(result) and "ray[train]" in text_of(result)


def test_the_storage_of_a_remote_run_is_not_read(tmp_path: Path) -> None:
    from ray_mcp.answers.train import read_checkpoint

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "checkpoint_manager_snapshot.json").write_text('{"latest_checkpoint_result": null}')
    run = {
        "name": "r",
        "run_settings": {"run_config": {"name": "r", "storage_path": str(tmp_path)}},
        "attempts": [{"workers": [{"node_ip": "203.0.113.7"}]}],
    }
    notes: list[str] = []
    assert read_checkpoint(run, notes) is None
    assert "not on the machine ray-mcp runs on" in notes[0]
    s3 = {**run, "run_settings": {"run_config": {"name": "r", "storage_path": "s3://bucket/x"}}}
    notes = []
    assert read_checkpoint(s3, notes) is None and "not a local path" in notes[0]
