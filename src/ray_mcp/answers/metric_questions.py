"""The named questions of get_metrics and the PromQL behind each: what a Ray user asks, by name, not by metric.

Each query is Ray 2.60's own Grafana panel (ray/dashboard/modules/metrics/dashboards/*_panels.py: the default,
Serve and Data dashboards), with Grafana's variables replaced: ``{sel}`` is this cluster's session
(``SessionName``, the label Ray puts on every metric, so a Prometheus that scrapes several clusters answers for
this one) and the narrowing asked for (node, job, deployment, operator); ``{w}`` is the rate window, which
follows the step (Grafana's $__rate_interval does the same). Counters and Ray's cumulative gauges go through
rate() and histogram_quantile() in Prometheus, which handles counter resets, gaps and stale series; nothing is
re-derived here. docs/metrics.md lists the same table (tests/test_metrics_docs.py keeps them equal).

``instant`` says how to read the panel from the nodes' own metrics endpoints when no Prometheus is known: the
gauges summed per series (and a ratio of two sums), now only. A panel without it needs history (a rate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ray_mcp.models.metrics import Unit

Narrowing = Literal["node", "job", "deployment", "operator"]
# How a job narrows a question: by the names of its tasks' functions and actors' classes, in a label (with a
# prefix). Ray labels these series by name, not by job: the owner's task counts (FINISHED, PENDING...) and
# the GCS's actor counts carry no JobId, and worker memory is per process name (ray::<class or function>).
JobLabel = tuple[str, str]  # (label, prefix of the name in it)
# (label, "=" or "!=", values): keep a raw sample whose label is (or is not) one of the values
Where = tuple[tuple[str, Literal["=", "!="], frozenset[str]], ...]


@dataclass(frozen=True)
class Instant:
    """A panel read from raw samples: sum of ``numerator`` (times ``scale``) over sum of ``denominator`` (when
    given), per series of the query's ``by`` labels, over the samples whose labels pass ``where``."""

    numerator: tuple[str, ...]
    denominator: tuple[str, ...] = ()
    scale: float = 1.0
    where: Where = ()


@dataclass(frozen=True)
class Query:
    title: str
    unit: Unit
    promql: str  # a template: {sel} the label matchers of the scope, {w} the rate window
    by: tuple[str, ...]  # the labels that name a series, in order
    instant: Instant | None = None


@dataclass(frozen=True)
class Question:
    name: str
    about: str  # what it answers, in the tool's description and in docs/metrics.md
    queries: tuple[Query, ...]
    narrows: frozenset[Narrowing] = frozenset({"node"})
    job_label: JobLabel | None = None
    absent: str = "no series matched in the window"  # why the answer can be empty, and what to do


NODE = ("instance",)
GPU = ("instance", "GpuIndex", "GpuDeviceName")
DEPLOYMENT = ("application", "deployment")
OPERATOR = ("dataset", "operator")
NOT_DONE: Where = (("State", "!=", frozenset({"FINISHED", "FAILED"})),)
SERVE_SEL = 'application!="",{sel}'
BY_NAME = (
    "With job, Ray's series are matched by name (Ray labels them by task, class or process name, not by job): "
    "the job's tasks' functions and actors' classes; a name another job shares counts for both."
)


def _quantile(q: float) -> Query:
    return Query(
        f"p{round(q * 100)} latency",
        "ms",
        f"histogram_quantile({q}, sum by (application, deployment, le) "
        f"(rate(ray_serve_deployment_processing_latency_ms_bucket{{{{{SERVE_SEL}}}}}[{{w}}])))",
        DEPLOYMENT,
    )


QUESTIONS: dict[str, Question] = {
    q.name: q
    for q in (
        Question(
            "node_cpu",
            "CPU use of each node (%)",
            (
                Query(
                    "CPU use",
                    "percent",
                    "sum by (instance) (ray_node_cpu_utilization{{{sel}}})",
                    NODE,
                    Instant(("ray_node_cpu_utilization",)),
                ),
            ),
        ),
        Question(
            "node_memory",
            "memory use of each node (% and bytes; heap and object store together, as the host sees it)",
            (
                Query(
                    "Memory use",
                    "percent",
                    "sum by (instance) (ray_node_mem_used_host{{{sel}}}) * 100 / "
                    "sum by (instance) (ray_node_mem_total_host{{{sel}}})",
                    NODE,
                    Instant(("ray_node_mem_used_host",), ("ray_node_mem_total_host",), 100.0),
                ),
                Query(
                    "Memory used",
                    "bytes",
                    "sum by (instance) (ray_node_mem_used_host{{{sel}}})",
                    NODE,
                    Instant(("ray_node_mem_used_host",)),
                ),
            ),
        ),
        Question(
            "node_disk",
            "disk use (%) and disk read and write speed of each node",
            (
                Query(
                    "Disk use",
                    "percent",
                    "sum by (instance) (ray_node_disk_usage{{{sel}}}) * 100 / "
                    "(sum by (instance) (ray_node_disk_free{{{sel}}}) + sum by (instance) (ray_node_disk_usage{{{sel}}}))",
                    NODE,
                    Instant(("ray_node_disk_usage",), ("ray_node_disk_usage", "ray_node_disk_free"), 100.0),
                ),
                Query(
                    "Disk read",
                    "bytes_per_s",
                    "sum by (instance) (ray_node_disk_io_read_speed{{{sel}}})",
                    NODE,
                    Instant(("ray_node_disk_io_read_speed",)),
                ),
                Query(
                    "Disk write",
                    "bytes_per_s",
                    "sum by (instance) (ray_node_disk_io_write_speed{{{sel}}})",
                    NODE,
                    Instant(("ray_node_disk_io_write_speed",)),
                ),
            ),
        ),
        Question(
            "node_network",
            "network receive and send speed of each node",
            (
                Query(
                    "Network received",
                    "bytes_per_s",
                    "sum by (instance) (ray_node_network_receive_speed{{{sel}}})",
                    NODE,
                    Instant(("ray_node_network_receive_speed",)),
                ),
                Query(
                    "Network sent",
                    "bytes_per_s",
                    "sum by (instance) (ray_node_network_send_speed{{{sel}}})",
                    NODE,
                    Instant(("ray_node_network_send_speed",)),
                ),
            ),
        ),
        Question(
            "node_gpu",
            "GPU use and GPU memory use (%) of each GPU",
            (
                Query(
                    "GPU use",
                    "percent",
                    "sum by (instance, GpuIndex, GpuDeviceName) (ray_node_gpus_utilization{{{sel}}})",
                    GPU,
                    Instant(("ray_node_gpus_utilization",)),
                ),
                Query(
                    "GPU memory use",
                    "percent",
                    "sum by (instance, GpuIndex, GpuDeviceName) (ray_node_gram_used{{{sel}}}) * 100 / "
                    "(sum by (instance, GpuIndex, GpuDeviceName) (ray_node_gram_available{{{sel}}}) + "
                    "sum by (instance, GpuIndex, GpuDeviceName) (ray_node_gram_used{{{sel}}}))",
                    GPU,
                    Instant(
                        ("ray_node_gram_used",), ("ray_node_gram_used", "ray_node_gram_available"), 100.0
                    ),
                ),
            ),
            absent="no node reports a GPU (Ray exports GPU metrics only for nodes with GPUs it can read)",
        ),
        Question(
            "object_store",
            "object store use (%), bytes by location (in memory, spilled) and bytes spilled and restored per second",
            (
                Query(
                    "Object store use",
                    "percent",
                    "sum by (instance) (ray_object_store_memory{{{sel}}}) * 100 / "
                    'sum by (instance) (ray_resources{{Name="object_store_memory",{sel}}})',
                    NODE,
                ),
                Query(
                    "Object store bytes by location",
                    "bytes",
                    "sum by (instance, Location) (ray_object_store_memory{{{sel}}})",
                    ("instance", "Location"),
                    Instant(("ray_object_store_memory",)),
                ),
                Query(
                    "Spilled and restored",
                    "bytes_per_s",
                    "sum by (instance, State) "
                    '(rate(ray_spill_manager_objects_bytes{{State=~"Spilled|Restored",{sel}}}[{w}]))',
                    ("instance", "State"),
                ),
            ),
        ),
        Question(
            "tasks",
            "tasks by state (not yet finished) and tasks finished and failed per minute",
            (
                Query(
                    "Tasks by state",
                    "count",
                    'clamp_min(sum by (State) (ray_tasks{{State!~"FINISHED|FAILED",{sel}}}), 0)',
                    ("State",),
                    Instant(("ray_tasks",), where=NOT_DONE),
                ),
                Query(
                    "Tasks ended per minute",
                    "per_min",
                    'sum by (State) (rate(ray_tasks{{State=~"FINISHED|FAILED",{sel}}}[{w}])) * 60',
                    ("State",),
                ),
            ),
            narrows=frozenset({"node", "job"}),
            job_label=("Name", ""),
        ),
        Question(
            "actors",
            "actors by state",
            (
                Query(
                    "Actors by state",
                    "count",
                    'sum by (State) (ray_actors{{Source="gcs",{sel}}})',
                    ("State",),
                    Instant(("ray_actors",), where=(("Source", "=", frozenset({"gcs"})),)),
                ),
            ),
            narrows=frozenset({"node", "job"}),
            job_label=("Name", ""),
        ),
        Question(
            "serve",
            "per Serve deployment: requests per second, errors per second, p50, p90 and p99 latency",
            (
                Query(
                    "Requests",
                    "per_s",
                    "sum by (application, deployment) "
                    f"(rate(ray_serve_deployment_request_counter_total{{{{{SERVE_SEL}}}}}[{{w}}]))",
                    DEPLOYMENT,
                ),
                Query(
                    "Errors",
                    "per_s",
                    "sum by (application, deployment) "
                    f"(rate(ray_serve_deployment_error_counter_total{{{{{SERVE_SEL}}}}}[{{w}}]))",
                    DEPLOYMENT,
                ),
                _quantile(0.5),
                _quantile(0.9),
                _quantile(0.99),
            ),
            narrows=frozenset({"node", "deployment"}),
            absent="no Serve deployment handled a request in the window (call serve_status to see the apps)",
        ),
        Question(
            "data",
            "per Ray Data operator: rows and blocks output per second",
            (
                Query(
                    "Rows output",
                    "per_s",
                    "sum by (dataset, operator) (rate(ray_data_output_rows{{{sel}}}[{w}]))",
                    OPERATOR,
                ),
                Query(
                    "Blocks generated",
                    "per_s",
                    "sum by (dataset, operator) (rate(ray_data_num_task_outputs_generated{{{sel}}}[{w}]))",
                    OPERATOR,
                ),
            ),
            narrows=frozenset({"node", "operator"}),
            absent="no Ray Data operator reported in the window (a dataset reports while it executes)",
        ),
        Question(
            "worker_memory",
            "memory (USS) of the worker processes, per node and name (ray::<class or function>); with job, "
            "those named after the job's actors and tasks",
            (
                Query(
                    "Worker memory",
                    "bytes",
                    # > 0: Ray resets a name's gauges to 0 once no process of that name runs, so a 0 is no
                    # process, and a rise from it is one starting, not memory growing
                    'sum by (instance, Component) (ray_component_uss_bytes{{Component=~"ray::.+",{sel}}} > 0)',
                    ("instance", "Component"),
                    Instant(("ray_component_uss_bytes",)),
                ),
            ),
            narrows=frozenset({"node", "job"}),
            job_label=("Component", "ray::"),
        ),
        Question(
            "worker_cpu",
            "CPU use of the worker processes (%, 100 = one core), per node and name (ray::<class or function>); "
            "with job, those named after the job's actors and tasks",
            (
                Query(
                    "Worker CPU",
                    "percent",
                    'sum by (instance, Component) (ray_component_cpu_percentage{{Component=~"ray::.+",{sel}}})',
                    ("instance", "Component"),
                    Instant(("ray_component_cpu_percentage",)),
                ),
            ),
            narrows=frozenset({"node", "job"}),
            job_label=("Component", "ray::"),
        ),
    )
}
