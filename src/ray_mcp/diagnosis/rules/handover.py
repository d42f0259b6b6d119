"""How Ray hands data over, behind errors that read as the user's own: an argument Ray could not serialise
(the attribute that holds the lock, socket or client, and the call site), a numpy array read back from the
object store zero-copy and so read-only, object refs passed inside a container and never resolved. Each fact
states the mechanism and the usual fix, with the exception and where it was raised."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.facts import Chain, Edge, Kind, Link, Say
from ray_mcp.diagnosis.graph import Graph, Row
from ray_mcp.diagnosis.recognise import exc_quote, exception_line, first_raise
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.rules.driver import Raised
from ray_mcp.diagnosis.tracebacks import last_user_frame
from ray_mcp.limits import INNER_MESSAGE_CHARS, SERIALIZATION_SEARCH_LINES, SHORT_CAUSE_CHARS
from ray_mcp.text import one_line, quoted

SERIALIZATION_DOC = "ray-docs://reference/02-ray-core-tasks"

# Ray's words when an argument cannot be pickled (_raylet.pyx prepare_args, with inspect_serializability's
# report after it: "FailTuple(<attr> [path=<a -> b>, obj=<the object>, parent=<its holder>])").
NOT_SERIALIZABLE = re.compile(
    r"Could not serialize the argument (?P<argument>.+?) for a task or actor (?P<function>[\w.<>]+)"
)
FAIL_TUPLE = re.compile(
    r"FailTuple\((?P<attr>[^\s\[]+) \[(?:path=(?P<path>[^,\]]*), )?obj=(?P<obj>.*?), parent=(?P<parent>.*?)\]\)"
)
# "<__main__.Client object at 0x7f…>": the type is what an agent reads; the address differs every run.
AT_ADDRESS = re.compile(r"^<(?:[\w.]+\.)?(?P<what>[^<>]+?)(?: object)? at 0x[0-9a-f]+>$")
PICKLE_ERROR = re.compile(r"(?:cannot pickle|can't pickle|not picklable|cannot be pickled)[^\n]*")
# numpy's words for a write to a read-only array (an object-store buffer Ray handed over zero-copy).
READ_ONLY = re.compile(
    r"(?:assignment destination|output array|destination array|array) is read-only|"
    r"buffer source array is read-only|cannot set WRITEABLE flag"
)
# An operation on an ObjectRef where the user expected its value: a ref that arrived inside a container.
REF_AS_VALUE = re.compile(r"(?:TypeError|AttributeError)[^\n]*'(?:ray\.)?(?:_raylet\.)?ObjectRef'")

UNSERIALISABLE = Say(
    "unserialisable",
    Edge.RAISED_IN,
    lambda f: (
        f"the argument {quoted(f['argument'])} of {f['function']}"
        + (f" (called at {f['where']})" if f["where"] else "")
        + " cannot be serialised"
        + (f": its attribute {quoted(f['path'])} holds {quoted(f['obj'])}" if f["path"] else "")
        + (f" ({quoted(f['error'])})" if f["error"] else "")
        + "; Ray pickles every argument to send it to the worker: create that object inside the task or actor, "
        "or leave it out of what is pickled (__getstate__/__reduce__)"
    ),
)
ZERO_COPY = Say(
    "zero_copy_read_only",
    Edge.RAISED_IN,
    lambda f: (
        f"{f['name']}{_at(f)} wrote to a read-only numpy array ({f['error']}): Ray hands arrays over from the "
        "object store zero-copy, as read-only views of shared memory (large arguments, ray.get results); copy "
        "before writing (arr = arr.copy())"
    ),
)
NESTED_REFS = Say(
    "nested_refs",
    Edge.RAISED_IN,
    lambda f: (
        f"{f['name']}{_at(f)} got ObjectRefs, not their values ({f['error']}): Ray resolves only refs passed as "
        "top-level arguments, not refs inside a list, dict or object; pass them as f.remote(*refs) or ray.get "
        "them inside"
    ),
)


def _at(f: Link) -> str:
    return f" ({f['frame']})" if f["frame"] else ""


def _short(value: str) -> str:
    m = AT_ADDRESS.match(value.strip())
    return m["what"] if m else one_line(value, INNER_MESSAGE_CHARS)


def unserialisable(text: str, where: str = "") -> Link | None:
    """The fact of an argument Ray could not pickle, from its error text (with inspect_serializability's report,
    which names the attribute holding the unpicklable object)."""
    m = NOT_SERIALIZABLE.search(text)
    if m is None:
        return None
    fail = FAIL_TUPLE.search(text)
    error = PICKLE_ERROR.search(text)
    path = ""
    obj = ""
    if fail is not None:
        path = (fail["path"] or fail["attr"]).strip()
        obj = _short(fail["obj"])
    telling = [
        line.strip()
        for line in text.splitlines()
        if NOT_SERIALIZABLE.search(line) or FAIL_TUPLE.search(line) or PICKLE_ERROR.search(line)
    ]
    quote = " | ".join(one_line(line, SHORT_CAUSE_CHARS) for line in dict.fromkeys(telling))
    return UNSERIALISABLE(
        "",
        quote,
        argument=_short(m["argument"]),
        function=m["function"],
        path=path,
        obj=obj,
        error=error.group(0).strip() if error else "",
        where=where,
    )


@rule(On.DRIVER, Kind.HANDOVER, order=5, refs=(SERIALIZATION_DOC,), reads=("driver_lines",))
def driver_unserialisable(d: Raised) -> Chain | None:
    """An argument the driver passed that Ray could not serialise: the argument, the attribute that holds the
    unpicklable object (a lock, a socket, a client) and the call site."""
    text = "\n".join([*d.tb.lines, *d.tb.remote, *d.lines[-SERIALIZATION_SEARCH_LINES:]])
    link = unserialisable(text, d.tb.user_frame.short() if d.tb.user_frame else "")
    return d.chain(Kind.HANDOVER, [link]) if link is not None else None


def _raised(t: Row) -> tuple[str, dict[str, str], str, str] | None:
    msg = str(t.get("error_message") or "")
    where = first_raise(msg)
    if not where:
        return None
    frame = last_user_frame(msg)
    return msg, where, frame.line_ref() if frame is not None else "", exception_line(msg)


@rule(On.TASK_END, Kind.HANDOVER, order=80, refs=(SERIALIZATION_DOC,), reads=("tasks",))
def task_handover(g: Graph, t: Row, depth: int) -> list[Link]:
    """An exception that comes from how Ray hands data over: an argument it could not serialise (the
    attribute, the call site), a numpy array written to in place though Ray gave it read-only and zero-copy
    from the object store, ObjectRefs used as values because they came inside a container; the mechanism and
    the usual fix."""
    raised = _raised(t)
    if raised is None:
        return []
    msg, where, frame, error = raised
    link = unserialisable(msg, frame)
    if link is not None:
        return [link]
    if READ_ONLY.search(msg):
        return [ZERO_COPY("", exc_quote(msg), error=error, name=where["name"], frame=frame)]
    if REF_AS_VALUE.search(msg):
        return [NESTED_REFS("", exc_quote(msg), error=error, name=where["name"], frame=frame)]
    return []
