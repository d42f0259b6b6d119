"""Change over time, from the cluster's Prometheus (diagnosis/history.py reads it, diagnosis/trends.py recognises
it): a RUNNING job's worker memory growing steadily (a leak, its rate and the time left before the memory
monitor), a node's; an object store filling or spilling more and more; a Serve deployment whose latency or errors
rose (when, and the deploy or event nearest); a job's CPUs held but idle; a collapse in tasks finished per minute.
Each states the figures it rests on. Without history these rules have nothing to read: the answer's notes say
why (no Prometheus known, or one that did not answer: then "trends over time" is unchecked, never healthy)."""

from __future__ import annotations

from ray_mcp.amounts import duration
from ray_mcp.diagnosis import trends
from ray_mcp.diagnosis.facts import CONTEXT, PROBLEM, Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import Graph, num
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.limits import EVENT_NEAR_S
from ray_mcp.models.metrics import Unit
from ray_mcp.shaping.metrics import amount, iso
from ray_mcp.text import quoted

OBS_DOC = "ray-docs://reference/13-dashboard-observability"
SERVE_DOC = "ray-docs://reference/09-ray-serve"
LEAK_SEVERITY = PROBLEM + 25  # above CONTEXT + 10: a RUNNING job with a leak is "not healthy"
LEAK_SOON_S = 900  # a leak this close to the memory monitor's threshold ranks higher
TREND_PROBLEM = PROBLEM + 22


def _leak_words(f: Link) -> str:
    leak: trends.Leak = f["leak"]
    grew = (
        f"{f.subject} grows steadily: {amount(leak.rate_per_s * 60, 'bytes')}/min, "
        f"{amount(leak.first, 'bytes')} to {amount(leak.last, 'bytes')} in {duration(leak.span_s)}"
    )
    threshold = f"the memory monitor's threshold ({f['threshold']:.0%}, {f['source']})"
    if leak.left_s is None:
        return f"{grew}; its node's memory use is unknown, so not the time left before {threshold}"
    now = f"its node is at {leak.node_share:.0%}" if leak.node_share is not None else "its node"
    if leak.left_s == 0:
        return f"{grew}; {now}, past {threshold}: workers may be killed now"
    return f"{grew}; {now}: at this rate it reaches {threshold} in about {duration(leak.left_s)}"


LEAK = Say("memory_leak", Edge.HOLDS, _leak_words)


def _rate(per_min: float) -> str:
    """Tasks per minute as a person reads them: 4,240 (never 4.24e+03), 3.05."""
    return f"{per_min:,.0f}" if per_min >= 100 else f"{per_min:.3g}"


COLLAPSED = Say(
    "throughput_collapsed",
    Edge.WAITS_ON,
    lambda f: (
        f"tasks finished per minute collapsed at {iso(f['drop'].at)}: {_rate(f['drop'].before)}/min before, "
        f"{_rate(f['drop'].after)}/min after ({_rate(f['drop'].last)}/min at the end of the window)"
    ),
)


def _rise_words(f: Link) -> str:
    rise: trends.Rise = f["rise"]
    unit: Unit = "ms" if rise.what == "p99 latency" else "per_s"
    said = (
        f"{f.subject}'s {rise.what} rose at {iso(rise.at)}: {amount(rise.before, unit)} before, "
        f"{amount(rise.after, unit)} after"
    )
    near = f.get("near")
    return (
        f"{said}; nearest: {near}"
        if near
        else f"{said}; no deploy or event within {duration(EVENT_NEAR_S)} of it"
    )


ROSE = Say("serve_rose", Edge.WAITS_ON, _rise_words)


def _fill_words(f: Link) -> str:
    fill: trends.Filling = f["fill"]
    if fill.what == "spilled":
        return (
            f"the object store on {fill.instance} spills more and more: "
            f"{amount(fill.first, 'bytes_per_s')} to {amount(fill.last, 'bytes_per_s')} spilled"
        )
    left = f"; full in about {duration(fill.left_s)} at this rate" if fill.left_s else "; it is full"
    return (
        f"the object store on {fill.instance} fills steadily: {fill.first:.0f}% to {fill.last:.0f}% used, "
        f"+{fill.rate_per_s * 60:.3g} points/min{left}"
    )


FILLING = Say("store_filling", Edge.HOLDS, _fill_words)
IDLE = Say(
    "idle_resources",
    Edge.HOLDS,
    lambda f: (
        f"the job holds {f['idle'].cpus:g} CPU(s) but its workers used {f['idle'].mean_pct:.3g}% of one core on "
        f"average over {duration(f['idle'].span_s)} (at most {f['idle'].peak_pct:.3g}%): they are idle, waiting on "
        "something else"
    ),
)

IDLE_GPUS = Say(
    "idle_gpus",
    Edge.HOLDS,
    lambda f: (
        f"the job holds {f['idle'].gpus:g} GPU(s) but the GPUs of its nodes were {f['idle'].mean_pct:.3g}% busy on "
        f"average over the window (at most {f['idle'].peak_pct:.3g}%): reserved, and idle"
    ),
)


def _worker(leak: trends.Leak) -> str:
    if leak.component:
        return f"worker {quoted(leak.component)} on {leak.instance}"
    return f"node {leak.instance}'s memory"


def leak_chains(r: trends.Reading, job_id: str | None, job: str) -> list[Chain]:
    workers = trends.leaks(r, "worker_memory", "Worker memory")
    found = {leak.instance for leak in workers}
    nodes = [n for n in trends.leaks(r, "node_memory", "Memory used") if n.instance not in found]
    out = []
    for leak in [*workers, *nodes]:
        soon = leak.left_s is not None and leak.left_s < LEAK_SOON_S
        question = "worker_memory" if leak.component else "node_memory"
        narrowing = f" job={job}" if job and leak.component else ""
        out.append(
            Chain(
                LEAK_SEVERITY + (10 if soon else 0),
                Kind.MEMORY_LEAK,
                None,
                [
                    LEAK(
                        _worker(leak),
                        leak.spark,
                        leak=leak,
                        threshold=r.threshold,
                        source=r.threshold_source,
                    )
                ],
                [f"get_metrics question={question}{narrowing} last=1h", "summarize_objects (what it holds)"],
                job_id,
                subjects={f"leak:{leak.name}"},
            )
        )
    return out


@rule(
    On.JOB,
    Kind.MEMORY_LEAK,
    order=90,
    refs=(OBS_DOC,),
    reads=("trends", "job", "tasks", "actors"),
    also=(Kind.THROUGHPUT_DROP, Kind.IDLE_RESOURCES, Kind.STORE_FILLING),
)
def job_trends(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A RUNNING job, over its last minutes: its workers' memory growing steadily (a leak: the rate, and the time
    left before the memory monitor's threshold), tasks finished per minute collapsed, the CPUs it holds idle,
    an object store filling or spilling more and more."""
    r = trends.reading(g.ev)
    if r is None or status != "RUNNING":
        return []
    job = str((g.ev.job or {}).get("submission_id") or job_id or "")
    out = leak_chains(r, job_id, job)
    drop = trends.collapse(r)
    if drop is not None:
        out.append(
            Chain(
                TREND_PROBLEM,
                Kind.THROUGHPUT_DROP,
                None,
                [COLLAPSED(drop=drop)],
                [
                    f"get_metrics question=tasks job={job} last=1h",
                    f"list_tasks job={job} state=RUNNING",
                ],
                job_id,
                subjects={"throughput"},
            )
        )
    gpus, gpu_nodes = trends.held(g.ev, "GPU")
    unused = trends.idle_gpus(r, gpus, gpu_nodes)
    if unused is not None:
        out.append(
            Chain(
                PROBLEM + 5,
                Kind.IDLE_RESOURCES,
                None,
                [IDLE_GPUS(idle=unused)],
                [
                    f"stack_traces job={job} (what its workers wait on)",
                    "get_metrics question=node_gpu last=1h",
                ],
                job_id,
                subjects={"idle_gpus"},
            )
        )
    spent = trends.idle(r, trends.held(g.ev, "CPU")[0])
    if spent is not None:
        out.append(
            Chain(
                PROBLEM,
                Kind.IDLE_RESOURCES,
                None,
                [IDLE(idle=spent)],
                [f"stack_traces job={job} (what its workers wait on)"],
                job_id,
                subjects={"idle"},
            )
        )
    out += fill_chains(r)
    return out


def fill_chains(r: trends.Reading) -> list[Chain]:
    return [
        Chain(
            TREND_PROBLEM if fill.what == "use" else CONTEXT + 10,
            Kind.STORE_FILLING,
            None,
            [FILLING(fill=fill)],
            ["summarize_objects (who holds it)", "get_metrics question=object_store last=1h"],
            subjects={f"store_filling:{fill.instance}:{fill.what}"},
        )
        for fill in trends.store_filling(r)
    ]


@rule(
    On.CLUSTER,
    Kind.MEMORY_LEAK,
    order=150,
    refs=(OBS_DOC,),
    reads=("trends", "serve", "events"),
    also=(Kind.THROUGHPUT_DROP, Kind.STORE_FILLING, Kind.SERVE_REGRESSION),
)
def cluster_trends(g: Graph, chains: list[Chain]) -> list[Chain]:
    """The cluster over its last minutes: a worker's or node's memory growing steadily (a leak, with the time
    left before the memory monitor's threshold), an object store filling or spilling more and more, a Serve
    deployment whose p99 latency or errors rose (when, and the deploy or event nearest), a collapse in tasks
    finished per minute."""
    r = trends.reading(g.ev)
    if r is None:
        return []
    out = leak_chains(r, None, "")
    out += fill_chains(r)
    for rise in trends.serve_rises(r):
        out.append(
            Chain(
                TREND_PROBLEM,
                Kind.SERVE_REGRESSION,
                None,
                [
                    ROSE(
                        f"deployment {quoted(rise.deployment)} of {quoted(rise.app)}",
                        rise=rise,
                        near=nearest(g, rise.at, rise.app),
                    )
                ],
                [f"get_metrics question=serve deployment={rise.deployment} last=1h", "serve_status"],
                subjects={f"serve_rose:{rise.app}:{rise.deployment}:{rise.what}"},
            )
        )
    drop = trends.collapse(r)
    if drop is not None:
        out.append(
            Chain(
                PROBLEM,
                Kind.THROUGHPUT_DROP,
                None,
                [COLLAPSED(drop=drop)],
                ["get_metrics question=tasks last=1h", "list_jobs (which job stopped finishing tasks)"],
                subjects={"throughput"},
            )
        )
    return out


def nearest(g: Graph, at: float, app: str | None = None) -> str:
    """The deploy (a Serve application's last deploy) or cluster event nearest to ``at``, within EVENT_NEAR_S.
    The deploy of ``app`` itself, when it is that near, comes before anything else on the cluster (another
    job's event a few seconds closer says nothing about this deployment)."""
    candidates: list[tuple[float, str]] = []
    for name, details in ((g.ev.serve or {}).get("applications") or {}).items():
        deployed = num((details or {}).get("last_deployed_time_s"))
        if deployed:
            said = f"application {quoted(name)} deployed at {iso(deployed)}"
            if name == app and abs(deployed - at) <= EVENT_NEAR_S:
                return said
            candidates.append((deployed, said))
    for e in g.ev.events or []:
        ts = num(e.get("timestamp"))
        if ts:
            first = str(e.get("message") or "").strip().splitlines()[:1]
            candidates.append((ts, f"event at {iso(ts)}: {quoted(first[0] if first else '')}"))
    close = [(abs(ts - at), words) for ts, words in candidates if abs(ts - at) <= EVENT_NEAR_S]
    return min(close)[1] if close else ""
