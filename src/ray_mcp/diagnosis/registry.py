"""The rules, registered: each declares what it answers (``on``), its kind, severity, references, next steps,
the evidence it reads and, in a line, what it states. Rules live in ``diagnosis/rules/``, one module per
failure family, and register themselves with ``@rule``; the engine asks ``rules(on)`` for them in order.

What a rule answers (``On``):
- ``TASK_END``, ``ACTOR_END``: why one task attempt failed, why one actor is DEAD. Asked in ``order``; the first
  rule that returns links answers (``ended``).
- ``DRIVER``: where the driver's exception came from, given the job's other chains. Asked in order, first wins.
- ``JOB``, ``CLUSTER``: symptoms found in the graph (a pending group, a Serve loop, a dead node, …), each a list
  of chains; every rule of the scope runs, in order.

A rule is a plain function; ``@rule`` wraps it in a ``Rule`` that stamps the links it returns with itself, so a
chain's kind follows from the facts it holds (facts.chain_kind), never from their words.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ray_mcp.diagnosis.facts import Chain, Kind, Link


class On(StrEnum):
    """The question a rule answers."""

    TASK_END = "task_end"  # why did this task attempt fail
    ACTOR_END = "actor_end"  # why is this actor DEAD
    DRIVER = "driver"  # where did the driver's exception come from
    JOB = "job"  # what is wrong with this job (symptoms)
    CLUSTER = "cluster"  # what is wrong with the cluster (symptoms)
    HELPER = (
        "helper"  # a fact other rules state (a node's death, an owner, a wait): asked by them, not the engine
    )


@dataclass(frozen=True, eq=False)
class Rule:
    family: str  # the module of diagnosis/rules/ it lives in
    name: str
    on: On
    kind: Kind
    fn: Callable[..., Any]
    order: int = 50  # asked before rules of a higher order (first answer wins for an end or the driver)
    severity: int | None = None  # the chain's rank on facts' scale; None: the symptom's it explains
    refs: tuple[str, ...] = ()  # reference pages and prompts for its kind
    next_steps: tuple[str, ...] = ()  # calls to make next (formatted with the chain's values)
    reads: tuple[str, ...] = ()  # the evidence (GraphInputs fields) it reads
    states: str = ""  # what the answer states, in a line (the docs' rule table)
    also: tuple[Kind, ...] = ()  # other kinds its chains may have (the same references)

    @property
    def kinds(self) -> tuple[Kind, ...]:
        return (self.kind, *self.also)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.fn(*args, **kwargs)
        for link in _links(out):
            if link.rule is None:
                link.rule = self
        return out

    @property
    def key(self) -> str:
        return f"{self.family}.{self.name}"


def _links(out: Any) -> list[Link]:
    if isinstance(out, Link):
        return [out]
    if isinstance(out, Chain):
        return out.links
    if isinstance(out, list | tuple):
        return [link for item in out for link in _links(item)]
    return []


RULES: dict[str, Rule] = {}


def rule(
    on: On,
    kind: Kind,
    *,
    order: int = 50,
    severity: int | None = None,
    refs: tuple[str, ...] = (),
    next_steps: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    states: str = "",
    also: tuple[Kind, ...] = (),
) -> Callable[[Callable[..., Any]], Rule]:
    """Register the function below as a rule (see the module's docstring); its docstring's first line is what
    it states unless ``states`` says otherwise."""

    def register(fn: Callable[..., Any]) -> Rule:
        family = fn.__module__.rsplit(".", 1)[-1]
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        r = Rule(
            family,
            fn.__name__,
            on,
            kind,
            fn,
            order,
            severity,
            refs,
            next_steps,
            reads,
            states or " ".join(doc.split()),
            also,
        )
        if r.key in RULES:
            raise ValueError(f"rule {r.key} is registered twice")
        RULES[r.key] = r
        _ORDERED.clear()
        return r

    return register


_FOUND = False


def discover() -> None:
    """Import every family module of diagnosis/rules/ once: each registers its rules as it is imported."""
    global _FOUND
    if _FOUND:
        return
    from ray_mcp.diagnosis import rules as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    _FOUND = True


_ORDERED: dict[On, list[Rule]] = {}


def rules(on: On) -> list[Rule]:
    """The rules that answer ``on``, in the order they are asked (sorted once: asked for every task and actor)."""
    discover()
    if on not in _ORDERED:
        _ORDERED[on] = sorted((r for r in RULES.values() if r.on is on), key=lambda r: (r.order, r.key))
    return _ORDERED[on]


def refs(kind: str) -> list[str]:
    """The reference pages of a finding's kind, as the rules of that kind declare them (every rule that
    declares any declares the same: tests/test_diagnosis_registry.py)."""
    discover()
    return next(
        (list(r.refs) for r in sorted(RULES.values(), key=lambda r: r.key) if kind in r.kinds and r.refs), []
    )


def ended(on: On, *args: Any) -> list[Link]:
    """Why something ended: the links of the first rule for ``on`` that has an answer."""
    for r in rules(on):
        links = r(*args)
        if links:
            return list(links)
    return []


TABLE_HEADER = [
    "| family | rule | answers | kind | severity | what it states | evidence it reads |",
    "|---|---|---|---|---|---|---|",
]


def table() -> list[str]:
    """The rule table, from the registry (``python -m ray_mcp.diagnosis.registry`` prints it; docs/diagnosis.md
    shows a copy whose every row tests/test_diagnosis_registry.py holds to this one)."""
    discover()
    rows = list(TABLE_HEADER)
    for r in sorted(RULES.values(), key=lambda r: (r.family, list(On).index(r.on), r.order, r.name)):
        kinds = ", ".join(f"`{k}`" for k in r.kinds)
        severity = "the symptom's" if r.severity is None else str(r.severity)
        said = r.states.replace("|", "\\|")
        reads = ", ".join(r.reads)
        rows.append(f"| {r.family} | `{r.name}` | {r.on} | {kinds} | {severity} | {said} | {reads} |")
    return rows


if __name__ == "__main__":  # the rules register in the module imported by its name, not in __main__
    from ray_mcp.diagnosis import registry

    print("\n".join(registry.table()))
