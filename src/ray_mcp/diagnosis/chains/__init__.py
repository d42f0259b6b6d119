"""Causal chains over the evidence graph (graph.py): from a symptom to the entity that holds, owns, ended or raised it.

Pure functions (no I/O). ``explain_job`` and ``explain_cluster`` turn a ``GraphInputs`` into ``Chain``s, ranked:
each chain starts at a symptom (a failed task, a dead or looping actor, a pending group, a driver blocked on
something) and follows the graph's edges (ended_by, raised_in, owns, waits_on, holds) to its last link, whose
sentence becomes the verdict.

One module per kind of link or step: ``links`` (Chain, Link, severities), ``ended_by`` (deaths, crashes,
owners), ``holds`` (infeasible or held resources), ``waits_on`` (pending work, deadlocks, the blocked driver),
``symptoms`` (a job's chains by symptom), ``raised_in`` (the driver's exception), ``verdict`` (one job ranked and
told), ``cluster`` (the whole cluster).
"""

from ray_mcp.diagnosis.chains.cluster import event_lines, explain_cluster, node_chains, serve_chains
from ray_mcp.diagnosis.chains.ended_by import actor_end, node_death, owner_chain, task_end
from ray_mcp.diagnosis.chains.holds import pg_wait, resource_wait
from ray_mcp.diagnosis.chains.links import CONTEXT, INFO, LOOP, ROOT, STUCK, WARNING, Chain, Link
from ray_mcp.diagnosis.chains.raised_in import driver_chain
from ray_mcp.diagnosis.chains.symptoms import (
    actor_chains,
    failed_task_chains,
    job_status,
    pending_chains,
    progress,
    restart_loop,
    retried_warnings,
)
from ray_mcp.diagnosis.chains.verdict import explain_job, verdict_line
from ray_mcp.diagnosis.chains.waits_on import actor_wait, deadlock, driver_wait, task_wait

__all__ = [
    "CONTEXT",
    "INFO",
    "LOOP",
    "ROOT",
    "STUCK",
    "WARNING",
    "Chain",
    "Link",
    "actor_chains",
    "actor_end",
    "actor_wait",
    "deadlock",
    "driver_chain",
    "driver_wait",
    "event_lines",
    "explain_cluster",
    "explain_job",
    "failed_task_chains",
    "job_status",
    "node_chains",
    "node_death",
    "owner_chain",
    "pending_chains",
    "pg_wait",
    "progress",
    "resource_wait",
    "restart_loop",
    "retried_warnings",
    "serve_chains",
    "task_end",
    "task_wait",
    "verdict_line",
]
