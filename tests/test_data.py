"""get_job's Ray Data section over the dashboard's /api/data/datasets answer and the driver log recorded from a
real stalled pipeline (tests/recorded/data_stall.json, made by test_causal_chains' Data scenario)."""

from __future__ import annotations

import copy

import pytest
from mcp import Client
from tests.causal_support import replay
from tests.support import call_ok, run_to_end, structured, text_of

from ray_mcp.shaping.data import job_datasets, progress_reports, render_datasets


def test_the_bottleneck_of_a_stalled_pipeline_is_named_first_with_its_backpressure() -> None:
    ev = replay("data_stall")
    data = job_datasets(ev.datasets or [], ev.driver_lines)
    (ds,) = data.datasets
    assert ds.state == "RUNNING" and ds.bottleneck == "MapBatches(slow)_3"
    neck = next(o for o in ds.operators if o.name == ds.bottleneck)
    assert neck.queued_blocks and neck.tasks_done == 0
    assert neck.progress and "backpressured:tasks(ResourceBudget)" in neck.progress
    assert ds.resources and "CPU" in ds.resources
    assert [o.state for o in ds.operators[:3]] == ["FINISHED"] * 3
    lines = render_datasets(data)
    assert "bottleneck:" in lines[1] and "MapBatches(slow)_3" in lines[1], lines


def test_rows_and_spilled_bytes_are_shown_only_when_prometheus_reported_them() -> None:
    ev = replay("data_stall")
    rows = copy.deepcopy(ev.datasets or [])
    assert all(
        o.spilled_bytes is None and o.rows_out is None for o in job_datasets(rows, None).datasets[0].operators
    )
    op = rows[0]["operators"][1]  # Prometheus' values come as strings; without it the dashboard sends 0
    op["ray_data_spilled_bytes"] = {"max": "1048576"}
    op["ray_data_output_rows"] = {"max": "1000"}
    data = job_datasets(rows, None)
    read = data.datasets[0].operators[1]
    assert read.spilled_bytes == 1048576 and read.rows_out == 1000
    assert "1 MiB spilled" in "\n".join(render_datasets(data))
    assert "driver log was not read" in data.notes[0]


def test_only_the_last_progress_report_of_each_dataset_counts() -> None:
    ev = replay("data_stall")
    reports = progress_reports(ev.driver_lines or [])
    assert list(reports) == [str((ev.datasets or [])[0]["dataset"])]
    names = [name for name, _ in reports[next(iter(reports))]["operators"]]
    ops = [str(o["name"]) for o in (ev.datasets or [])[0]["operators"] if o["name"] != "Input"]
    assert names == ops, names  # one line per operator, not one per report


@pytest.mark.live
async def test_asking_for_the_datasets_of_a_cluster_without_ray_data_creates_nothing(client: Client) -> None:
    """The dashboard's datasets route creates Ray Data's detached stats actor when it is missing: a read tool
    must not, so get_job asks for it only once that actor exists (this head never ran Ray Data)."""
    sid, _ = await run_to_end(client, entrypoint="python -c \"import ray; ray.init(); print('ok')\"")
    got = await call_ok(client, "get_job", {"job": sid, "datasets": True})
    assert got.structured_content["data"]["total"] == 0, text_of(got)
    assert "no Ray Data dataset" in text_of(got), text_of(got)
    actors = await structured(client, "list_actors", class_name="_StatsActor")
    assert actors["matched"] == 0, actors
