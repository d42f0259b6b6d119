"""Jobs: the cluster's recently failed jobs, each by its cause in one line (cluster_health)."""

from __future__ import annotations

import re

from ray_mcp.diagnosis.facts import CONTEXT, Chain, Edge, Kind, Say, said
from ray_mcp.diagnosis.graph import Graph, Row, num
from ray_mcp.diagnosis.registry import On, rule
from ray_mcp.diagnosis.tracebacks import _LOG_RECORD, cut_text, first_line, last_traceback, short_type, tidy
from ray_mcp.limits import CAUSE_CHARS, FAILED_JOBS_SHOWN, JOB_CAUSE_HEAD_CHARS

JOBS_DOC = "ray-docs://reference/12-job-submission"

# Ray's own processes print into the driver's output too ("(pid=gcs_server) ... exporter agent"): not the job's.
_SYSTEM_LINE = re.compile(r"\((?:pid=)?(?:gcs_server|raylet|dashboard\w*|monitor|log_monitor|autoscaler)\)")

JOBS_FAILED = Say("jobs_failed", Edge.ENDED_BY, said("{count} job(s) failed recently"))
JOB_CAUSE = Say("job_cause", Edge.ENDED_BY, said("{job}: {cause}"))


def job_cause(job: Row) -> str:
    """One line on why a job failed: its last exception, else the most telling line of its message."""
    message = str(job.get("message") or "")
    lines = [line for line in message.splitlines() if not _SYSTEM_LINE.search(line)]
    tb = last_traceback(lines)
    if tb is not None and tb.innermost:
        kind, msg = tb.innermost
        where = f" ({tb.user_frame.short()})" if tb.user_frame and not tb.user_frame.internal else ""
        return cut_text(f"{short_type(kind)}: {msg}{where}", CAUSE_CHARS)
    telling = [
        line
        for line in lines[1:]
        if line.strip() and not _LOG_RECORD.match(line) and not line.startswith("Running entrypoint")
    ]
    code = job.get("driver_exit_code")
    head = f"exit code {code}" if code is not None else str(job.get("error_type") or "FAILED")
    return cut_text(
        f"{head}: {tidy(telling[-1])}" if telling else first_line(message, JOB_CAUSE_HEAD_CHARS), CAUSE_CHARS
    )


@rule(On.CLUSTER, Kind.FAILED_JOBS, order=100, severity=CONTEXT + 10, refs=(JOBS_DOC,), reads=("jobs",))
def failed_jobs(g: Graph, chains: list[Chain]) -> list[Chain]:
    """The failed jobs, newest first, each with its cause (diagnose_job on one tells the whole chain)."""
    failed = sorted(
        (j for j in g.ev.jobs or [] if j.get("status") == "FAILED"), key=lambda j: -num(j.get("start_time"))
    )
    if not failed:
        return []
    causes = [
        JOB_CAUSE(job=j.get("submission_id") or j.get("job_id"), cause=job_cause(j))
        for j in failed[:FAILED_JOBS_SHOWN]
    ]
    first = failed[0].get("submission_id") or failed[0].get("job_id")
    return [
        Chain(
            CONTEXT + 10,
            Kind.FAILED_JOBS,
            None,
            [JOBS_FAILED(count=len(failed))],
            [f"diagnose_job job={first} for its root cause"],
            subjects={"jobs:failed"},
            details=causes,
        )
    ]
