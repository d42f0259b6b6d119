"""The trend rules (diagnosis/rules/trends.py) over trend records written here (not live): the findings the live
scenarios cannot make on this machine on demand (a Serve p99 that rose after a deploy, a filling object store, CPUs
held idle, a node whose memory grows) and the edges of each test. Stand-in: the series summaries, as
diagnosis/history.py records them from a Prometheus, are written by hand; tests/test_diagnosis_trends.py reads
real ones. Each check is run again with its rule taken out, where it must fail."""

from __future__ import annotations

from typing import Any

from tests.rule_checks import without

from ray_mcp.diagnosis import report
from ray_mcp.diagnosis.graph import GraphInputs
from ray_mcp.limits import DIAGNOSIS_BYTES

NOW = 1_800_000_000.0
GIB = 1024**3


def series(name: str, labels: dict[str, str], trend: str, **figures: Any) -> dict[str, Any]:
    return {"name": name, "labels": labels, "trend": trend, "points": 120, "gaps": 0, **figures}


def panel(title: str, *rows: dict[str, Any]) -> dict[str, Any]:
    return {"title": title, "unit": "count", "promql": "...", "total": len(rows), "series": list(rows)}


def record(**panels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "prometheus": "http://prom:9090",
        "window": {"start": NOW - 1800, "end": NOW, "step_s": 15.0},
        "threshold": {"fraction": 0.95, "source": "configured"},
        "panels": panels,
    }


NODE = {"instance": "10.0.0.1:8080"}
NODE_MEMORY = [
    panel("Memory use", series("10.0.0.1:8080", NODE, "rising", last=60.0)),
    panel(
        "Memory used", series("10.0.0.1:8080", NODE, "rising", first=4 * GIB, last=6 * GIB, slope_per_s=2**20)
    ),
]


def health(trends: dict[str, Any], **more: Any) -> tuple[Any, str]:
    ev = GraphInputs(now_ms=NOW * 1000, trends=trends, status={"nodes": []}, **more)
    return report.health_report("recorded", ev, max_bytes=DIAGNOSIS_BYTES.default)


def job(trends: dict[str, Any], **more: Any) -> tuple[Any, str]:
    info = {
        "job_id": "02000000",
        "submission_id": "raysubmit_t",
        "status": "RUNNING",
        "start_time": (NOW - 900) * 1000,
    }
    ev = GraphInputs(now_ms=NOW * 1000, job=info, tasks=[], actors=[], trends=trends, **more)
    return report.job_report("raysubmit_t", ev, max_bytes=DIAGNOSIS_BYTES.default)


def kinds(model: Any) -> list[str]:
    return [f.kind for f in model.findings]


def test_a_node_whose_memory_grows_steadily_is_a_leak_with_the_time_left() -> None:
    model, text = health(record(node_memory=NODE_MEMORY))
    leak = next(f for f in model.findings if f.kind == "memory_leak")
    assert "node 10.0.0.1:8080's memory grows steadily: 60 MiB/min" in leak.title, text
    # 6 GiB is 60%: 10 GiB in all; 9.5 GiB at 95%, 3.5 GiB away at 1 MiB/s: 3584 s
    assert "its node is at 60%" in leak.title and "in about 59m44s" in leak.title, leak.title
    assert model.status == "PROBLEMS_FOUND"
    with without("trends.cluster_trends"):
        assert "memory_leak" not in kinds(health(record(node_memory=NODE_MEMORY))[0])


def test_memory_that_rose_in_one_step_or_slowly_is_no_leak() -> None:
    stepped = [NODE_MEMORY[0], panel("Memory used", {**NODE_MEMORY[1]["series"][0], "trend": "stepped_up"})]
    slow = [NODE_MEMORY[0], panel("Memory used", {**NODE_MEMORY[1]["series"][0], "slope_per_s": 1024.0})]
    for panels in (stepped, slow):
        assert "memory_leak" not in kinds(health(record(node_memory=panels))[0])


def test_a_serve_p99_that_rose_names_when_and_the_deploy_nearest() -> None:
    rise = series(
        "app/Model",
        {"application": "app", "deployment": "Model"},
        "stepped_up",
        change={"at": "2027-01-15T07:50:00Z", "before": 20.0, "after": 400.0},
    )
    deployed = 1_800_000_000.0 - 30 * 60 + 20  # 07:30:20, twenty minutes before: too far
    serve = {"applications": {"app": {"last_deployed_time_s": deployed}}}
    model, text = health(record(serve=[panel("p99 latency", rise)]), serve=serve)
    found = next(f for f in model.findings if f.kind == "serve_regression")
    assert 'deployment "Model" of "app"\'s p99 latency rose at 2027-01-15T07:50:00Z' in found.title, text
    assert "20 ms before, 400 ms after" in found.title and "no deploy or event within" in found.title
    serve["applications"]["app"]["last_deployed_time_s"] = 1_800_000_000.0 - 600 + 30  # 07:50:30
    found = next(f for f in health(record(serve=[panel("p99 latency", rise)]), serve=serve)[0].findings)
    assert 'nearest: application "app" deployed at 2027-01-15T07:50:30Z' in found.title, found.title
    with without("trends.cluster_trends"):
        assert "serve_regression" not in kinds(health(record(serve=[panel("p99 latency", rise)]))[0])


def test_an_object_store_filling_steadily_says_when_it_is_full() -> None:
    use = series("10.0.0.1:8080", NODE, "rising", first=20.0, last=80.0, slope_per_s=0.05)
    model, text = job(record(object_store=[panel("Object store use", use)]))
    found = next(f for f in model.findings if f.kind == "store_filling")
    assert "fills steadily: 20% to 80% used" in found.title and "full in about 6m40s" in found.title, text
    with without("trends.job_trends"):
        assert "store_filling" not in kinds(job(record(object_store=[panel("Object store use", use)]))[0])


def test_cpus_a_running_job_holds_while_its_workers_idle_are_named() -> None:
    cpu = [
        series("a/ray::Trainer", {"instance": "a", "Component": "ray::Trainer"}, "steady", mean=3.0, max=9.0),
        series("a/ray::Loader", {"instance": "a", "Component": "ray::Loader"}, "steady", mean=2.0, max=4.0),
    ]
    actors = [
        {"actor_id": "a" * 32, "class_name": "Trainer", "state": "ALIVE", "required_resources": {"CPU": 2}},
        {"actor_id": "b" * 32, "class_name": "Loader", "state": "ALIVE", "required_resources": {"CPU": 2}},
    ]
    trends = record(worker_cpu=[panel("Worker CPU", *cpu)])
    model, text = job(trends)
    assert "idle_resources" not in kinds(model), text  # no CPUs held: nothing to call idle
    info = {
        "job_id": "02000000",
        "submission_id": "raysubmit_t",
        "status": "RUNNING",
        "start_time": (NOW - 900) * 1000,
    }
    ev = GraphInputs(now_ms=NOW * 1000, job=info, tasks=[], actors=actors, trends=trends)
    model, text = report.job_report("raysubmit_t", ev, max_bytes=DIAGNOSIS_BYTES.default)
    found = next(f for f in model.findings if f.kind == "idle_resources")
    assert "holds 4 CPU(s) but its workers used 5% of one core on average" in found.title, text
    with without("trends.job_trends"):
        model, _ = report.job_report("raysubmit_t", ev, max_bytes=DIAGNOSIS_BYTES.default)
        assert "idle_resources" not in kinds(model)


def test_without_history_the_answer_says_so_and_a_failed_read_is_unknown_never_healthy() -> None:
    model, text = health(
        {"unknown": "its Prometheus did not answer within 6 s"}, unchecked=["trends over time"]
    )
    assert model.status == "UNKNOWN" and "trends over time" in model.unchecked, text


def test_a_series_that_stopped_reporting_is_no_leak_now() -> None:
    gone = {**NODE_MEMORY[1]["series"][0], "ended_at": "2027-01-15T07:40:00Z"}
    assert "memory_leak" not in kinds(
        health(record(node_memory=[NODE_MEMORY[0], panel("Memory used", gone)]))[0]
    )


def test_gpus_a_running_job_holds_on_nodes_whose_gpus_idle_are_named() -> None:
    gpu = {"instance": "10.0.0.2:8080", "GpuIndex": "0", "GpuDeviceName": "A100"}
    other = {"instance": "10.0.0.3:8080", "GpuIndex": "0", "GpuDeviceName": "A100"}
    use = [
        series("10.0.0.2:8080/0/A100", gpu, "steady", mean=4.0, max=30.0),
        series("10.0.0.3:8080/0/A100", other, "steady", mean=95.0, max=99.0),  # another node: not the job's
    ]
    actors = [{"actor_id": "c" * 32, "state": "ALIVE", "node_id": "n2", "required_resources": {"GPU": 1}}]
    nodes = [{"node_id": "n2", "node_ip": "10.0.0.2"}, {"node_id": "n3", "node_ip": "10.0.0.3"}]
    info = {
        "job_id": "02000000",
        "submission_id": "raysubmit_t",
        "status": "RUNNING",
        "start_time": (NOW - 900) * 1000,
    }
    ev = GraphInputs(
        now_ms=NOW * 1000,
        job=info,
        tasks=[],
        actors=actors,
        nodes=nodes,
        trends=record(node_gpu=[panel("GPU use", *use)]),
    )
    model, text = report.job_report("raysubmit_t", ev, max_bytes=DIAGNOSIS_BYTES.default)
    found = next(f for f in model.findings if f.kind == "idle_resources")
    assert "holds 1 GPU(s) but the GPUs of its nodes were 4% busy on average" in found.title, text
    with without("trends.job_trends"):
        model, _ = report.job_report("raysubmit_t", ev, max_bytes=DIAGNOSIS_BYTES.default)
        assert "idle_resources" not in kinds(model)


def test_without_a_prometheus_a_note_says_history_was_not_available_after_what_could_not_be_read() -> None:
    model, text = health(
        {"missing": "no Prometheus is known (none is configured)"}, unreadable=["the failed tasks: timed out"]
    )
    assert model.notes[-1].startswith("History not available: no Prometheus is known (none is configured)"), (
        text
    )
    assert "trends over time" not in model.unchecked and "Could not read the failed tasks" in text
