"""Python stacks and CPU profiles of Ray processes, shaped for an agent: pure functions, no I/O.

py-spy gives one stack per thread, innermost frame first: as text (``py-spy dump``, what the dashboard's
``/worker/traceback`` returns) or as JSON (``py-spy dump --json``, what we run locally). Both are parsed into
``ProcessDump``. Then each process is reduced to the threads that run project code, Ray's and the libraries'
frames are folded (counted, not shown), and identical stacks of the same role (actor class, task function,
driver) are collapsed with counts: "4 of 4 TrainWorker: blocked in ray.get at train.py:88 in step".

CPU profiles come from ``py-spy record --format raw`` (collapsed stacks, outermost first, with a sample count
per line) and are aggregated into the functions with the most samples of their own (and in total).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ray_mcp import models
from ray_mcp.limits import STACK_PIDS_SHOWN, STACK_VERDICT_CHARS, STACK_VERDICT_GROUPS
from ray_mcp.text import as_token, quoted, truncate_text

# -- frames -------------------------------------------------------------------------------------------------

USER, RAY, LIB = "user", "ray", "lib"
_LIB_PATH = re.compile(r"/(site-packages|dist-packages)/|/lib/python3[.\d]*/|^<frozen |^<string>$")
_RAY_PATH = re.compile(r"(^|/)(site-packages|dist-packages)/ray/|(^|/)ray/_raylet|\.pyx$")
# Frames that only forward a call (decorators, Ray's client-mode and auto-init hooks): "blocked in" skips them.
_WRAPPERS = re.compile(r"(^|\.)(wrapper|_wrapper|inner|wrapped|decorator|auto_init_wrapper|_inner)$")
# Ray's public names for the functions a process blocks in (module path -> public name).
PUBLIC_NAMES = {
    "ray._private.worker.get": "ray.get",
    "ray._private.worker.wait": "ray.wait",
    "ray._private.worker.put": "ray.put",
    "ray.util.queue.Queue.get": "ray.util.queue.Queue.get",
    "ray.util.collective.collective.barrier": "ray.util.collective.barrier",
    "ray.util.collective.collective.allreduce": "ray.util.collective.allreduce",
    "ray.train._internal.session.get_session": "ray.train session",
    "torch.distributed.distributed_c10d.barrier": "dist.barrier",
    "torch.distributed.distributed_c10d.all_reduce": "dist.all_reduce",
    "torch.distributed.distributed_c10d.broadcast": "dist.broadcast",
    "torch.distributed.distributed_c10d.all_gather": "dist.all_gather",
    "threading.Event.wait": "threading.Event.wait",
    "threading.Condition.wait": "threading.Condition.wait",
    "threading.Thread.join": "threading.Thread.join",
    "queue.Queue.get": "queue.Queue.get",
    "asyncio.base_events.BaseEventLoop.run_forever": "asyncio event loop (idle)",
    "concurrent.futures._base.Future.result": "concurrent.futures.Future.result",
}
IDLE_NOTE = (
    "[idle: no project code on any thread, only Ray's task loop (an async actor's awaiting coroutines "
    "do not show in stacks)]"
)
# An idle Ray worker waits for its next task here (no task runs in it).
_IDLE_LOOP = re.compile(r"^(Worker\.)?main_loop$|^<module>$")


# Libraries a Ray job often runs in, which the server's own environment may lack (it only knows its own).
KNOWN_LIBRARIES = frozenset(
    [
        "ray",
        "torch",
        "torchvision",
        "tensorflow",
        "keras",
        "jax",
        "jaxlib",
        "flax",
        "optax",
        "numpy",
        "pandas",
        "scipy",
        "sklearn",
        "pyarrow",
        "datasets",
        "transformers",
        "accelerate",
        "deepspeed",
        "vllm",
        "xgboost",
        "lightgbm",
        "lightning",
        "pytorch_lightning",
        "peft",
        "trl",
        "huggingface_hub",
        "safetensors",
        "tokenizers",
        "grpc",
        "aiohttp",
        "requests",
        "urllib3",
        "httpx",
        "uvicorn",
        "starlette",
        "fastapi",
        "pydantic",
        "pytest",
        "_pytest",
        "gymnasium",
        "gym",
        "tqdm",
        "cupy",
        "numba",
        "dask",
        "boto3",
        "botocore",
        "google",
        "s3fs",
        "fsspec",
    ]
)


@functools.cache
def _library_roots() -> frozenset[str]:
    """Top-level module names that are not project code: the standard library and installed distributions."""
    names = set(sys.stdlib_module_names) | KNOWN_LIBRARIES
    try:
        from importlib.metadata import packages_distributions

        names |= set(packages_distributions())
    except Exception:  # pragma: no cover - a broken environment: the standard library alone
        pass
    return frozenset(names)


@dataclass(frozen=True)
class Frame:
    func: str
    file: str  # short (package-relative) file name, as py-spy prints it
    line: int
    path: str | None = None  # the full path, when known (py-spy --json)

    @property
    def kind(self) -> str:
        return frame_kind(self.file, self.path)

    @property
    def module(self) -> str:
        """Dotted module of the frame's file: ray/_private/worker.py -> ray._private.worker."""
        stem = self.file.removesuffix(".py")
        return stem.strip("/").replace("/", ".").removesuffix(".__init__")

    def short(self) -> str:
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line} in {self.func}"


def frame_kind(file: str, path: str | None = None) -> str:
    """user (project code), ray (Ray's own frames) or lib (standard library and installed packages)."""
    if path:
        if _RAY_PATH.search(path):
            return RAY
        return LIB if _LIB_PATH.search(path) else USER
    if file.startswith("<frozen") or file in ("<string>", "<stdin>"):
        return LIB
    if file.startswith("ray/") or file.endswith(".pyx"):
        return RAY
    root = file.split("/", 1)[0].removesuffix(".py")
    if "/" in file and file.startswith(("/", ".")):
        return USER  # py-spy kept a full path: it is outside every sys.path entry, so not a package
    return LIB if root in _library_roots() else USER


@dataclass
class ThreadStack:
    name: str
    tid: int
    active: bool
    frames: list[Frame]  # innermost first

    @property
    def user_frames(self) -> list[Frame]:
        return [f for f in self.frames if f.kind == USER]


@dataclass
class ProcessDump:
    pid: int
    title: str  # the process's command line or Ray's process title ("ray::TrainWorker.step")
    threads: list[ThreadStack]


# -- parsing py-spy ------------------------------------------------------------------------------------------

_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<title>.*)$")
_THREAD = re.compile(r'^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<state>[^)]*)\)(?::\s*"(?P<name>.*)")?\s*$')
_FRAME_LINE = re.compile(r"^\s+(?P<func>.+?) \((?P<file>.+):(?P<line>\d+)\)\s*$")


def parse_dump_text(text: str, pid: int) -> ProcessDump:
    """Parse ``py-spy dump`` text (the dashboard's /worker/traceback answer). Locals and native lines are skipped."""
    title = ""
    threads: list[ThreadStack] = []
    for raw in text.splitlines():
        if m := _PROCESS.match(raw):
            title = m["title"].strip()
        elif m := _THREAD.match(raw):
            tid = int(m["tid"], 16) if m["tid"].startswith("0x") else int(m["tid"])
            active = m["state"].startswith("active")
            threads.append(ThreadStack(as_token(m["name"] or f"thread {m['tid']}"), tid, active, []))
        elif threads and (m := _FRAME_LINE.match(raw)):
            threads[-1].frames.append(Frame(as_token(m["func"]), as_token(m["file"]), int(m["line"])))
    if not threads:
        raise ValueError("no thread in the py-spy output")
    return ProcessDump(pid=pid, title=title, threads=threads)


def parse_dump_json(text: str, pid: int, title: str = "") -> ProcessDump:
    """Parse ``py-spy dump --json`` (a list of threads, innermost frame first, full and short file names)."""
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("py-spy --json did not answer a list of threads")
    threads = []
    for t in data:
        frames = [
            Frame(  # names a process chose itself: one plain token each, or quoted as data
                as_token(str(f.get("name") or "?")),
                as_token(str(f.get("short_filename") or f.get("filename") or "?")),
                int(f.get("line") or 0),
                as_token(str(f.get("filename"))) if f.get("filename") else None,
            )
            for f in t.get("frames") or []
        ]
        name = t.get("thread_name") or f"thread {t.get('os_thread_id') or t.get('thread_id')}"
        threads.append(
            ThreadStack(as_token(str(name)), int(t.get("os_thread_id") or 0), bool(t.get("active")), frames)
        )
    return ProcessDump(pid=pid, title=title, threads=threads)


# -- reducing and collapsing ---------------------------------------------------------------------------------


def blocked_in(thread: ThreadStack) -> str | None:
    """The call the innermost project frame is blocked in (``ray.get``, ``dist.barrier``), if it is in one."""
    frames = thread.frames
    first_user = next((i for i, f in enumerate(frames) if f.kind == USER), None)
    if first_user is None or first_user == 0:
        return None  # no project code, or the project frame itself is innermost (a C call like time.sleep)
    callees = frames[:first_user]  # innermost first; the last one is what the project frame called
    for frame in reversed(callees):
        dotted = f"{frame.module}.{frame.func}"
        if dotted in PUBLIC_NAMES:
            return PUBLIC_NAMES[dotted]
    for frame in reversed(callees):
        if not _WRAPPERS.search(frame.func):
            dotted = f"{frame.module}.{frame.func}"
            return PUBLIC_NAMES.get(dotted, dotted)
    return f"{callees[-1].module}.{callees[-1].func}"


def idle_worker(thread: ThreadStack) -> bool:
    """A Ray worker's main thread waiting for its next task (Ray's task loop, no project frame)."""
    return not thread.user_frames and any(
        f.kind == RAY and f.file.endswith(("worker.py", "default_worker.py")) and _IDLE_LOOP.match(f.func)
        for f in thread.frames
    )


def shown_threads(dump: ProcessDump) -> tuple[list[ThreadStack], int]:
    """The threads worth showing (those running project code, else the main thread) and how many were hidden."""
    user = [t for t in dump.threads if t.user_frames]
    if user:
        return user, len(dump.threads) - len(user)
    main = next(
        (t for t in dump.threads if t.name == "MainThread"), dump.threads[0] if dump.threads else None
    )
    return ([main] if main else []), len(dump.threads) - (1 if main else 0)


def folded(frames: Sequence[Frame], max_frames: int) -> list[str]:
    """Project frames (innermost first) with each run of Ray/library frames folded into one counted line.

    Frames above (outside) the outermost project frame are Ray's worker loop: folded into the last marker.
    Without any project frame, the innermost ``max_frames`` frames are shown as they are.
    """
    if not any(f.kind == USER for f in frames):
        shown = [f"{f.file}:{f.line} in {f.func}" for f in frames[:max_frames]]
        if len(frames) > max_frames:
            shown.append(f"[{len(frames) - max_frames} outer frames folded]")
        return shown
    out: list[str] = []
    run: list[Frame] = []
    users = 0

    def flush() -> None:
        if run:
            kinds = {f.kind for f in run}
            what = "Ray" if kinds == {RAY} else "library" if kinds == {LIB} else "Ray/library"
            out.append(f"[{len(run)} {what} frame{'s' if len(run) > 1 else ''} folded]")
            run.clear()

    for frame in frames:
        if frame.kind == USER:
            flush()
            users += 1
            if users <= max_frames:
                out.append(frame.short())
            elif users == max_frames + 1:
                out.append("[more project frames left out]")
        else:
            run.append(frame)
    flush()
    return out


@dataclass
class Sample:
    """One sampled process: who it is, and its dump (or why it could not be read)."""

    pid: int
    node: str  # node IP (or id) for display
    role: str  # "TrainWorker", "task load_batch", "driver"
    source: str = ""  # dashboard | py-spy
    dump: ProcessDump | None = None
    error: str | None = None
    elapsed_s: float = 0.0


@dataclass
class _Group:
    role: str
    thread: str
    key: tuple[object, ...]
    state: str
    blocked: str | None
    where: str | None
    frames: list[str]
    title: str
    pids: list[str] = field(default_factory=list)


def collapse(samples: Iterable[Sample], *, max_frames: int) -> list[models.StackGroup]:
    """Identical stacks of the same role collapsed with counts; project code first, the most common first."""
    ok = [s for s in samples if s.dump is not None]
    per_role: dict[str, int] = {}
    for s in ok:
        per_role[s.role] = per_role.get(s.role, 0) + 1
    groups: dict[tuple[object, ...], _Group] = {}
    for s in ok:
        assert s.dump is not None
        threads, _hidden = shown_threads(s.dump)
        for t in threads:
            user = t.user_frames
            blocked = blocked_in(t)
            main = t.name in ("MainThread",) or len(threads) == 1
            thread = "" if main else t.name
            if idle_worker(t):
                key: tuple[object, ...] = (s.role, thread, "idle-worker")
                state, where, frames = "idle", None, [IDLE_NOTE]
            else:
                sig = tuple((f.file, f.line, f.func) for f in user) or tuple(
                    (f.file, f.line, f.func) for f in t.frames[:3]
                )
                key = (s.role, thread, blocked, sig)
                state = "active" if t.active else "idle"
                where = user[0].short() if user else (t.frames[0].short() if t.frames else None)
                frames = folded(t.frames, max_frames)
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(s.role, thread, key, state, blocked, where, frames, s.dump.title)
            elif t.active:
                group.state = "active"
            group.pids.append(f"{s.pid}@{s.node}")
    out = [
        models.StackGroup(
            role=g.role,
            thread=g.thread or None,
            count=len(g.pids),
            of=per_role[g.role],
            state=g.state,
            blocked_in=g.blocked,
            where=g.where,
            frames=g.frames,
            process_title=g.title or None,
            pids=g.pids[:STACK_PIDS_SHOWN],
        )
        for g in groups.values()
    ]
    return sorted(out, key=lambda g: _rank(g, out))


def _rank(g: models.StackGroup, groups: Sequence[models.StackGroup]) -> tuple[int, int, str]:
    """Stragglers first (a minority of a role, not in the call its peers wait in), then project stacks by size,
    then processes outside project code, idle Ray workers last."""
    if is_idle_group(g):
        return (4, -g.count, g.role)
    if g.where is None:
        return (3, -g.count, g.role)
    peers = [o for o in groups if o.role == g.role and o is not g and not is_idle_group(o)]
    if peers and g.blocked_in is None and all(o.blocked_in for o in peers) and g.count < g.of:
        return (0, g.count, g.role)
    return (1 if g.role != "driver" else 2, -g.count, g.role)


def is_idle_group(g: models.StackGroup) -> bool:
    return bool(g.frames) and g.frames[0].startswith(IDLE_MARK)


IDLE_MARK = "[idle"


def role_text(role: str) -> str:
    """A role inside our sentences: the names the cluster chose (actor class, task function) quoted."""
    if role == "driver" or re.fullmatch(r"pid \d+", role):
        return role
    if role.startswith("task "):
        return f"task {quoted(role[5:])}"
    return quoted(role)


def group_line(g: models.StackGroup) -> str:
    """One line per group: '4 of 4 "TrainWorker": blocked in ray.get at train.py:88 in step'."""
    who = role_text(g.role) + (f" [thread {quoted(g.thread)}]" if g.thread else "")
    if is_idle_group(g):
        return f"{g.count} of {g.of} {who}: idle, no project code running"
    where = f" at {g.where}" if g.where else ""
    if g.blocked_in:
        return f"{g.count} of {g.of} {who}: blocked in {g.blocked_in}{where}"
    if g.state == "active":
        return f"{g.count} of {g.of} {who}: running{where}"
    return f"{g.count} of {g.of} {who}: waiting{where} (in a call outside Python: sleep, I/O, a lock)"


def verdict(label: str, groups: Sequence[models.StackGroup], sampled: int) -> str:
    """Where the processes are, the likeliest culprit first, within STACK_VERDICT_CHARS characters."""
    parts = [group_line(g) for g in groups[:STACK_VERDICT_GROUPS] if not is_idle_group(g)] or [
        group_line(groups[0])
    ]
    return truncate_text(f"{label}, {sampled} process(es): " + "; ".join(parts), STACK_VERDICT_CHARS)


def render_stacks(result: models.StackTraces) -> str:
    lines = [result.verdict, ""]
    for g in result.groups:
        lines.append(group_line(g))
        lines += [f"    {f}" for f in g.frames]
        more = f" (+{g.count - len(g.pids)} more)" if g.count > len(g.pids) else ""
        lines.append(
            f"    pids: {', '.join(g.pids)}{more}" + (f"  [{g.process_title}]" if g.process_title else "")
        )
    lines += [f"Could not sample: {f}" for f in result.failures]
    lines += [f"Hint: {h}" for h in result.hints]
    return "\n".join(lines)
