"""Root cause in one call: diagnose_job and cluster_health."""

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.diagnosis import evidence, kubernetes, report
from ray_mcp.limits import DIAGNOSIS_BYTES
from ray_mcp.models import ClusterHealth, JobDiagnosis
from ray_mcp.reference.pages import page_links
from ray_mcp.server.context import app_of
from ray_mcp.server.live import job_link
from ray_mcp.shaping.common import linked, tool_result
from ray_mcp.sources.kubernetes import RayTarget
from ray_mcp.tools import READ_ONLY, Api, Job
from ray_mcp.toolsets import Toolset

TOOLSET = Toolset.CORE  # see ray_mcp/toolsets.py

MaxBytes = Annotated[int, Field(ge=DIAGNOSIS_BYTES.low, le=DIAGNOSIS_BYTES.high, description="Text budget.")]


async def kube_target(ctx: Context) -> RayTarget | None:
    """The KubeRay object of a k8s:// cluster (its pods join the diagnosis), else None."""
    return await app_of(ctx).kube_or_none()


Kube = Annotated[RayTarget | None, Resolve(kube_target)]


async def diagnose_job(
    api: Api, kube: Kube, job: Job, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, JobDiagnosis]:
    """Why a job failed, hangs or misbehaves: status and cause (names, ids) first, then evidence and next
    steps.
    """
    ev = await evidence.gather_job(api, job)
    extra = await kubernetes.findings(kube, api, notes=ev.notes) if kube is not None else []
    model, text = report.job_report(job, ev, max_bytes=max_bytes, extra=extra)
    refs = dict.fromkeys(ref for f in model.findings for ref in f.refs)
    links = [job_link(model.submission_id)] if model.submission_id else []  # its driver log, quoted
    return linked(tool_result(model, text), links + page_links(refs))


async def cluster_health(
    api: Api, kube: Kube, max_bytes: MaxBytes = DIAGNOSIS_BYTES.default
) -> Annotated[CallToolResult, ClusterHealth]:
    """What is wrong in the cluster now, ranked, with causes: dead nodes, held demands, failed jobs, crash
    loops, failed tasks, Serve errors, a full object store, events. HEALTHY only if all was checked.
    """
    ev = await evidence.gather_cluster(api)
    extra = await kubernetes.findings(kube, api, notes=ev.notes) if kube is not None else []
    model, text = report.health_report(api.dashboard_url, ev, max_bytes=max_bytes, extra=extra)
    return tool_result(model, text)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Diagnose a job"}))(diagnose_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster health"}))(cluster_health)
