"""Pydantic output models of stack_traces and cpu_profile."""

from typing import Self

from pydantic import BaseModel, Field

from ray_mcp.limits import STACK_FAILURES_KEPT, STACK_FRAMES_KEPT, STACK_PIDS_SHOWN
from ray_mcp.models.core import Listed


class StackGroup(BaseModel):
    """Processes of one role whose stacks are identical (project frames and the call they are blocked in)."""

    role: str = Field(description="Actor class, 'task <function>', 'driver', or 'pid <n>'.")
    thread: str | None = Field(default=None, description="The thread, when it is not the main one.")
    count: int = Field(description="Processes of this role with this stack.")
    of: int = Field(description="Processes of this role sampled.")
    state: str = Field(description="active (on CPU) or idle (waiting), as py-spy saw the thread.")
    blocked_in: str | None = Field(
        default=None, description="The call the innermost project frame waits in: ray.get, dist.barrier, ..."
    )
    where: str | None = Field(default=None, description="The innermost project frame: file:line in function.")
    frames: list[str] = Field(
        description="Project frames, innermost first; Ray's and libraries' frames folded."
    )
    process_title: str | None = Field(
        default=None, description="Ray's process title, e.g. ray::Actor.method."
    )
    pids: list[str] = Field(description=f"pid@node of up to {STACK_PIDS_SHOWN} of the processes.")


class StackTraces(Listed):
    """What the edge leaves out first, as it must (its items, the most important first): the processes that
    could not be read past the first STACK_FAILURES_KEPT, then the groups from the last (the likeliest culprit
    is first), then the frames of the first group past STACK_FRAMES_KEPT."""

    items_field = "groups"
    notes_field = "hints"
    next_step = "raise max_bytes or lower limit"

    target: str
    verdict: str = Field(description="Where the processes are, in one line.")
    source: str = Field(
        description="dashboard (/worker/traceback), dashboard-task (/task/traceback: a task found by its id, "
        "no pid needed), py-spy (local), or several joined by +."
    )
    processes_total: int = Field(description="Processes of the target (driver, actors, task workers).")
    processes_sampled: int
    processes_failed: int
    processes_left_out: int = Field(default=0, description="Not sampled because of limit.")
    groups: list[StackGroup]
    groups_left_out: int = 0
    failures: list[str] = Field(
        default_factory=list, description="Processes that could not be read, and why."
    )
    hints: list[str] = Field(default_factory=list)

    def _cuttable(self) -> tuple[int, int, int]:
        """(failures past the first few, groups past the first, frames of the first group past the first few)"""
        frames = len(self.groups[0].frames) - STACK_FRAMES_KEPT if self.groups else 0
        return max(0, len(self.failures) - STACK_FAILURES_KEPT), max(0, len(self.groups) - 1), max(0, frames)

    def item_count(self) -> int:
        return min(1, len(self.groups)) + sum(self._cuttable())

    def first(self, k: int) -> Self:
        drop = max(0, self.item_count() - k)
        failures, groups, frames = self._cuttable()
        f = min(drop, failures)
        g = min(drop - f, groups)
        r = min(drop - f - g, frames)
        kept = self.groups[: len(self.groups) - g]
        if r:
            kept[0] = kept[0].model_copy(update={"frames": kept[0].frames[: len(kept[0].frames) - r]})
        return self.model_copy(
            update={
                "groups": kept,
                "groups_left_out": self.groups_left_out + g,
                "failures": self.failures[: len(self.failures) - f],
            }
        )

    def left_out(self, cut: Self) -> str:
        parts = []
        if g := len(self.groups) - len(cut.groups):
            parts.append(f"{g} more of these {len(self.groups)} stack groups")
        if f := len(self.failures) - len(cut.failures):
            parts.append(f"{f} of the {len(self.failures)} processes that could not be sampled")
        if self.groups and (r := len(self.groups[0].frames) - len(cut.groups[0].frames)):
            parts.append(f"{r} of the {len(self.groups[0].frames)} frames of the first stack")
        return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else "nothing"


class HotFunction(BaseModel):
    function: str
    file: str
    line: int | None = Field(default=None, description="The line with the most own samples.")
    own_samples: int
    total_samples: int
    own_pct: float = Field(description="Share of samples spent in this function itself.")
    total_pct: float = Field(description="Share of samples with this function anywhere on the stack.")
    project: bool = Field(description="True for project (user) code, False for Ray, libraries, stdlib.")


class CpuProfile(BaseModel):
    target: str
    verdict: str
    source: str = Field(description="dashboard, dashboard-task (/task/cpu_profile, by task id) or py-spy.")
    duration_s: float
    samples: int = Field(description="Samples taken while the process was on CPU (100 per second).")
    functions: list[HotFunction]
    hottest_stack: list[str] = Field(default_factory=list)
    hints: list[str] = Field(default_factory=list)


class MemoryAllocator(BaseModel):
    """One allocating line: the bytes allocated there (own) and under it (total), as memray counted them."""

    function: str
    file: str
    line: int
    own_bytes: int = Field(description="Bytes allocated by this line itself.")
    total_bytes: int = Field(description="Bytes allocated by this line and every call under it.")
    allocations: int = Field(description="Allocations made by this line itself.")
    project: bool = Field(description="True for project (user) code, False for Ray, libraries, stdlib.")


class LeakCandidate(BaseModel):
    """A project line under which memory was still held when memray detached (leaks_only)."""

    where: str = Field(description="file:line in function: the innermost project frame of the held memory.")
    held_bytes: int
    allocations: int


class MemoryProfile(BaseModel):
    target: str
    verdict: str
    source: str = Field(
        description="dashboard (/memory_profile: memray attached on the worker's node) or memray (run on this "
        "host against the worker's pid, when the dashboard's profiling routes are off)."
    )
    mode: str = Field(
        description="peak: what was allocated at the peak of the window; leaks: what was still held at its end."
    )
    duration_s: float
    total_bytes: int = Field(description="Bytes in the report (at the peak, or still held at the end).")
    allocations: int
    allocators: list[MemoryAllocator] = Field(description="Allocating lines, by own bytes.")
    allocators_total: int = Field(description="Allocating lines in the report.")
    leak_candidates: list[LeakCandidate] = Field(
        default_factory=list, description="leaks mode: project lines under which memory stayed held."
    )
    largest_stack: list[str] = Field(
        default_factory=list, description="The stack of the largest allocating line, innermost first."
    )
    warning: str | None = Field(default=None, description="Ray's warning (another task shares the worker).")
    hints: list[str] = Field(default_factory=list)


class GpuProfile(BaseModel):
    target: str
    verdict: str
    gpu: bool | None = Field(description="Whether the worker's node has a GPU (null: unknown).")
    steps: int = Field(description="Optimizer steps the trace covers.")
    trace_file: str | None = Field(default=None, description="The Torch (Chrome) trace file on the node.")
    node_ip: str | None = None
    hints: list[str] = Field(default_factory=list)
