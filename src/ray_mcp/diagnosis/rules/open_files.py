"""A process out of file descriptors ("Too many open files", EMFILE): the worker hit its open-file limit, the
``ulimit -n`` it inherited from the raylet, which inherited it from whatever ran ``ray start``. Ray opens
several descriptors per worker and per connection, so the default soft limit of 1024 is often too low; a file
or socket opened per call and never closed hits any limit in the end."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.facts import Edge, Kind, Link, Say, said
from ray_mcp.diagnosis.graph import Graph, Row
from ray_mcp.diagnosis.recognise import exc_quote
from ray_mcp.diagnosis.registry import On, rule

CLUSTER_DOC = "ray-docs://reference/10-ray-cluster"

# The C library's words for EMFILE (errno 24 on Linux and macOS), as Python's OSError and gRPC print them.
EMFILE = re.compile(r"Too many open files|\[Errno 24\]|\bEMFILE\b")

OUT_OF_FILES = Say(
    "out_of_files",
    Edge.ENDED_BY,
    said(
        "{subject} ran out of file descriptors (EMFILE): its process hit its open-file limit, the `ulimit -n` "
        "the worker inherits from where `ray start` ran. Raise it there (`ulimit -n 65536`, LimitNOFILE, a "
        "container's nofile ulimit) or close the files and sockets opened per call"
    ),
)


def emfile_text(g: Graph, error: str, node_id: str | None, pid: object) -> str:
    """The words that say a process hit its file descriptor limit: the error Ray recorded, else the tail of the
    worker's stderr (a worker that died of it); "" when neither says so."""
    if EMFILE.search(error):
        return error
    log = "\n".join(g.worker_log(node_id, pid))
    return log if EMFILE.search(log) else ""


@rule(
    On.TASK_END,
    Kind.OPEN_FILES,
    order=76,  # before a worker crash (78): a worker that died of EMFILE died of its limit
    refs=(CLUSTER_DOC,),
    reads=("tasks", "worker_logs"),
)
def task_out_of_files(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task whose error or worker's stderr says "Too many open files": the worker's file descriptor limit
    (ulimit -n), and how to raise it or what leaks."""
    text = emfile_text(g, str(t.get("error_message") or ""), t.get("node_id"), t.get("worker_pid"))
    return [OUT_OF_FILES(g.task_label(t), exc_quote(text))] if text else []


@rule(On.ACTOR_END, Kind.OPEN_FILES, order=79, refs=(CLUSTER_DOC,), reads=("actors", "worker_logs"))
def actor_out_of_files(g: Graph, row: Row, depth: int) -> list[Link]:
    """An actor whose death cause or worker's stderr says "Too many open files": the same limit."""
    ctx = (row.get("death_cause") or {}).get("actor_died_error_context") or {}
    pid = ctx.get("pid") or row.get("pid")
    text = emfile_text(g, str(ctx.get("error_message") or ""), row.get("node_id"), pid)
    return [OUT_OF_FILES(g.actor_label(row), exc_quote(text))] if text else []
