"""Root cause in one call: diagnose_job and cluster_health."""

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult
from pydantic import Field

from ray_mcp.diagnosis import gather
from ray_mcp.limits import DEFAULT_DIAGNOSIS_BYTES, MAX_DIAGNOSIS_BYTES, MIN_DIAGNOSIS_BYTES
from ray_mcp.models import ClusterHealth, JobDiagnosis
from ray_mcp.shaping.common import tool_result
from ray_mcp.tools import READ_ONLY, Api, Job

MaxBytes = Annotated[
    int, Field(ge=MIN_DIAGNOSIS_BYTES, le=MAX_DIAGNOSIS_BYTES, description="Budget of the text answer.")
]


async def diagnose_job(
    api: Api, job: Job, max_bytes: MaxBytes = DEFAULT_DIAGNOSIS_BYTES
) -> Annotated[CallToolResult, JobDiagnosis]:
    """Find why a Ray job failed or is stuck, in one call: a ranked verdict with the evidence quoted.

    Use it first when a job FAILED, or is PENDING/RUNNING without progress, instead of reading logs by hand.
    It joins the job's status, error_type and driver exit code, the last traceback of the driver log
    (including the remote `(Actor pid=…)` / RayTaskError chains), the job's dead actors with their death
    causes and worker-log lines, its failed tasks by error type, its pending placement groups (explained
    as pg_status does), actors stuck in PENDING_CREATION and entrypoint resources no node has. The most
    likely root cause comes first, with next steps (tools, prompts, reference pages).
    """
    model, text = await gather.diagnose_job(api, job, max_bytes=max_bytes)
    return tool_result(model, text)


async def cluster_health(
    api: Api, max_bytes: MaxBytes = DEFAULT_DIAGNOSIS_BYTES
) -> Annotated[CallToolResult, ClusterHealth]:
    """Answer "what is wrong in this cluster right now?", ranked by severity, or say plainly it is healthy.

    Use it for a stuck or misbehaving cluster when no single job is to blame (cluster_status only shows
    capacity and demands). It checks dead nodes and why, infeasible and pending demands and placement
    groups, recently failed jobs with a one-line cause, dead actors grouped by cause, actors restarting in
    a loop, failed tasks by error type, Serve applications that are not RUNNING (with the deployment and
    its error), and memory/object store pressure.
    """
    model, text = await gather.cluster_health(api, max_bytes=max_bytes)
    return tool_result(model, text)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Diagnose a job"}))(diagnose_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster health"}))(cluster_health)
