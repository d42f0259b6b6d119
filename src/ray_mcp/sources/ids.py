"""Ray's ids: what a well-formed one looks like, checked where it enters, before any request; and the one way
an id goes into a dashboard path.

Every id a caller gives (a tool argument, a target) and every id the cluster hands back that ray-mcp splices
into a URL path goes through these checks. An id is its kind's exact shape or it is refused: ``.``, ``..``,
slashes, percent-encodings, spaces and controls never reach a request, so an id cannot address another
dashboard route or another object than the one named.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import JOB_ID_CHARS
from ray_mcp.text import as_token, quoted

# Ray's ids are hex strings of fixed length: a malformed one gets a clear error before any request.
ID_HEX_LENGTHS = {"actor": 32, "placement group": 36, "node": 56, "job": 8, "task": 48}
# Where a caller finds ids of each kind, for the refusal.
ID_LISTED_BY = {
    "actor": "list_actors",
    "placement group": "pg_status",
    "node": "cluster_status",
    "job": "list_jobs",
    "task": "list_tasks",
}


def _a(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def check_id(kind: str, value: str) -> str:
    """Reject a malformed Ray id with a message that says what a good one looks like."""
    length = ID_HEX_LENGTHS[kind]
    if not isinstance(value, str) or not re.fullmatch(rf"[0-9a-f]{{{length}}}", value):
        raise InvalidArgument(
            f"{quoted(value)} is not {_a(kind)} {kind} id: Ray {kind} ids are {length} lowercase hex characters. "
            f"Copy one whole from {ID_LISTED_BY[kind]}'s answer."
        )
    return value


# A submission id is Ray's raysubmit_<16 letters and digits> or one chosen at submission: letters, digits
# and "_-.:" (starting with a letter, digit or "_", so never "." or ".."); a job id is 8 hex characters. Both
# go into the job server's URL path (/api/jobs/<id>), where anything else could address another resource.
_JOB_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")


def check_job_ref(job: str, *, what: str = "job id") -> str:
    if not isinstance(job, str) or len(job) > JOB_ID_CHARS or not _JOB_REF.fullmatch(job):
        raise InvalidArgument(
            f"{quoted(job)} is not a valid {what}: ids are at most {JOB_ID_CHARS} letters, digits and '_-.:', "
            "starting with a letter, digit or '_'. Submission ids look like raysubmit_…, job ids like 02000000; "
            "call list_jobs to see them."
        )
    return job


def check_node(node: str) -> str:
    """A node as a caller names it: its id (56 hex characters) or its IP address."""
    node = node.strip() if isinstance(node, str) else node
    if isinstance(node, str) and re.fullmatch(r"[0-9a-fA-F]{56}", node):
        return node.lower()
    try:
        return str(ipaddress.ip_address(node))
    except ValueError:
        raise InvalidArgument(
            f"{quoted(node)} is not a node: give a node id (56 lowercase hex characters) or the node's IP "
            "address. Call cluster_status to see the nodes."
        ) from None


def job_path(job: str, action: str = "") -> str:
    """The job server's path of one job (``/api/jobs/<id>[/<action>]``), its id checked first: the only
    place a job id is put into a URL."""
    path = f"/api/jobs/{check_job_ref(job)}"  # its characters are all safe in a path
    return f"{path}/{action}" if action else path


def node_path(node_id: str) -> str:
    """The dashboard's path of one node's details (``/nodes/<id>``), its id checked first."""
    return f"/nodes/{check_id('node', node_id)}"


# -- ids and names the cluster hands back ------------------------------------------------------------------

# The fields of the dashboard's records that hold an id or an address (snake_case: the State and Jobs APIs;
# camelCase: the dashboard's own tables), besides every *_id and *Id.
ID_FIELDS = frozenset(
    {
        "node_ip",
        "node_ip_address",
        "nodeIp",
        "ip",
        "ipAddress",
        "ray_namespace",
        "session_name",
        "sessionName",
    }
)
# The fields that hold a name (an actor's, a task's function, a Serve app's, a Ray Data dataset's or operator's).
# Messages, commands and tracebacks are text, quoted where they are shown.
NAME_FIELDS = frozenset(
    {
        "name",
        "class_name",
        "func_or_class_name",
        "repr_name",
        "className",
        "actorClass",
        "node_name",
        "nodeName",
        "app_name",
        "deployment_name",
        "dataset",
        "operator",
    }
)
NAME_MAPS = frozenset({"applications", "deployments"})  # Serve's: a map keyed by app or deployment name


# The fields of Kubernetes objects that hold a name, an id or a one-word reason (besides those above): the API
# server validates an object's own name, but not what a status, an event or an owner reference says.
KUBE_FIELDS = frozenset(
    {
        "namespace",
        "reason",
        "kind",
        "type",
        "phase",
        "image",
        "imageID",
        "containerID",
        "uid",
        "hostIP",
        "podIP",
        "serviceName",
        "rayClusterName",
        "generateName",
        "apiVersion",
        "resourceVersion",
    }
)


def _checked(key: object, value: str, extra: frozenset[str]) -> str:
    if isinstance(key, str) and (
        key in ID_FIELDS or key in NAME_FIELDS or key in extra or key.endswith(("_id", "Id"))
    ):
        return as_token(value)
    return value


def plain_names(body: Any, extra: frozenset[str] = frozenset()) -> Any:
    """A dashboard answer with every id and name field checked (``as_token``), in place: an id of the wrong
    shape, or a name that is not one plain token, is quoted as data before any answer uses it, so none can start
    a line of an answer or pose as a sentence of ours. Messages and commands are left as they are. ``extra``:
    more such fields (``KUBE_FIELDS`` for a Kubernetes object)."""
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in list(node.items()):
                if isinstance(value, str):
                    checked = _checked(key, value, extra)
                    if checked is not value:
                        node[key] = checked
                elif isinstance(value, dict | list):
                    if key in NAME_MAPS and isinstance(value, dict):
                        value = node[key] = {
                            (as_token(k) if isinstance(k, str) else k): v for k, v in value.items()
                        }
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(item for item in node if isinstance(item, dict | list))
    return body
