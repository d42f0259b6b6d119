"""compare_jobs' answer: two runs of a job side by side, and the difference that explains the most."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["Difference", "FunctionRow", "FunctionStats", "JobComparison", "RunSide", "RunUse"]

DifferenceKind = Literal[
    "outcome",
    "function_failures",
    "function_slower",
    "function_count",
    "entrypoint",
    "runtime_env",
    "resources",
    "ray_version",
    "nodes",
    "duration",
]


class RunUse(BaseModel):
    """A run's workers over its window, from the cluster's Prometheus, aligned at its start."""

    window_s: float = Field(description="From the run's start, the same length for both runs.")
    cpu_mean_pct: float | None = Field(
        default=None, description="Its workers' CPU use, summed, on average (100 = a core)."
    )
    cpu_peak_pct: float | None = Field(default=None, description="The sum of each worker's highest CPU use.")
    memory_peak_bytes: float | None = Field(default=None, description="The sum of each worker's highest USS.")
    cpu_spark: str | None = Field(default=None, description="The busiest worker's CPU over the window.")


class RunSide(BaseModel):
    job: str = Field(description="The id given.")
    submission_id: str | None = None
    job_id: str | None = None
    status: str
    entrypoint: str
    runtime_env: dict[str, Any] | None = None
    resources: dict[str, float] | None = Field(default=None, description="What the entrypoint asked for.")
    start_time: str | None = None
    duration_s: float | None = Field(default=None, description="End (or now, if running) minus start.")
    ray_version: str | None = Field(default=None, description="The cluster's Ray version (both ran on it).")
    nodes: list[str] = Field(default_factory=list, description="The nodes its driver and tasks ran on (IPs).")
    tasks: int = Field(default=0, description="Tasks read (their final attempts).")
    failed: int = 0
    use: RunUse | None = None


class FunctionStats(BaseModel):
    count: int
    failed: int = 0
    mean_s: float | None = Field(default=None, description="Mean duration of its finished tasks.")
    p50_s: float | None = None
    total_s: float = Field(default=0.0, description="Summed duration of its finished tasks.")


class FunctionRow(BaseModel):
    name: str
    a: FunctionStats | None = None
    b: FunctionStats | None = None


class Difference(BaseModel):
    kind: DifferenceKind
    said: str
    weight: float = Field(description="How much it explains: the verdict names the heaviest.")


class JobComparison(BaseModel):
    verdict: str
    a: RunSide
    b: RunSide
    differences: list[Difference] = Field(default_factory=list, description="Heaviest first.")
    functions: list[FunctionRow] = Field(default_factory=list, description="Largest change first.")
    functions_total: int = 0
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)
