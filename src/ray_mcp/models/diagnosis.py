"""Pydantic output models of diagnose_job and cluster_health."""

from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr


class Finding(BaseModel):
    """One piece of the diagnosis: what is wrong, the evidence lines, and what to do next."""

    severity: int = Field(
        description="Higher ranks first: 100 root cause, 90 stuck, 60 contributing, 40 symptom."
    )
    kind: str = Field(default="", description="driver_exception, actor_died, task_failed, pending_pg, ...")
    title: str
    evidence: list[str] = Field(
        default_factory=list, description="Lines quoted from Ray: logs, messages, causes."
    )
    next_steps: list[str] = Field(default_factory=list, description="Which tool or doc to use next.")
    refs: list[str] = Field(
        default_factory=list, description="Reference pages or prompts about this failure."
    )
    # What makes two findings alike (the same facts about other work), when the engine made it: not sent.
    _alike: str | None = PrivateAttr(default=None)


class JobDiagnosis(BaseModel):
    job: str
    submission_id: str | None = None
    job_id: str | None = None
    status: str
    error_type: str | None = None
    driver_exit_code: int | None = None
    verdict: str = Field(
        description="The job's status and how it got there, then the symptom and the last link of its cause "
        "chain (Unknown: ... if none was found and some evidence could not be read)."
    )
    findings: list[Finding]
    notes: list[str] = Field(default_factory=list, description="What could not be checked, and why.")
    unchecked: list[str] = Field(default_factory=list, description="Evidence that could not be read.")
    events: list[str] = Field(
        default_factory=list, description="Cluster events that explain it, newest first."
    )
    other_jobs: list[str] = Field(default_factory=list, description="Other jobs' problems, in one line.")


class ClusterHealth(BaseModel):
    status: Literal["HEALTHY", "PROBLEMS_FOUND", "UNKNOWN"] = Field(
        description="UNKNOWN: nothing serious found, but some check could not run (see unchecked and notes)."
    )
    healthy: bool = Field(description="True only if every check ran and found nothing serious.")
    verdict: str
    dashboard_url: str
    findings: list[Finding]
    checked: list[str] = Field(description="What was looked at.")
    unchecked: list[str] = Field(default_factory=list, description="Checks that could not run.")
    notes: list[str] = Field(default_factory=list, description="What could not be checked, and why.")
    events: list[str] = Field(default_factory=list, description="Cluster events, newest first.")
