"""Ray's ids: what a well-formed one looks like, checked before any request."""

from __future__ import annotations

import re

from ray_mcp.errors import InvalidArgument
from ray_mcp.limits import JOB_ID_CHARS

# Ray's ids are hex strings of fixed length: a malformed one gets a clear error before any request.
ID_HEX_LENGTHS = {"actor": 32, "placement group": 36, "node": 56, "job": 8, "task": 48}


def check_id(kind: str, value: str) -> str:
    """Reject a malformed Ray id with a message that says what a good one looks like."""
    length = ID_HEX_LENGTHS[kind]
    if not re.fullmatch(rf"[0-9a-f]{{{length}}}", value or ""):
        raise InvalidArgument(
            f"{value!r} is not {'an' if kind[0] in 'aeiou' else 'a'} {kind} id: Ray {kind} ids are {length} lowercase hex characters. "
            f"Copy one whole from the list tool's answer."
        )
    return value


# A job id goes into the job server's URL path (/api/jobs/<id>): '#', '?', '/' or '%' would address another
# resource (an id of '#' asks for the job list), so they are refused before any request.
_JOB_REF_UNSAFE = re.compile(r"[/?#%\\\s\x00-\x1f\x7f]")


def check_job_ref(job: str, *, what: str = "job id") -> str:
    if len(job) > JOB_ID_CHARS or _JOB_REF_UNSAFE.search(job):
        shown = job if len(job) <= 80 else job[:80] + "…"
        raise InvalidArgument(
            f"{shown!r} is not a valid {what}: ids are at most {JOB_ID_CHARS} characters without spaces, '/', "
            "'?', '#', '%' or '\\'. Submission ids look like raysubmit_…, job ids like 02000000; call list_jobs "
            "to see them."
        )
    return job
