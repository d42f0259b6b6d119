"""The models of a log answer (tail_logs, kuberay_logs) and how the edge fits one: a log answer (Logged) holds runs
of lines (LogRun), oldest first, and declares where they are, as a list page (Listed) names its items' field."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Self

from pydantic import BaseModel, Field

from ray_mcp.amounts import byte_size
from ray_mcp.limits import GREP_LONG_LINE_BYTES
from ray_mcp.models.core import EdgeBudget
from ray_mcp.text import cut_counted

__all__ = ["LogFile", "LogRun", "LogSection", "LogTail", "Logged"]


class LogRun(BaseModel):
    """Lines of one log, oldest first, in the field ``lines`` of the subclass: what the edge shortens from the
    oldest end. A subclass with counters of what is shown says so in its own ``without_oldest``."""

    if TYPE_CHECKING:  # declared by each subclass, in the place its schema lists it
        lines: list[str]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "lines" not in cls.model_fields:  # fails at import, not at the first log too long to send
            raise TypeError(f"{cls.__name__} is a LogRun: it needs a field 'lines'")

    def without_oldest(self, n: int) -> Self:
        return self.model_copy(update={"lines": self.lines[n:]})

    def first_cut_to(self, chars: int) -> Self:
        """The run whose oldest line keeps its first ``chars`` characters (a single line too long to send)."""
        return self.model_copy(update={"lines": [cut_counted(self.lines[0], chars), *self.lines[1:]]})


class Logged(EdgeBudget):
    """A log answer that the edge fits (shaping.common.tool_result), one policy for every log: when the whole
    answer as sent would pass its budget, the oldest lines are left out and the newest kept, and one note in
    ``notes_field`` says how many. A subclass names where its lines are (``runs_field``, a list of LogRun; ""
    when the answer is one run itself), so that no tool carries fitting code of its own.
    """

    runs_field: ClassVar[str] = ""
    notes_field: ClassVar[str] = "hints"
    next_step: ClassVar[str] = ""  # what the note advises, if anything reads more of the log

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        for name in (cls.runs_field, cls.notes_field):
            if name and name not in cls.model_fields:
                raise TypeError(f"{cls.__name__} declares {name!r}, which is not one of its fields")
        if not cls.runs_field and not issubclass(cls, LogRun):
            raise TypeError(f"{cls.__name__} names no runs_field, so it must be a LogRun itself")

    def runs(self) -> list[LogRun]:
        return list(getattr(self, self.runs_field)) if self.runs_field else [self]  # type: ignore[list-item]

    def with_runs(self, runs: list[LogRun], note: str) -> Self:
        """This answer holding ``runs`` instead of its own, with ``note`` after its notes."""
        notes = {self.notes_field: [*getattr(self, self.notes_field), note]}
        if self.runs_field:
            return self.model_copy(update={self.runs_field: runs, **notes})
        (own,) = runs
        return own.model_copy(update=notes)  # type: ignore[return-value]


class LogSection(LogRun):
    """What was read from one log file: a run of its lines the edge may shorten from the oldest end."""

    source: str = Field(description="What the file is, e.g. 'driver log of job raysubmit_…'.")
    node_id: str | None = None
    filename: str | None = Field(
        default=None, description="The file, relative to the node's Ray log directory."
    )
    stream: str | None = Field(default=None, description="out or err, for worker logs.")
    lines: list[str] = Field(description="The lines shown, oldest first.")
    line_numbers: list[int] | None = Field(
        default=None, description="For grep: the 1-based number in the file of each line shown."
    )
    match_numbers: list[int] | None = Field(
        default=None, description="For grep: the numbers of the matching lines shown (others are context)."
    )
    lines_shown: int
    lines_left_out: int | None = Field(
        default=None,
        description="Lines of the file not shown; null when not counted (plain tails skip counting).",
    )
    more_before: bool = Field(description="True if the file has earlier lines than those shown.")
    bytes_left_out: int | None = Field(
        default=None,
        description="Bytes not shown of what was read (byte budget, cut lines), or of the file (grep).",
    )
    truncated_lines: int = Field(
        default=0, description="Lines cut because one line alone exceeded the budget."
    )
    grep: str | None = None
    matches: int | None = Field(default=None, description="Matching lines found in the part scanned.")
    scanned_bytes: int | None = None
    scanned_lines: int | None = None
    scan_complete: bool | None = Field(default=None, description="False if grep stopped at max_scan_mb.")
    long_lines: int | None = Field(
        default=None,
        description=f"For grep: lines over {byte_size(GREP_LONG_LINE_BYTES)} without a newline, matched in "
        f"{byte_size(GREP_LONG_LINE_BYTES)} pieces and shown cut.",
    )
    followed_s: float | None = None
    new_lines: int | None = Field(default=None, description="Lines that arrived while following.")

    def without_oldest(self, n: int) -> Self:
        dropped, kept = self.lines[:n], self.lines[n:]
        update: dict[str, Any] = {
            "lines": kept,
            "lines_shown": len(kept),
            "more_before": True,
            "bytes_left_out": (self.bytes_left_out or 0) + sum(len(x.encode()) + 1 for x in dropped),
        }
        if self.lines_left_out is not None:
            update["lines_left_out"] = self.lines_left_out + n
        if self.line_numbers is not None:  # grep: the numbers follow their lines
            numbers = self.line_numbers[n:]
            shown = set(numbers)
            update["line_numbers"] = numbers
            update["match_numbers"] = [m for m in self.match_numbers or [] if m in shown]
        return self.model_copy(update=update)

    def first_cut_to(self, chars: int) -> Self:
        return super().first_cut_to(chars).model_copy(update={"truncated_lines": self.truncated_lines + 1})


class LogFile(BaseModel):
    name: str = Field(description="Relative to the node's Ray log directory: give it as filename to read it.")
    bytes: int | None = Field(default=None, description="Known when the node runs on ray-mcp's machine.")
    modified: str | None = Field(default=None, description="UTC; known with bytes.")


class LogTail(Logged):
    runs_field = "sections"
    next_step = "raise max_bytes, or narrow with grep"

    sections: list[LogSection]
    files: list[LogFile] = Field(default_factory=list, description="A filename pattern's matches.")
    hints: list[str] = Field(default_factory=list)
