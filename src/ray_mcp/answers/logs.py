"""Logs: find the file of a job, actor, task, worker pid or node, and read its tail, grep it, or follow it."""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from ray_mcp import models
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.nodes import Nodes
from ray_mcp.answers.secrets import JobSecrets, job_ids_of
from ray_mcp.answers.targets import LogTarget
from ray_mcp.errors import InvalidArgument, NotFound, RayMCPError
from ray_mcp.limits import (
    FILES_LISTED,
    FOLLOW_LINE_START_BYTES,
    FOLLOW_OVERLAP_LINES,
    LOG_BYTES,
    LOG_FILES_SHOWN,
    LOG_LINES,
    LOG_WHOLE_SHARE,
    PROGRESS_CHARS,
    SCAN_MB,
)
from ray_mcp.shaping import grep as log_grep
from ray_mcp.shaping.logs import count_lines, decode_log, grep_section, log_hints, tail_section
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import ProgressFn
from ray_mcp.sources.jobs import job_log_file
from ray_mcp.sources.local_logs import LogDir, is_pattern, missing, node_logs_dir, stat_files, tail_of
from ray_mcp.text import ANSI, quoted, truncate_text

_MAIN_LOGS = ("raylet.", "gcs_server.", "dashboard.", "dashboard_agent.", "monitor.", "runtime_env_agent.")
_ACTOR_HINT = "Call list_actors to see the actor ids that exist."
_TASK_HINT = (
    "Task ids appear in list_tasks and in the job's driver log; tasks of actors log to the actor's log "
    "(use actor_id)."
)


@dataclass
class LogSource:
    """One file to read: the endpoint's query parameters and how to describe it to the agent."""

    params: dict[str, str]
    source: str
    node_id: str | None
    filename: str | None
    stream: str | None
    hint: str = field(default="")


def _std(
    suffix: str,
    params: dict[str, str],
    what: str,
    node_id: str | None,
    stem: str,
    hint: str,
    filename_note: str = "",
) -> LogSource:
    """The stdout or stderr (``suffix`` out or err) of a worker's log, for an actor, a task or a pid."""
    return LogSource(
        params={**params, "suffix": suffix},
        source=f"std{suffix} of {what}",
        node_id=node_id,
        filename=f"{stem}.{suffix}{filename_note}",
        stream=suffix,
        hint=hint,
    )


# Where each Ray daemon writes its own log (Ray 2.60, the session's logs dir): the C++ daemons and the Ray Client
# server to <name>.out, the Python ones to <name>.log; all of them their stderr to <name>.err.
COMPONENT_LOGS = {
    "raylet": "raylet.out",
    "gcs_server": "gcs_server.out",
    "ray_client_server": "ray_client_server.out",
}


def component_files(target: LogTarget) -> list[str]:
    """The files of the daemon a target names, for its stream (out: its own log; err: its stderr; both)."""
    name = str(target.component)
    own = COMPONENT_LOGS.get(name, f"{name}.log")
    return {"out": [own], "err": [f"{name}.err"]}.get(target.stream, [own, f"{name}.err"])


class Logs:
    """Every log of the cluster, read on the server side through the dashboard's log routes, or straight from the
    file when its node runs on this machine (local_logs.py). ``jobs`` and ``nodes`` resolve a job's driver log
    and a node given by id or IP. A log may print any job's env_vars: before it is read, ``secrets`` learns
    those of the jobs whose processes wrote it (of every job, for a node's file or a pid)."""

    def __init__(
        self,
        sources: ClusterSources,
        jobs: Jobs,
        nodes: Nodes,
        secrets: JobSecrets,
        *,
        local_logs: bool = True,
    ) -> None:
        self.sources = sources
        self.api = sources.logs
        self.jobs = jobs
        self.nodes = nodes
        self.secrets = secrets
        self._driver_logs: dict[str, LogSource] = {}  # job -> its driver log; a job's driver never moves
        self.local_logs = local_logs
        self._log_dirs: dict[str, LogDir | None] = {}  # node id -> its logs dir here, if it runs here

    async def files_of(self, target: LogTarget) -> list[LogSource]:
        """Turn the target (job, actor, task, pid + node, node + filename) into the file(s) to read."""
        kind = target.kind
        suffixes = ["out", "err"] if target.stream == "both" else [target.stream]
        if kind == "job":
            return [await self._job_log_source(str(target.job))]
        if kind == "actor_id":
            actor_id = str(target.actor_id)  # checked when the target was made
            actor = await self.sources.state.actor(actor_id)
            if actor is None:
                raise NotFound(
                    f"No actor {actor_id!r} in the cluster at {self.sources.dashboard_url}. {_ACTOR_HINT}"
                )
            await self.secrets.learn(job_ids_of([actor]))
            desc = f"actor {actor_id}" + (f" ({actor.get('class_name')})" if actor.get("class_name") else "")
            return [
                _std(
                    sfx,
                    {"actor_id": actor_id},
                    f"{desc}, worker pid {actor.get('pid')}",
                    actor.get("node_id"),
                    f"worker-*-{actor.get('pid')}",
                    _ACTOR_HINT,
                )
                for sfx in suffixes
            ]
        if kind == "task_id":
            task_id = str(target.task_id)
            attempts = await self.sources.state.task_attempts(task_id)
            task = next((t for t in attempts if int(t.get("attempt_number") or 0) == target.attempt), None)
            if task is None:
                raise NotFound(
                    f"No task {task_id!r} (attempt {target.attempt}) in the cluster at "
                    f"{self.sources.dashboard_url}. {_TASK_HINT}"
                )
            await self.secrets.learn(job_ids_of([task]))
            return [
                _std(
                    sfx,
                    {"task_id": task_id, "attempt_number": str(target.attempt)},
                    f"task {task_id} attempt {target.attempt} ({task.get('name')})",
                    task.get("node_id"),
                    "worker-*",
                    _TASK_HINT,
                    filename_note=" (the task's byte range)",
                )
                for sfx in suffixes
            ]
        node_id = await self.nodes.resolve(str(target.node))
        # Any worker's or daemon's log: every job's env_vars may be in it.
        await self.secrets.learn()
        if kind == "pid":
            hint = f"Is pid {target.pid} a Ray worker on node {node_id}? list_actors shows actors' pids."
            return [
                _std(
                    sfx,
                    {"node_id": node_id, "pid": str(target.pid)},
                    f"worker pid {target.pid}",
                    node_id,
                    f"worker-*-{target.pid}",
                    hint,
                )
                for sfx in suffixes
            ]
        if kind == "component":
            return [await self._file_source(node_id, name) for name in component_files(target)]
        return [await self._file_source(node_id, str(target.filename))]

    async def _file_source(self, node_id: str, filename: str) -> LogSource:
        return LogSource(
            params={"node_id": node_id, "filename": filename},
            source=f"file {filename}",
            node_id=node_id,
            filename=filename,
            stream=None,
            hint=await self._similar_files_hint(node_id, filename),
        )

    async def _job_log_source(self, job: str) -> LogSource:
        cached = self._driver_logs.get(job)
        if cached is not None:  # the fast path of a repeated tail: one request instead of two
            return cached
        details = await self.jobs.details(job)
        sid = details.get("submission_id")
        if not sid:
            raise InvalidArgument(
                f"Job {job} was not submitted through the Jobs API (type {details.get('type')}): Ray keeps "
                "no driver log file for such a job, its output went to the terminal that ran it. Read its "
                "workers' logs with actor_id or task_id instead."
            )
        node_id = details.get("driver_node_id")
        if not node_id:
            raise NotFound(
                f"Job {sid} has no driver log yet (status {details.get('status')}: its driver has not "
                "started). "
                f"Call wait_for_job with job={sid!r}, then tail_logs again."
            )
        filename = job_log_file(str(sid))
        source = LogSource(
            params={"node_id": str(node_id), "filename": filename},
            source=f"driver log of job {sid}",
            node_id=str(node_id),
            filename=filename,
            stream=None,
            hint="Call list_jobs to see the jobs that exist.",
        )
        self._driver_logs[job] = source
        return source

    async def _similar_files_hint(self, node_id: str, filename: str) -> str:
        """Say which files exist on the node, for when ``filename`` is not one of them (best effort)."""
        stem = re.sub(r"[^A-Za-z0-9_.-]", "", filename.rsplit("/", 1)[-1].split(".")[0])[:40]
        files: list[str] = []
        with contextlib.suppress(RayMCPError, KeyError, TypeError):
            for glob in ([f"*{stem}*"] if stem else []) + ["*"]:
                files = [f for f in await self.api.node_files(node_id, glob) if "/" not in f]
                if files:
                    break
        workers = [f for f in files if f.startswith(("worker-", "python-core-worker-"))]
        others = sorted(set(files) - set(workers), key=lambda f: (not f.startswith(_MAIN_LOGS), f))
        listing = ", ".join(others[:FILES_LISTED]) + (f", and {len(workers)} worker files" if workers else "")
        return (
            f"Files on node {node_id} include: {listing}."
            if files
            else "Call cluster_status to check the node."
        )

    async def list_files(self, node_id: str, pattern: str) -> models.LogTail:
        """The node's log files matching a glob, newest first when their sizes and times can be read (its
        logs directory is on this machine); the dashboard lists names only."""
        names = await self.api.node_files(node_id, pattern)
        where = await self.local_logs_dir(node_id) if self.local_logs else None
        stats = await anyio.to_thread.run_sync(stat_files, where, names) if where else []
        files = [models.LogFile(name=f.name, bytes=f.bytes, modified=f.modified) for f in stats] or [
            models.LogFile(name=n) for n in names
        ]
        hints = []
        if len(files) > LOG_FILES_SHOWN:
            hints.append(f"{len(files) - LOG_FILES_SHOWN} more files match: narrow the pattern.")
        if files:
            hints.append("Pass one name as filename (without a pattern) to read it.")
            if where is None:
                hints.append(
                    "Sizes and times unknown: the dashboard lists names only (node not on this machine)."
                )
        else:
            hints.append(f"No file on node {node_id} matches {pattern!r}: try filename='*' to list them all.")
        return models.LogTail(sections=[], files=files[:LOG_FILES_SHOWN], hints=hints)

    async def tail(
        self,
        target: LogTarget,
        *,
        lines: int,
        max_bytes: int,
        grep: str | None = None,
        context: int = 0,
        max_scan_mb: int = SCAN_MB.default,
        follow_s: float = 0.0,
        on_progress: ProgressFn | None = None,
    ) -> models.LogTail:
        """The tail (or grep result) of one log, read on the server side; optionally follow it."""
        if target.kind == "filename" and is_pattern(str(target.filename)):
            return await self.list_files(await self.nodes.resolve(str(target.node)), str(target.filename))
        pattern = log_grep.compile_grep(grep) if grep is not None else None
        sources = await self.files_of(target)
        budget = max(LOG_BYTES.low, max_bytes // len(sources))
        sections = []
        followed = follow_s
        for src in sources:
            if pattern is not None:
                sections.append(
                    await self._grep(
                        src,
                        pattern,
                        lines=lines,
                        max_bytes=budget,
                        context=context,
                        scan_cap=max_scan_mb * 1024**2,
                        follow_s=follow_s,
                        on_progress=on_progress,
                    )
                )
            else:
                sections.append(
                    await self._tail(
                        src, lines=lines, max_bytes=budget, follow_s=follow_s, on_progress=on_progress
                    )
                )
            follow_s = 0.0  # follow only the first stream (out, for both)
        hints = log_hints(sections, lines=lines, max_bytes=max_bytes, max_lines=LOG_LINES.high)
        if len(sections) == 2 and followed:
            hints.append("follow_s followed stdout only; pass stream='err' to follow stderr.")
        # as sent, the answer may hold LOG_WHOLE_SHARE of what the caller asked to read (the edge fits it)
        return models.LogTail(sections=sections, hints=hints).within(int(max_bytes * LOG_WHOLE_SHARE))

    async def tail_source(self, src: LogSource, *, lines: int, max_bytes: int) -> models.LogSection:
        """The tail of one log already found (a Serve replica's file, or its actor's stderr)."""
        return await self._tail(src, lines=lines, max_bytes=max_bytes, follow_s=0, on_progress=None)

    def _section_base(self, src: LogSource) -> models.LogSection:
        return models.LogSection(
            source=src.source,
            node_id=src.node_id,
            filename=src.filename,
            stream=src.stream,
            lines=[],
            lines_shown=0,
            more_before=False,
        )

    async def _tail(
        self, src: LogSource, *, lines: int, max_bytes: int, follow_s: float, on_progress: ProgressFn | None
    ) -> models.LogSection:
        keep = 2 * max_bytes + 65_536
        local = None if follow_s > 0 else await self._local_tail(src, lines + 1, keep)
        if local is not None:
            data, total = local
        else:
            data, total = await self.api.tail(
                src.params, lines=lines + 1, keep=keep, what=src.source, hint=src.hint
            )
        complete = total == len(data) and count_lines(data) <= lines
        dropped = max(0, total - len(data))
        new_lines = None
        if follow_s > 0:
            # A line still being written comes again, whole, from the stream.
            data = data[: data.rfind(b"\n") + 1]
            new, new_dropped = await self._follow(
                src,
                follow_s,
                on_progress=on_progress,
                skip_first=False,
                keep=keep,
                lines=FOLLOW_OVERLAP_LINES,
            )
            new = new if new_dropped else after_overlap(data, new)
            new_lines = count_lines(new)
            if new_dropped:
                complete, dropped, data = False, dropped + len(data) + new_dropped, b""
            data += new
        section = tail_section(
            data,
            lines=lines,
            max_bytes=max_bytes,
            complete=complete,
            dropped=dropped,
            base=self._section_base(src),
            followed_s=follow_s or None,
        )
        return section if new_lines is None else section.model_copy(update={"new_lines": new_lines})

    async def _local_tail(self, src: LogSource, lines: int, keep: int) -> tuple[bytes, int] | None:
        """What the dashboard would stream for the last ``lines`` lines of a named file, read from the file
        itself when its node runs on this machine; None to ask the dashboard."""
        filename = src.params.get("filename")
        if not self.local_logs or filename is None or src.node_id is None:
            return None
        where = await self.local_logs_dir(src.node_id)
        if where is None:
            return None
        found = await anyio.to_thread.run_sync(tail_of, where, filename, lines, keep)
        if found is None and await anyio.to_thread.run_sync(missing, where, filename):
            # The directory Ray's log agent reads is this one: asking the dashboard would only repeat it, and
            # on a busy head its stream can come back empty instead of "not found".
            raise NotFound(
                f"Ray found no log for {src.source}: node {src.node_id} has no file {quoted(filename)}. {src.hint}"
            )
        return found

    async def local_logs_dir(self, node_id: str) -> LogDir | None:
        """The node's logs directory on this machine, from what the cluster reports about the node (asked once
        per node: a node id never moves); None when the node does not run here."""
        if node_id in self._log_dirs:
            return self._log_dirs[node_id]
        if not re.fullmatch(r"[0-9a-f]{56}", node_id):
            return None
        try:
            data = await self.sources.routes.node_details(node_id)
            raylet = dict((data.get("detail") or {}).get("raylet") or {})
        except (RayMCPError, AttributeError, TypeError, ValueError):
            return None  # not remembered: the next call asks again
        where = await anyio.to_thread.run_sync(node_logs_dir, raylet)
        self._log_dirs[node_id] = where
        return where

    async def _grep(
        self,
        src: LogSource,
        pattern: log_grep.GrepPattern,
        *,
        lines: int,
        max_bytes: int,
        context: int,
        scan_cap: int,
        follow_s: float,
        on_progress: ProgressFn | None,
    ) -> models.LogSection:
        # The scan runs in worker threads (log_grep.feed_in_thread): the loop keeps serving other calls.
        scanner = log_grep.GrepScanner(pattern, context=context, keep=lines, line_cap=max_bytes)
        complete = True
        async with self.api.whole(src.params, what=src.source, hint=src.hint) as chunks:
            async for whole in chunks:
                chunk = whole
                if scanner.bytes + len(chunk) > scan_cap:
                    chunk = chunk[: scan_cap - scanner.bytes]
                    complete = False
                await log_grep.feed_in_thread(scanner, chunk)
                if not complete:
                    break
        if complete:
            await log_grep.finish_in_thread(scanner)
        new_lines = 0
        if follow_s > 0:
            before = scanner.line_no
            await self._follow(
                src,
                follow_s,
                on_progress=on_progress,
                skip_first=scanner.bytes > 0,
                keep=0,
                on_data=functools.partial(log_grep.feed_in_thread, scanner),
            )
            await log_grep.finish_in_thread(scanner)
            new_lines = scanner.line_no - before
        section = grep_section(
            scanner,
            max_bytes=max_bytes,
            complete=complete,
            grep=pattern.pattern,
            base=self._section_base(src),
        )
        if follow_s > 0:
            section = section.model_copy(update={"followed_s": follow_s, "new_lines": new_lines})
        return section

    async def _follow(
        self,
        src: LogSource,
        follow_s: float,
        *,
        on_progress: ProgressFn | None,
        skip_first: bool,
        keep: int,
        on_data: Callable[[bytes], Awaitable[None]] | None = None,
        lines: int = 1,
    ) -> tuple[bytes, int]:
        """Stream what is appended to a log during ``follow_s`` seconds, reporting each batch of lines as
        progress. Returns (the last ``keep`` bytes, the bytes dropped before them); with ``on_data``, every
        chunk goes there instead (grep scans it all) and nothing is kept.

        The stream endpoint starts with the file's last ``lines`` lines; with ``skip_first`` the first (already
        in the answer) is skipped, else the caller drops what it already has (after_overlap). Each chunk is looked at once: a line with no newline costs no rescans.
        """
        started = time.monotonic()
        new = bytearray()
        dropped = 0
        line_start = bytearray()  # the start of the line in progress, for the progress text only
        skipping = skip_first
        with anyio.move_on_after(follow_s):
            async with self.api.follow(src.params, lines=lines, what=src.source, hint=src.hint) as chunks:
                async for raw in chunks:
                    chunk = raw
                    if skipping:
                        cut = chunk.find(b"\n")
                        if cut < 0:
                            continue
                        chunk, skipping = chunk[cut + 1 :], False
                    if on_data is not None:
                        await on_data(chunk)
                    else:
                        new += chunk
                        if len(new) > 2 * keep:
                            dropped += len(new) - keep
                            del new[: len(new) - keep]
                    cut = chunk.rfind(b"\n")
                    if cut < 0:
                        if len(line_start) < FOLLOW_LINE_START_BYTES:
                            line_start += chunk[: FOLLOW_LINE_START_BYTES - len(line_start)]
                        continue
                    batch = bytes(line_start) + chunk[max(0, cut + 1 - FOLLOW_LINE_START_BYTES) : cut + 1]
                    line_start = bytearray(chunk[cut + 1 :][:FOLLOW_LINE_START_BYTES])
                    if on_progress is not None:
                        text = truncate_text(ANSI.sub("", decode_log(batch)).rstrip("\n"), PROGRESS_CHARS)
                        await on_progress(round(time.monotonic() - started, 1), follow_s, text)
        if len(new) > keep:
            dropped += len(new) - keep
            del new[: len(new) - keep]
        return bytes(new), dropped


def after_overlap(tail: bytes, stream: bytes) -> bytes:
    """What ``stream`` (a log's last lines as its stream opened, then what was appended) holds after ``tail``
    (whole lines of the same log, read just before): the stream's opening lines that end the tail are dropped.

    The first (shortest) overlap is taken, so that lines repeated word for word come twice rather than never;
    with no overlap, every line of the stream is new.
    """
    old = tail.split(b"\n")[:-1]
    lines = stream.split(b"\n")
    for j in range(min(len(lines) - 1, len(old))):
        if lines[: j + 1] == old[len(old) - j - 1 :]:
            return b"\n".join(lines[j + 1 :])
    return stream
