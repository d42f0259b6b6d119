"""A stalled job's processes blocked in a call that waits for something outside Ray (a socket's peer, a lock or
event another thread or process must release, a child process, a collective's other ranks): what that call
waits for, from the call its stack is blocked in. Ray cannot end such a wait; whoever should act is named by
the kind of wait."""

from __future__ import annotations

import re

from ray_mcp import models
from ray_mcp.diagnosis import hang
from ray_mcp.diagnosis.facts import STUCK, Chain, Edge, Kind, Say
from ray_mcp.diagnosis.graph import Graph
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.shaping import stacks

CORE_DOC = "ray-docs://reference/02-ray-core-tasks"

# What a blocking call waits for, by the call a stack is blocked in (Python's and the libraries' own names).
WAITS_FOR = (
    (
        re.compile(r"(^|\.)socket\.(socket\.)?(accept)$"),
        "socket",
        "a peer to connect to the socket it listens on",
    ),
    (
        re.compile(
            r"(^|\.)socket\.(socket\.)?(recv\w*|connect\w*|create_connection|sendall|makefile)$|"
            r"(^|\.)(ssl|http\.client|urllib3|requests|httpx)\."
        ),
        "socket",
        "a peer on a socket (a server or another process that does not answer)",
    ),
    (
        re.compile(
            r"(^|\.)(threading\.)?(Event|Condition|Semaphore|BoundedSemaphore|Barrier)\.(wait|acquire)$"
        ),
        "lock",
        "another thread or process to set or release a lock, event or condition",
    ),
    (re.compile(r"(^|\.)(threading\.)?Thread\.join$"), "thread", "another thread to finish"),
    (
        re.compile(r"(^|\.)queue\.(Queue|SimpleQueue)\.get$"),
        "queue",
        "another thread to put an item on a queue",
    ),
    (re.compile(r"(^|\.)subprocess\.Popen\.(wait|communicate)$"), "process", "a child process to exit"),
    (re.compile(r"(^|\.)multiprocessing\."), "process", "another process (a pipe, queue or lock it shares)"),
    (re.compile(r"filelock|(^|\.)fcntl\."), "file", "a file lock another process holds"),
    (
        re.compile(r"^dist\.|torch\.distributed|ray\.util\.collective|nccl|gloo", re.I),
        "collective",
        "every other rank to join the collective (one missing, slow or dead rank blocks them all)",
    ),
)

BLOCKED_ON = Say(
    "blocked_on",
    Edge.WAITS_ON,
    lambda f: (
        f"{f['who']} is blocked in {f['call']}"
        + (f" at {f['where']}" if f["where"] else "")
        + f": it waits for {f['what']}"
        + (f" ({f['idle']})" if f["idle"] else "")
        + "; Ray cannot end this wait"
    ),
)


def waited_for(call: str) -> tuple[str, str] | None:
    """(kind, what it waits for) of a call a stack is blocked in, or None for Ray's own waits and the rest."""
    return next(((kind, what) for pattern, kind, what in WAITS_FOR if pattern.search(call)), None)


@rule(
    On.JOB,
    Kind.WAITING,
    order=85,
    severity=STUCK + 7,
    refs=(),
    next_steps=("stack_traces job={job} for the blocked process's whole stack", "tail_logs job={job}"),
    reads=("stacks", "tasks", "job"),
)
def blocked_on(g: Graph, job_id: str | None, status: str, chains: list[Chain]) -> list[Chain]:
    """A stalled job whose process (not the driver) is blocked in a call that waits for something outside Ray:
    what that call waits for (a socket's peer, a lock, a child process, a collective's other ranks)."""
    if status != "RUNNING" or g.ev.stacks is None:
        return []
    reading = hang.reading(g.ev)
    if reading is None or reading.status != "stalled":
        return []
    groups = models.StackTraces.model_validate(g.ev.stacks).groups
    for group in groups:
        found = waited_for(group.blocked_in or "") if group.role != "driver" else None
        if found is None:
            continue
        job = g.ev.job or {}
        sid = str(job.get("submission_id") or job_id)
        link = BLOCKED_ON(
            "",
            stacks.group_line(group),
            who=f"{group.count} of {group.of} {stacks.role_text(group.role)}",
            call=group.blocked_in,
            where=group.where or "",
            what=found[1],
            idle=hang.idle_words_of(reading),
        )
        steps = [s.format(job=sid) for s in blocked_on.next_steps]
        return [Chain(STUCK + 7, Kind.WAITING, None, [link], steps, job_id, {f"stack:{group.role}"})]
    return []
