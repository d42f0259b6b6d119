"""The output models of summarize_objects: what fills the object store, who holds it, what spilled, what leaks."""

from pydantic import BaseModel, Field


class StoreNode(BaseModel):
    """One node's object store, from its raylet's store stats."""

    node_id: str
    ip: str | None = None
    used: float | None = Field(default=None, description="Bytes in the store (primary copies and others).")
    total: float | None = Field(default=None, description="Bytes: the node's object_store_memory.")
    fraction: float | None = Field(default=None, description="used / total.")
    spilled_bytes: float | None = Field(
        default=None, description="Bytes spilled to disk since the node began."
    )
    spilled_objects: int | None = None
    restored_bytes: float | None = Field(default=None, description="Bytes read back from spill files.")
    restored_objects: int | None = None
    fallback_bytes: float | None = Field(
        default=None, description="Bytes allocated on disk because the store was full (fallback allocation)."
    )
    local_objects: int | None = None


class ObjectGroup(BaseModel):
    """References held by one owner process, created at one call site."""

    call_site: str = Field(
        description="Where the objects were created (Ray records it only with "
        "RAY_record_ref_creation_sites=1; otherwise 'disabled')."
    )
    owner: str = Field(description="The process holding the references: driver or worker, pid, IP, job.")
    pid: int | None = None
    ip: str | None = None
    job_id: str | None = None
    objects: int = Field(description="References in this group.")
    bytes: float = Field(description="Their total size (objects of unknown size count 0).")
    reference_types: dict[str, int] = Field(
        default_factory=dict, description="LOCAL_REFERENCE, PINNED_IN_MEMORY, USED_BY_PENDING_TASK, ..."
    )
    leak: str | None = Field(
        default=None, description="Why these references look leaked: their owner is dead or its job finished."
    )


class ObjectStoreSummary(BaseModel):
    verdict: str
    objects: int = Field(description="Distinct objects referenced in the cluster (or on the node asked for).")
    bytes: float = Field(description="Their total size.")
    nodes: list[StoreNode] = Field(default_factory=list, description="Per-node store use, fullest first.")
    groups: list[ObjectGroup] = Field(default_factory=list, description="Largest holders first.")
    leaks: int = Field(default=0, description="Groups whose owner is dead or whose job finished.")
    notes: list[str] = Field(default_factory=list, description="What could not be read.")
    hints: list[str] = Field(default_factory=list)
