"""Root cause in one call: diagnose_job and cluster_health."""

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.diagnosis import evidence, job_evidence, kubernetes, report
from ray_mcp.limits import DIAGNOSIS_BYTES
from ray_mcp.models import ClusterHealth, JobDiagnosis
from ray_mcp.reference.pages import page_links
from ray_mcp.server.context import app_of
from ray_mcp.server.live import job_link
from ray_mcp.shaping.common import linked, tool_result
from ray_mcp.sources.kube_target import RayTarget
from ray_mcp.tools import READ_ONLY, Api, Job
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py

MaxBytes = Annotated[
    int,
    Field(
        ge=DIAGNOSIS_BYTES.low,
        le=DIAGNOSIS_BYTES.high,
        description="Most bytes of text in the answer; the verdict and its cause come first.",
    ),
]


async def kube_target(ctx: Context) -> RayTarget | None:
    """The KubeRay object of a k8s:// cluster (its pods join the diagnosis), else None."""
    return await app_of(ctx).kube_or_none()


Kube = Annotated[RayTarget | None, Resolve(kube_target)]


async def diagnose_job(
    api: Api, kube: Kube, job: Job, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, JobDiagnosis]:
    """Why one job failed, hangs or misbehaves: its status and root cause (with names and ids) first, then the
    evidence and next steps. Call it before reading a failed job's logs."""
    ev = await job_evidence.gather_job(api, job)
    if kube is not None:
        await kubernetes.gather(kube, api, ev)
    model, text = report.job_report(job, ev, max_bytes=max_bytes)
    refs = dict.fromkeys(ref for f in model.findings for ref in f.refs)
    links = [job_link(model.submission_id)] if model.submission_id else []  # its driver log, quoted
    return linked(tool_result(model, text), links + page_links(refs))


async def cluster_health(
    api: Api, kube: Kube, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, ClusterHealth]:
    """What is wrong in the whole cluster now, ranked with causes: dead nodes, held demands, failed jobs, crash
    loops, failed tasks, Serve errors, a full object store. HEALTHY only when every check was made; for
    one job use diagnose_job."""
    ev = await evidence.gather_cluster(api)
    if kube is not None:
        await kubernetes.gather(kube, api, ev)
    model, text = report.health_report(api.dashboard_url, ev, max_bytes=max_bytes)
    return tool_result(model, text)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Diagnose a job"}))(diagnose_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster health"}))(cluster_health)
