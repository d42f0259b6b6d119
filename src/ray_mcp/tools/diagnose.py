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
    """Find why a Ray job failed, is stuck, or is unhealthy, in one call: status first, then the cause chain.

    Use it first when a job FAILED, or is PENDING/RUNNING without progress, instead of reading logs by hand.
    The first line is the job's status and how it got there, then the symptom and the last link of its cause
    chain, followed through Ray's records: where an exception was first raised (task, actor, driver), what
    ended an actor or task (memory monitor, node death, ray.kill, cancel, placement group removal, its
    owner's death), what pending work waits on (infeasible, or held by whom in which job), restart loops
    with their crash reason, deadlocks, stalls with stacks, and the cluster events that explain it. Only this
    job's own problems; other jobs in one line.
    """
    model, text = await gather.diagnose_job(api, job, max_bytes=max_bytes)
    return tool_result(model, text)


async def cluster_health(
    api: Api, max_bytes: MaxBytes = DEFAULT_DIAGNOSIS_BYTES
) -> Annotated[CallToolResult, ClusterHealth]:
    """Answer "what is wrong in this cluster right now?", ranked, each problem named by its cause.

    Use it for a stuck or misbehaving cluster when no single job is to blame. It follows each problem to its
    cause as diagnose_job does: dead nodes and what they took down, work that waits forever (infeasible) or
    for resources other jobs hold (named), restart loops and why, failed tasks and dead actors by cause and
    job, Serve apps that are not RUNNING, memory pressure, and cluster events (node changes, OOM kills),
    newest first. HEALTHY only when every check ran; otherwise UNKNOWN.
    """
    model, text = await gather.cluster_health(api, max_bytes=max_bytes)
    return tool_result(model, text)


def register(server: MCPServer) -> None:
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Diagnose a job"}))(diagnose_job)
    server.tool(annotations=READ_ONLY.model_copy(update={"title": "Cluster health"}))(cluster_health)
