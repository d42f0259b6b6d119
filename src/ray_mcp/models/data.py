"""The output models of a job's Ray Data datasets (get_job): operators, their progress, the bottleneck."""

from pydantic import BaseModel, Field


class DataOperator(BaseModel):
    """One operator of a dataset's streaming execution, as the dashboard (and the driver's progress log) report it."""

    name: str = Field(description="Ray's operator id: name_<index> (fused operators joined by ->).")
    state: str = Field(description="PENDING, RUNNING, FINISHED or FAILED.")
    tasks_done: int | None = Field(
        default=None, description="Its tasks that finished (each made output blocks)."
    )
    blocks_out_total: int | None = Field(
        default=None, description="Output blocks it will make (Ray's estimate)."
    )
    rows_out_total: int | None = Field(default=None, description="Output rows it will make (Ray's estimate).")
    queued_blocks: int | None = Field(default=None, description="Input blocks waiting for it.")
    rows_out: float | None = Field(default=None, description="Rows it output (Prometheus only).")
    spilled_bytes: float | None = Field(
        default=None, description="Its object store bytes spilled (Prometheus only)."
    )
    progress: str | None = Field(
        default=None,
        description="The driver log's last progress line: tasks running, [backpressured:policy], actors, queued "
        "blocks, resources used (its budget).",
    )


class DatasetInfo(BaseModel):
    dataset: str
    state: str
    start_time: str | None = Field(default=None, description="UTC, ISO 8601.")
    end_time: str | None = None
    rows_out_total: int | None = Field(
        default=None, description="Rows its last operator will output (estimate)."
    )
    spilled_bytes: float | None = Field(default=None, description="Prometheus only.")
    resources: str | None = Field(default=None, description="Active & requested resources (the driver log).")
    bottleneck: str | None = Field(
        default=None,
        description="The operator the pipeline waits on: the most queued input, else the first unfinished.",
    )
    operators: list[DataOperator] = Field(default_factory=list)


class JobDatasets(BaseModel):
    """A job's Ray Data datasets, newest first."""

    total: int
    datasets: list[DatasetInfo] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
