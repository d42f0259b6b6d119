"""Root cause in one call: diagnose_job and cluster_health."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.diagnosis import evidence, report
from ray_mcp.limits import DIAGNOSIS_BYTES
from ray_mcp.models import ClusterHealth, JobDiagnosis
from ray_mcp.reference.pages import page_links
from ray_mcp.server.live import job_link
from ray_mcp.shaping.common import linked, tool_result
from ray_mcp.tools import READ_ONLY, Api, Job

MaxBytes = Annotated[int, Field(ge=DIAGNOSIS_BYTES.low, le=DIAGNOSIS_BYTES.high, description="Text budget.")]


async def diagnose_job(
    api: Api, job: Job, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, JobDiagnosis]:
    """Why a job failed, hangs or misbehaves: status and cause (names, ids) first, then evidence and next
    steps.
    """
    model, text = report.job_report(job, await evidence.gather_job(api, job), max_bytes=max_bytes)
    refs = dict.fromkeys(ref for f in model.findings for ref in f.refs)
    links = [job_link(model.submission_id)] if model.submission_id else []  # its driver log, quoted
    return linked(tool_result(model, text), links + page_links(refs))


async def cluster_health(
    api: Api, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, ClusterHealth]:
    """What is wrong in the cluster now, ranked, with causes: dead nodes, held demands, failed jobs, crash
    loops, failed tasks, Serve errors, a full object store, events. HEALTHY only if all was checked.
    """
    model, text = report.health_report(
        api.dashboard_url, await evidence.gather_cluster(api), max_bytes=max_bytes
    )
    return tool_result(model, text)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Diagnose a job"}))(diagnose_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster health"}))(cluster_health)
