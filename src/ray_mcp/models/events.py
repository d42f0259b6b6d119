"""The output models of list_events: cluster events, deduplicated, newest first."""

from pydantic import BaseModel, Field

from ray_mcp.models.core import Listed


class ClusterEvent(BaseModel):
    """One event message, with how often it was recorded among the events that match."""

    time: str = Field(description="When it was last recorded (UTC).")
    severity: str
    source: str = Field(description="GCS, RAYLET, AUTOSCALER, JOBS, CORE_WORKER, CLUSTER_LIFECYCLE, COMMON.")
    message: str
    count: int = Field(description="How many matching events had this message.")
    first_time: str | None = Field(default=None, description="The first of them, when count > 1.")
    node: str | None = Field(default=None, description="The node (id, or the host that reported it).")
    job_id: str | None = None
    label: str | None = None


class EventList(Listed):
    items_field = "events"
    total: int = Field(description="Events read: all the dashboard keeps, or those of the source asked for.")
    matched: int = Field(description="Events matching the filters.")
    shown: int
    events: list[ClusterEvent] = Field(default_factory=list, description="Newest first, one per message.")
    notes: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)
