"""A file the job cannot find, traced to what its runtime_env uploaded: an exclude pattern that left it out,
a working_dir that did not contain it, or an absolute path read on the node where the work ran (the
submitting machine's files are not there)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath

import pathspec  # the gitignore matcher Ray's own packaging uses for runtime_env excludes

from ray_mcp.diagnosis.facts import Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import Graph, Row
from ray_mcp.diagnosis.recognise import exc_quote, first_raise
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules.driver import Raised
from ray_mcp.diagnosis.tracebacks import last_user_frame
from ray_mcp.text import quoted

RUNTIME_ENV_DOC = "ray-docs://reference/11-runtime-environment"

# Python's words for a file that is not there.
NOT_FOUND = re.compile(r"(?:FileNotFoundError|No such file or directory)[^\n]*?'(?P<path>[^']+)'")
# Where Ray unpacks a working_dir on a node: a path under it is relative to the working_dir.
WORKING_DIR_COPY = re.compile(r"/runtime_resources/working_dir_files/[^/]+/(?P<rel>.+)$")

MISSING = Say(
    "missing_file",
    Edge.ENDED_BY,
    lambda f: (
        f"{f['where']} could not find {quoted(f['path'])}: "
        + {
            "excluded": f"runtime_env excludes {quoted(f['pattern'])} left it out of the upload",
            "not_in_dir": "the working_dir uploaded did not contain it (paths are relative to the working_dir "
            "copy each worker runs in)",
            "absolute": "an absolute path is read on the node the work runs on; files of the submitting "
            "machine are there only when uploaded (working_dir, py_modules) or on shared storage",
            "no_upload": "the job uploaded no working_dir, so files of the submitting machine are not on the "
            "nodes",
        }[f["why"]]
        + (f" (uploaded: {f['uploaded']})" if f["uploaded"] else "")
    ),
)


def _uploaded(env: dict) -> str:
    parts = [f"working_dir {quoted(env['working_dir'])}"] if env.get("working_dir") else []
    if env.get("py_modules"):
        parts.append(f"py_modules {quoted(', '.join(map(str, env['py_modules'])))}")
    if env.get("excludes"):
        parts.append(f"excludes {quoted(', '.join(map(str, env['excludes'])))}")
    return "; ".join(parts)


def missing_file(g: Graph, text: str, where: str) -> Link | None:
    """Why a file the job opened was not there, from its runtime_env (the job's record of it)."""
    m = NOT_FOUND.search(text)
    if m is None or g.ev.job is None:
        return None
    env = dict(g.ev.job.get("runtime_env") or {})
    path = m["path"]
    copy = WORKING_DIR_COPY.search(path)
    rel = copy["rel"] if copy else path
    excludes = [str(p) for p in env.get("excludes") or []]
    spec = pathspec.GitIgnoreSpec.from_lines(excludes)
    hit = next((p for p in excludes if pathspec.GitIgnoreSpec.from_lines([p]).match_file(rel)), "")
    if not PurePosixPath(rel).is_absolute() and spec.match_file(rel):
        why = "excluded"
    elif PurePosixPath(rel).is_absolute():
        why = "absolute"
    elif env.get("working_dir"):
        why = "not_in_dir"
    else:
        why = "no_upload"
    return MISSING("", exc_quote(text), where=where, path=path, why=why, pattern=hit, uploaded=_uploaded(env))


@rule(On.TASK_END, Kind.MISSING_FILE, order=82, refs=(RUNTIME_ENV_DOC,), reads=("tasks", "job"))
def task_missing_file(g: Graph, t: Row, depth: int) -> list[Link]:
    """A task that could not find a file: whether the job's runtime_env left it out (an exclude pattern, a
    working_dir that did not contain it, an absolute path of another machine), and what was uploaded."""
    msg = str(t.get("error_message") or "")
    raised = first_raise(msg)
    if raised is None:
        return []
    frame = last_user_frame(msg)
    where = raised["name"] + (f" ({frame.line_ref()})" if frame is not None else "")
    link = missing_file(g, msg, where)
    return [link] if link is not None else []


@rule(On.DRIVER, Kind.MISSING_FILE, order=97, refs=(RUNTIME_ENV_DOC,), reads=("driver_lines", "job"))
def driver_missing_file(d: Raised) -> Chain | None:
    """The driver itself could not find a file (nothing remote raised it): the same reading of the job's
    runtime_env."""
    if first_raise(d.traceback) or not NOT_FOUND.search(d.traceback):
        return None
    where = "the driver" + (f" at {d.tb.user_frame.short()}" if d.tb.user_frame else "")
    link = missing_file(d.g, "\n".join(d.tb.lines), where)
    return d.chain(Kind.MISSING_FILE, [link]) if link is not None else None
