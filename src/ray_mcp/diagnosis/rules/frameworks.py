"""Ray's libraries (Train, Tune, Data, Serve) on a failure: the user's exception the library recorded (a
training worker's, a trial's) is the cause, and the library's own actors it tore down afterwards are not. The
headline is the recorded exception, with the library and the worker rank that raised it; the torn-down actors
rank as context."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.facts import CONTEXT, Chain, Edge, Kind, Say
from ray_mcp.diagnosis.graph import Graph, names
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules.driver import Raised
from ray_mcp.diagnosis.tracebacks import forwarded
from ray_mcp.limits import FRAMEWORK_SEARCH_LINES

TRAIN_DOC = "ray-docs://reference/12-job-submission"

# The error a library raises in the driver around the user's exception it recorded: "ray.train.WorkerGroupError:
# Training failed due to worker errors:", "ray.tune.error.TuneError: ...", with "[Rank 1 Error Snippet]" after it.
FRAMEWORK_ERROR = re.compile(r"^(?P<type>ray\.(?P<lib>train|tune|data|serve)\.[\w.]*(?:Error|Exception)):")
RANK = re.compile(r"\[Rank (?P<rank>\d+) Error Snippet\]")
LIBRARIES = {"train": "Ray Train", "tune": "Ray Tune", "data": "Ray Data", "serve": "Ray Serve"}
# The libraries' own actors (Ray's class names): torn down when a run fails, never its cause.
INTERNAL_ACTORS = frozenset(
    {
        "TrainController",
        "RayTrainWorker",
        "SynchronizationActor",
        "DatasetManager",
        "PlacementGroupCleaner",
        "PreemptionWatcher",
        "TrainTrainable",
        "ImplicitFunc",
        "_Inner",
        "TuneController",
        "_StatsActor",
        "_AutoscalingCoordinatorActor",
        "SplitCoordinator",
        "AutoscalingRequester",
        "ServeController",
        "ProxyActor",
    }
)

RECORDED = Say(
    "framework_recorded",
    Edge.RAISED_IN,
    lambda f: (
        f"{f['library']} failed on the user's exception it recorded"
        + (f" from worker rank {f['rank']}" if f["rank"] else "")
        + f": {f['error']}"
        + (f" at {f['where']}" if f["where"] else "")
        + (
            f"; the actors {f['library']} tore down after it ({f['torn']}) are not the cause"
            if f["torn"]
            else ""
        )
    ),
)


def _framework_error(lines: list[str]) -> tuple[str, str, str] | None:
    """(library, its error type, the rank that raised) from the driver's own lines (not workers' forwarded)."""
    own = [line for line in lines[-FRAMEWORK_SEARCH_LINES:] if not forwarded(line)]
    found = None
    for i, line in enumerate(own):
        m = FRAMEWORK_ERROR.match(line.strip())
        if m:
            rank = next((r["rank"] for later in own[i : i + 4] for r in [RANK.search(later)] if r), "")
            found = (LIBRARIES[m["lib"]], m["type"], rank)
    return found


def _torn_down(g: Graph, job_id: str) -> list[str]:
    return sorted(
        {
            str(a.get("class_name"))
            for a in g.actors.values()
            if a.get("job_id") == job_id
            and a.get("state") == "DEAD"
            and a.get("class_name") in INTERNAL_ACTORS
        }
    )


@rule(On.DRIVER, Kind.RAISED, order=8, refs=(TRAIN_DOC,), reads=("driver_lines", "actors"))
def framework_recorded(d: Raised) -> Chain | None:
    """A library's error around the user's exception it recorded (Train's WorkerGroupError, Tune's TuneError):
    that exception, where it was raised and by which worker rank; the library's actors it tore down after it are
    named as not the cause."""
    found = _framework_error(list(d.lines))
    inner = d.tb.innermost
    if found is None or inner is None or FRAMEWORK_ERROR.match(f"{inner[0]}:"):
        return None
    library, _type, rank = found
    link = RECORDED(
        "",
        d.link.quote,
        library=library,
        rank=rank,
        error=f"{inner[0]}: {inner[1]}",
        where=d.tb.user_frame.short() if d.tb.user_frame else "",
        torn=names(_torn_down(d.g, d.job_id)),
    )
    return d.chain(Kind.RAISED, [link])


@rule(On.JOB, Kind.KILLED, order=101, severity=CONTEXT - 1, reads=("driver_lines", "actors"))
def framework_teardown(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """When a library recorded the user's exception, chains about only its own actors (torn down by the failing
    run) rank as context below it, whatever ended them."""
    if not job_id or _framework_error(list(g.ev.driver_lines or [])) is None:
        return []
    for c in chains:
        classes = {
            str(g.entities[s].row.get("class_name") or str(g.entities[s].row.get("name") or "").split(".")[0])
            for s in c.subjects
            if s in g.entities
        }
        if classes and classes <= INTERNAL_ACTORS and not any(link.say is RECORDED for link in c.links):
            c.severity = min(c.severity, CONTEXT - 1)
    return []
