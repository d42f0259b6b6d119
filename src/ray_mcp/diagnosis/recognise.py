"""Recognisers: Ray's own words (error messages, exit records, death causes, a worker's stderr) turned into facts
the rules decide on. Each reads only what Ray or the user's program wrote, never a sentence of ours; tracebacks
are read by ``tracebacks.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ray_mcp.diagnosis.graph import OWNER_REF
from ray_mcp.limits import (
    CAUSE_CHARS,
    FATAL_LINE_CHARS,
    MEMORY_USED_CHARS,
    OOM_DETAIL_CHARS,
    QUOTE_CHARS,
    QUOTE_LINE_CHARS,
    QUOTE_LINES,
    SHORT_CAUSE_CHARS,
)
from ray_mcp.sources.kube_reasons import IMAGE_PULL_REASONS
from ray_mcp.text import one_line

# -- where an exception was raised, and what it was -----------------------------------------------------------

RAY_FRAME = re.compile(r"ray::(?P<name>[\w.<>-]+)\(\)\s*\(pid=(?P<pid>\d+), ip=(?P<ip>[\d.a-f:]+)")
_EXCEPTION_LINE = re.compile(
    r"^(?:[\w.]+\.)?(?P<type>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Died|Lost))(?:\((?P<inner>\w+)\))?:\s*(?P<msg>.*)$"
)


def first_raise(message: str | None) -> dict[str, str] | None:
    """Where an exception first happened, from Ray's "ray::f() (pid=…, ip=…)" line: the innermost one."""
    found = list(RAY_FRAME.finditer(message or ""))
    return found[-1].groupdict() if found else None


def exception_line(message: str | None) -> str:
    """The innermost "SomeError: message" line of a Ray error text."""
    last = ""
    for line in (message or "").splitlines():
        if _EXCEPTION_LINE.match(line.strip()):
            last = line.strip()
    return one_line(re.sub(r"\x1b\[[0-9;]*m", "", last), CAUSE_CHARS)


def exc_quote(text: str) -> str:
    """The telling lines of an error text: its frames and exception lines, else its start."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith("File ") or re.match(r"^[\w.]+(Error|Exception)", line)]
    return " | ".join(keep[-QUOTE_LINES:]) or one_line(text, QUOTE_CHARS)


# Ray's own errors: raised inside a task, they come from a call that task made (driver.py follows it there).
RAY_SYSTEM_ERROR = re.compile(r"ActorDied|ActorUnavailable|RayActorError|OwnerDied|ObjectLost|WorkerCrashed")
ACTOR_ERROR = re.compile(r"ActorDied|RayActorError|ActorUnavailable|ActorUnschedulable")
ACTOR_ID_IN_ERROR = re.compile(
    r"actor_id[=:]\s*([0-9a-f]{32})|Actor(?:ID)?\(([0-9a-f]{32})\)|actor ([0-9a-f]{32})"
)
# A timeout the driver raised itself: it stopped waiting.
TIMED_OUT = re.compile(r"GetTimeoutError|[Tt]ime ?out|timed out|did not finish|not ready|deadline|too long")
LOOKUP_FAILED = re.compile(r"Failed to look up actor(?: with name)? '(?P<name>[^']+)'")
RUNTIME_ENV_ERROR = "RuntimeEnvSetupError"
# Ray's words when a driver cannot reach a GCS (rpc_client.h, gcs_client.cc, worker.py).
CONNECT_FAILED = re.compile(
    r"Failed to connect to GCS at address (?P<addr>\S+) within|Failed to get cluster ID from GCS server|"
    r"Could not find any running Ray instance|Unable to connect to GCS|Failed to connect to the Ray cluster"
)
TRIED = re.compile(
    r"Connecting to existing Ray cluster at address: (?P<addr>\S+?)\.{3}|"
    r"Failed to connect to GCS at address (?P<failed>\S+) within"
)


def actor_ids(text: str) -> list[str]:
    """The actor ids an ActorDiedError (and kin) names, in the order it names them."""
    return [next(i for i in ids if i) for ids in ACTOR_ID_IN_ERROR.findall(text)]


# -- owners and lost objects ----------------------------------------------------------------------------------


def parse_owner(message: str | None) -> dict[str, str] | None:
    """The owner an OwnerDiedError (or an actor's death cause) names: its worker id, node and address."""
    m = OWNER_REF.search(message or "")
    return {k: v for k, v in m.groupdict().items() if v} if m else None


OWNER_LOST = re.compile(
    r"OwnerDiedError|ObjectLostError|owner has exited|ObjectFetchTimedOut|ReferenceCountingAssertion"
)
OBJECT_LOST = re.compile(r"ObjectLostError|ObjectReconstructionFailed|object .* (is )?lost")
JOB_FINISHED = re.compile(r"Job finishes \(\w+\) as driver exits|job has finished")


def argument_lost(message: str) -> bool:
    """Was it an argument of the task (not an object it fetched) whose owner died?"""
    return "input arguments" in message


# -- the memory monitor ---------------------------------------------------------------------------------------

# The memory monitor's own words (its kill message), not the generic "(1) the process was killed by the OOM
# killer due to high memory usage" list of possible causes Ray appends to every unexpected worker exit.
MONITOR_KILL = re.compile(
    r"memory monitor|running low on memory|Memory on the node|OOM kill reason|killed due to memory pressure",
    re.I,
)
MEMORY_LINE = re.compile(
    r"Memory on the node \(IP: (?P<ip>[^,]+), ID: (?P<node>[0-9a-f]+)\)[^\n]*?was (?P<used>[^\n]*)"
)
OOM_REASON = re.compile(r"OOM kill reason: (?P<reason>[^\n]+)")
OOM_NODE = re.compile(r"ID: ([0-9a-f]{56})")


def low_memory(message: str) -> bool:
    """Ray's task error when the memory monitor killed it."""
    return "running low on memory" in message


def memory_summary(message: str | None) -> str:
    """ "4.84GB used / 23.54GB limit, threshold 20.5%" out of the memory monitor's message."""
    text = message or ""
    m = MEMORY_LINE.search(text)
    used = one_line(m["used"], MEMORY_USED_CHARS).rstrip(".") if m else ""
    r = OOM_REASON.search(text)
    thr = re.search(r"threshold of \d+B \((?P<pct>[\d.]+% of \d+B limit)\)", text)
    threshold = re.search(r"exceeds the memory usage threshold of (?P<f>[\d.]+)", text)
    parts = [used]
    if thr:
        parts.append(f"threshold {thr['pct'].split(' of ')[0]}")
    elif threshold:
        parts.append(f"threshold {threshold['f']}")
    elif r:
        parts.append(one_line(r["reason"], OOM_DETAIL_CHARS))
    return ", ".join(p for p in parts if p)


MONITOR_THRESHOLD = re.compile(
    r"exceeds the memory usage threshold of (?P<f>0?\.\d+|1(?:\.0+)?)|threshold of \d+B \((?P<pct>[\d.]+)% of"
)


def monitor_threshold(texts: Iterable[str]) -> float | None:
    """The memory monitor's threshold (a fraction of the node's memory) as its own kill messages state it."""
    for text in texts:
        m = MONITOR_THRESHOLD.search(text)
        if m:
            value = float(m["f"]) if m["f"] else float(m["pct"]) / 100
            if 0 < value <= 1:
                return value
    return None


def oom_quote(msg: str) -> str:
    lines = [
        line
        for line in msg.splitlines()
        if re.search(r"Memory on the node|OOM kill reason|Selected to kill|task name", line)
    ]
    return " | ".join(one_line(line, QUOTE_LINE_CHARS) for line in lines[:QUOTE_LINES]) or one_line(
        msg, QUOTE_CHARS
    )


def top_memory_user(message: str) -> str:
    """The first row of the memory monitor's "Top 10 memory users" table: "ray::f (pid 123, 2.33 GB)"."""
    m = re.search(r"Top \d+ memory users:[^\n]*\n\s*(\d+)\s+([\d.]+)\s+(\S+)", message)
    return f"{m[3]} (pid {m[1]}, {m[2]} GB)" if m else ""


# -- nodes ----------------------------------------------------------------------------------------------------

NODE_ID = re.compile(r"\b[0-9a-f]{56}\b")
# How Ray records a node that was drained: the autoscaler's idle termination, a preemption, `ray drain-node`.
DRAINED = re.compile(r"drain|preempt|idle.?terminat|DRAIN_NODE_REASON", re.I)


def node_affinity(message: str, error_type: str = "") -> bool:
    """Work that hard node affinity binds to a node (Ray's scheduling error names the strategy, or the node)."""
    return "NodeAffinity" in message or (
        error_type.endswith("UNSCHEDULABLE_ERROR") and NODE_ID.search(message) is not None
    )


# -- a worker's end -------------------------------------------------------------------------------------------


class Exit(StrEnum):
    """What Ray's exit record of a worker says of how it ended."""

    WITH_JOB = "with_job"  # the job finished while it still ran
    ABRUPT = "abrupt"  # its socket closed: a signal (SIGKILL), os._exit, a native crash
    RECORDED = "recorded"  # anything else Ray recorded (quoted)


# Ray's exit record of a worker that vanished without saying why: the raylet saw its socket close (an actor's
# worker: "connection error code 2. End of file"), or its owner's RPC to it failed (a task's leased worker:
# "unrecoverable failure ... RPC error: Socket closed").
ABRUPT = re.compile(r"connection error code 2|End of file|Socket closed|unrecoverable failure")


def worker_exit(detail: str) -> Exit | None:
    if not detail:
        return None
    if "job has finished" in detail or "as driver exits" in detail:
        return Exit.WITH_JOB
    return Exit.ABRUPT if ABRUPT.search(detail) else Exit.RECORDED


FATAL = re.compile(
    r"Fatal Python error: .*|Segmentation fault|SIG[A-Z]+|signal \d+|[Ee]xit(?:ed)? (?:with )?code:? -?\d+"
)
# A frame of faulthandler's dump ("Fatal Python error" then "Stack (most recent call first):").
FAULT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
LIBRARY = re.compile(r"site-packages|dist-packages|/lib/python\d|/ray/_private/|<frozen")


@dataclass(frozen=True)
class Crash:
    """What a dead worker's stderr says: its fatal line (a fatal error, a signal) or its last exception, and for
    a fatal error the user's frame faulthandler dumped ("main.py:7 in decode")."""

    line: str
    frame: str = ""

    @property
    def memory_kill(self) -> bool:
        """Its own words say it was killed for memory."""
        low = self.line.lower()
        return "memory" in low and "kill" in low


def crash(lines: Sequence[str]) -> Crash | None:
    for i in range(len(lines) - 1, -1, -1):
        if FATAL.search(lines[i]):
            return Crash(one_line(lines[i].strip(), FATAL_LINE_CHARS), _crash_frame(lines[i + 1 :]))
    exc = exception_line("\n".join(lines))
    return Crash(exc) if exc else None


def _crash_frame(lines: Sequence[str]) -> str:
    """Where a fatal error hit, from faulthandler's stack after it: the innermost frame of the user's code."""
    for line in lines:
        m = FAULT_FRAME.match(line)
        if m and not LIBRARY.search(m["file"]):
            return f"{m['file'].rsplit('/', 1)[-1]}:{m['line']} in {m['func']}"
    return ""


# -- runtime_env ----------------------------------------------------------------------------------------------

RUNTIME_ENV_FAILED = re.compile(r"(?i)runtime.env.*(fail|error)")


def env_failure(text: str) -> str:
    """The telling line of a runtime_env setup failure: the installer's own error (pip's "ERROR: No matching
    distribution found for x==1"), else the innermost exception."""
    errors = [line.strip() for line in text.splitlines() if re.match(r"\s*(ERROR|error|E):? ", line)]
    found = [
        e for e in errors if re.search(r"No matching|not found|Could not|No such|denied|timed out", e, re.I)
    ]
    return one_line((found or errors or [exception_line(text) or text])[-1], SHORT_CAUSE_CHARS)


# -- pods (Ray's platform events) ---------------------------------------------------------------------------

# Kubernetes' words for a pod in trouble (the reason of a pod event, else its message): Ray's platform events
# carry them as the kubelet and the scheduler wrote them.
POD_TROUBLE = (
    ("pod_unschedulable", re.compile(r"^FailedScheduling$"), None),
    ("pod_oom_killed", re.compile(r"OOMKill", re.I), re.compile(r"OOMKilled")),
    ("pod_evicted", re.compile(r"^(Evicted|Preempted|Preempting)$"), None),
    (
        "image_pull",
        re.compile(f"^({'|'.join(IMAGE_PULL_REASONS)})$"),
        re.compile(f"[Ff]ailed to pull image|[Bb]ack-off pulling image|{'|'.join(IMAGE_PULL_REASONS)}"),
    ),
    (
        "pod_crash_loop",
        re.compile(r"^CrashLoopBackOff$"),
        re.compile(r"[Bb]ack-off restarting failed container"),
    ),
)
# A later event of the pod that ends the trouble: it was scheduled, its image pulled.
POD_RESOLVED = {"pod_unschedulable": ("Scheduled",), "image_pull": ("Pulled",)}


def pod_trouble(reason: str, message: str) -> str | None:
    """The trouble a pod event tells (a facts.Kind value), by its reason, else its message; None: none."""
    for kind, by_reason, by_message in POD_TROUBLE:
        if by_reason.search(reason) or (by_message is not None and by_message.search(message)):
            return kind
    return None


# -- placement groups -----------------------------------------------------------------------------------------


PG_REMOVED = re.compile(r"placement group.*(removed|destroyed)", re.I)

# -- Serve ----------------------------------------------------------------------------------------------------

SERVE_APP_FAILED = re.compile(r"Deploying application '?(?P<app>[\w.-]+)'? failed")
SERVE_ERROR = re.compile(r"RayServeException|DeploymentUnavailable")
HEALTH_CHECK = re.compile(r"health.?check", re.I)
