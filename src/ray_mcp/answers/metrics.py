"""get_metrics: a named question (or raw PromQL) over a window, answered from the cluster's Prometheus as one
summary per series; without a Prometheus, what the nodes' metrics endpoints say now, and how to get history.

Reads: Prometheus (sources/prometheus.py) for history; the dashboard for the cluster's session name (the scope
of every named query), the node and job a call narrows to, and the metrics targets when there is no
Prometheus (sources/node_metrics.py). Shaping is pure (shaping/metrics.py).
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ray_mcp import models
from ray_mcp.amounts import window
from ray_mcp.answers.jobs import Jobs
from ray_mcp.answers.metric_questions import BY_NAME, QUESTIONS, Query, Question
from ray_mcp.errors import (
    InvalidArgument,
    NotFound,
    PrometheusUnavailable,
    RayMCPError,
)
from ray_mcp.limits import (
    FAILED_TARGETS_NAMED,
    METRIC_NAMES_SUGGESTED,
    MIN_RATE_WINDOW_S,
    PROM_SESSIONS_NAMED,
    SERIES_READ,
    WHY_CHARS,
)
from ray_mcp.shaping import metrics as shape
from ray_mcp.sources import promql
from ray_mcp.sources.cluster_sources import ClusterSources
from ray_mcp.sources.dashboard import gather
from ray_mcp.sources.node_metrics import RawSample
from ray_mcp.sources.prometheus import (
    SESSION_LABEL,
    Prometheus,
    Series,
)
from ray_mcp.text import first_sentence, quoted, truncate_text

# How to get history, said wherever it is missing (docs/metrics.md has the steps).
HOW_TO_GET_HISTORY = (
    "History needs a Prometheus scraping the cluster: install one (`apt install prometheus`, or `ray metrics "
    "launch-prometheus` on the head), run it with the config Ray writes in its session directory "
    "(session_latest/metrics/prometheus/prometheus.yml), and pass its URL with --prometheus (or "
    "RAY_PROMETHEUS_HOST). ray-mcp's embedded cluster starts one itself when `prometheus` is on PATH. "
    "See docs/metrics.md."
)
# Identifiers of PromQL that are never metric names (keywords, and what follows `by`, `on`... in parentheses).
PROMQL_WORDS = frozenset(
    [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
        "inf",
        "nan",
        "start",
        "end",
        "atan2",
    ]
)
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}|\[[^\]]*\]")
_IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_NUMBERISH = re.compile(r"\d")


@dataclass(frozen=True)
class Request:
    question: str | None = None
    promql: str | None = None
    node: str | None = None
    job: str | None = None
    deployment: str | None = None
    operator: str | None = None
    last: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int = 12


@dataclass
class Scope:
    """The label matchers a call narrows to (node, job, deployment, operator), already resolved and escaped."""

    node_ip: str | None = None
    job_names: list[str] | None = None  # the job's tasks' functions and actors' classes
    deployment: str | None = None
    operator: str | None = None

    def matchers(self, question: Question) -> list[str]:
        out = [promql.node_matcher(self.node_ip)] if self.node_ip else []
        if self.job_names is not None and question.job_label is not None:
            out.append(promql.names_matcher(*question.job_label, self.job_names))
        out += [promql.equals("deployment", self.deployment)] if self.deployment else []
        out += [promql.contains_matcher("operator", self.operator)] if self.operator else []
        return out

    def keeps(self, question: Question, labels: dict[str, str]) -> bool:
        """The same narrowing, on a raw sample (no Prometheus)."""
        if self.node_ip and not labels.get("instance", "").startswith(
            f"[{self.node_ip}]:" if ":" in self.node_ip else f"{self.node_ip}:"
        ):
            return False
        if self.job_names is not None and question.job_label is not None:
            label, prefix = question.job_label
            value = labels.get(label, "")
            named = [f"{prefix}{n}" for n in self.job_names]
            if not any(value == n or value.startswith(f"{n}.") for n in named):
                return False
        if self.deployment and labels.get("deployment") != self.deployment:
            return False
        return not (self.operator and self.operator not in labels.get("operator", ""))


@dataclass
class Reply:
    """The answer (the edge fits it as it sends it: MetricsAnswer is a Listed) and the points of its series
    (for a chart)."""

    answer: models.MetricsAnswer
    points: dict[tuple[int, str], list[tuple[float, float]]] = field(default_factory=dict)


class Metrics:
    """Time series of one cluster: its Prometheus when one is known, else its nodes' endpoints now."""

    def __init__(self, sources: ClusterSources, jobs: Jobs) -> None:
        self.routes = sources.routes
        self.state = sources.state
        self.dashboard_url = sources.dashboard_url
        self.locator = sources.prometheus
        self.endpoints = sources.node_metrics
        self.jobs = jobs

    async def prometheus(self) -> Prometheus | None:
        """The cluster's Prometheus, or None (``why_missing`` says why): for other answers that read trends."""
        return await self.locator.locate()

    async def history(
        self, prom: Prometheus, name: str, win: promql.Window, *, job_names: list[str] | None, limit: int
    ) -> list[models.Panel]:
        """A named question's panels over ``win``, for the answers that read trends (the diagnosis): the same
        queries get_metrics sends, narrowed to ``job_names`` when given; an empty panel has no series (no
        explanation is looked for)."""
        question = QUESTIONS[name]
        sel = await self._scope_selector(question, Scope(job_names=job_names))
        exprs = [q.promql.format(sel=sel, w=win.rate_window) for q in question.queries]
        results = await gather(*(self._panel_series(prom, e, win) for e in exprs))
        return build_panels(question.queries, exprs, results, win, limit)[0]

    async def ask(self, req: Request) -> Reply:
        question = check_request(req)
        win = promql.window(req.last, req.since, req.until)
        scope = await self._scope(req, question)
        prom = await self.locator.locate()
        if prom is None:
            why = f"no Prometheus is known: {self.locator.why_missing}"
            if question is None:
                raise PrometheusUnavailable(f"Raw PromQL needs a Prometheus, and {why}. {HOW_TO_GET_HISTORY}")
            return await self._now(question, scope, "no history: no Prometheus is known", why)
        try:
            if question is None:
                return await self._raw(prom, req.promql or "", win, req.limit)
            return await self._named(prom, question, scope, win, req.limit)
        except PrometheusUnavailable as exc:
            if question is None:
                raise
            said = first_sentence(str(exc))
            return await self._now(
                question, scope, f"history unknown: {truncate_text(said, WHY_CHARS)}", said
            )

    # -- what the call narrows to --------------------------------------------------------------------------

    async def _scope(self, req: Request, question: Question | None) -> Scope:
        scope = Scope(deployment=clean(req.deployment), operator=clean(req.operator))
        node, job = clean(req.node), clean(req.job)
        reads: list[Any] = []
        if node:
            reads.append(self._node_ip(node))
        if job:
            reads.append(self.jobs.id_of(job))
        found = await gather(*reads)
        if node:
            scope.node_ip = found.pop(0)
        if job:
            scope.job_names = await self._job_names(found.pop(0) or "")
        return scope

    async def _node_ip(self, node: str) -> str:
        for key in ("node_id", "node_ip"):
            for row in (await self.state.nodes())["result"]:
                if str(row.get(key)) == node:
                    return str(row.get("node_ip"))
        raise NotFound(
            f"No node {quoted(node)} in the cluster at {self.dashboard_url} (give a node id or IP). "
            "Call cluster_status to see the nodes, with their ids and IPs."
        )

    async def _job_names(self, job_id: str) -> list[str]:
        """The names Ray labels the job's series with: its tasks' functions and its actors' classes (the
        State API's task summary names both: f, A.method, A.__init__)."""
        summary = await self.state.summary("tasks", filters=[("job_id", "=", job_id)], summary_by="func_name")
        result = summary.get("result") or {}
        cluster = ((result.get("node_id_to_summary") or {}).get("cluster") or {}).get("summary") or {}
        names = {part for name in cluster for part in (str(name), str(name).split(".")[0])}
        if not names:
            raise NotFound(
                f"Job {job_id} has run no task or actor Ray knows of, so no series is named after it. "
                "Call get_job to see its state, or ask without job."
            )
        return sorted(names)

    async def _session(self) -> str:
        version = await self.routes.version()
        session = str((version or {}).get("session_name") or "")
        if not session:
            raise RayMCPError(
                f"The dashboard at {self.dashboard_url} did not name its session (/api/version), which "
                "scopes every metric to this cluster. Ask with promql=... instead (not scoped)."
            )
        return session

    # -- history: a named question -------------------------------------------------------------------------

    async def _named(
        self, prom: Prometheus, question: Question, scope: Scope, win: promql.Window, limit: int
    ) -> Reply:
        session = await self._session()
        sel = await self._scope_selector(question, scope)
        exprs = [q.promql.format(sel=sel, w=win.rate_window) for q in question.queries]
        results = await gather(*(self._panel_series(prom, e, win) for e in exprs))
        if not any(series for series, _total in results):
            await self._explain_empty(prom, question, session, win)
        panels, points = build_panels(question.queries, exprs, results, win, limit)
        notes = [BY_NAME] if scope.job_names is not None else []
        return finish(question.name, _what(win), "prometheus", prom, win, panels, points, notes, question)

    async def _panel_series(
        self, prom: Prometheus, expr: str, win: promql.Window
    ) -> tuple[list[Series], int]:
        """A panel's series (the SERIES_READ largest at each step, past that many) and how many matched."""
        result = await prom.range_query(
            f"topk({SERIES_READ}, {expr})", start=win.start, end=win.end, step_s=win.step_s
        )
        total = len(result.series)
        if total >= SERIES_READ:
            counted = await prom.instant(f"count({expr})", at=win.end)
            total = max(total, int(counted[0].value)) if counted else total
        return result.series, total

    async def _explain_empty(
        self, prom: Prometheus, question: Question, session: str, win: promql.Window
    ) -> None:
        """Nothing matched: say whether Prometheus has this cluster at all, or only not this question."""
        sessions = await prom.label_values(
            SESSION_LABEL, matchers=["ray_node_cpu_count"], start=win.start, end=win.end
        )
        when = f"between {shape.iso(win.start)} and {shape.iso(win.end)}"
        if session not in sessions:
            known = ", ".join(quoted(s) for s in sessions[:PROM_SESSIONS_NAMED]) or "none"
            raise NotFound(
                f"Prometheus at {prom.url} holds no series of this cluster (session {quoted(session)}) {when}; "
                f"the Ray sessions it holds then: {known}. Check that it scrapes this cluster (Ray's config: "
                "session_latest/metrics/prometheus/prometheus.yml), or ask an earlier window (since=...)."
            )
        raise NotFound(
            f"{question.name}: {question.absent} ({when}). Try a longer window (last='6h'), or drop the narrowing."
        )

    # -- history: raw PromQL -------------------------------------------------------------------------------

    async def _raw(self, prom: Prometheus, query: str, win: promql.Window, limit: int) -> Reply:
        result = await prom.range_query(query, start=win.start, end=win.end, step_s=win.step_s)
        if not result.series:
            await self._explain_empty_raw(prom, query, win)
        raw = Query(title="Query", unit="count", promql=query, by=())
        panels, points = build_panels([raw], [query], [(result.series, len(result.series))], win, limit)
        notes = [
            "Raw PromQL is sent as given: it is not scoped to this cluster's session (add "
            f'{SESSION_LABEL}="..." to scope it) and its unit is not known, so values are shown as numbers.',
            *result.warnings,
        ]
        return finish("promql", _what(win), "prometheus", prom, win, panels, points, notes, None)

    async def _explain_empty_raw(self, prom: Prometheus, query: str, win: promql.Window) -> None:
        names = await prom.label_values("__name__", start=win.start, end=win.end)
        unknown = [n for n in metric_names(query) if n not in set(names)]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=5, cutoff=0.6)
            ray_names = [n for n in names if n.startswith("ray_")]
            suggestions = close or ray_names[:METRIC_NAMES_SUGGESTED]
            raise NotFound(
                f"No metric {quoted(unknown[0])} in Prometheus at {prom.url} in the window. "
                f"Names close to it: {', '.join(suggestions) or 'none'} ({len(ray_names)} ray_* names in all; "
                "list them with promql='count by (__name__) ({__name__=~\"ray_.+\"})'), or ask a named question."
            )
        raise NotFound(
            f"The query matched no series between {shape.iso(win.start)} and {shape.iso(win.end)}: its metrics "
            "exist, but not with these labels in this window. Widen the window (last='6h'), or look at the labels "
            "with promql='count by (instance) (<metric>)'."
        )

    # -- now: the nodes' own endpoints ---------------------------------------------------------------------

    async def _now(self, question: Question, scope: Scope, verdict_why: str, why: str) -> Reply:
        """What the nodes' metrics endpoints say now; ``verdict_why`` (in the verdict) and ``why`` (in a note)
        say why there is no history."""
        readable = [q for q in question.queries if q.instant is not None]
        if not readable:
            raise PrometheusUnavailable(
                f"{question.name} is about rates over time, which need history, and {why[0].lower()}{why[1:]}. "
                f"{HOW_TO_GET_HISTORY}"
            )
        targets, sel = await gather(self.routes.prometheus_targets(), self._scope_selector(question, scope))
        names = {n for q in readable if q.instant for n in (*q.instant.numerator, *q.instant.denominator)}
        samples, failed = await self.endpoints.read(targets, names)
        panels = [instant_panel(q, question, scope, samples, sel) for q in readable]
        notes = [f"{why[0].upper()}{why[1:]}. {HOW_TO_GET_HISTORY}"]
        read = f"Read now from {len(targets) - len(failed)} of {len(targets)} metrics endpoints"
        notes.append(
            f"{read}; could not read "
            + "; ".join(
                f"{quoted(t)} ({why_failed})" for t, why_failed in list(failed.items())[:FAILED_TARGETS_NAMED]
            )
            if failed
            else f"{read}."
        )
        notes += [BY_NAME] if scope.job_names is not None else []
        left = [q.title for q in question.queries if q.instant is None]
        notes += [f"Not shown without history: {', '.join(left)}."] if left else []
        if not any(p.total for p in panels):
            raise NotFound(f"{question.name}: {question.absent} ({read.lower()}). {why}.")
        answer = models.MetricsAnswer(
            verdict=shape.verdict(question.name, verdict_why, panels, 0, instant=True),
            question=question.name,
            source="node_endpoints",
            panels=panels,
            shown=sum(len(p.series) for p in panels),
            total=sum(p.total for p in panels),
            notes=notes,
            hints=hints_for(question, instant=True),
        )
        return Reply(answer)

    async def _scope_selector(self, question: Question, scope: Scope) -> str:
        """The label matchers of a named question for this cluster: its session, then the narrowing."""
        return ",".join([promql.equals(SESSION_LABEL, await self._session()), *scope.matchers(question)])


# -- pure helpers ---------------------------------------------------------------------------------------------


def clean(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def check_request(req: Request) -> Question | None:
    """The question asked (None: raw PromQL), refused with the next call when the arguments do not fit."""
    if (req.question is None) == (req.promql is None or not req.promql.strip()):
        raise InvalidArgument(
            "Ask one thing: question=<name> (one of " + ", ".join(QUESTIONS) + ") or promql=<query>. "
            "Nothing was sent."
        )
    given = {
        name: value
        for name, value in (
            ("node", req.node),
            ("job", req.job),
            ("deployment", req.deployment),
            ("operator", req.operator),
        )
        if clean(value)
    }
    if req.question is None:
        if given:
            raise InvalidArgument(
                f"{', '.join(given)} narrow a named question; with promql, put the label matchers in the query. "
                "Nothing was sent."
            )
        return None
    question = QUESTIONS.get(req.question)
    if question is None:
        raise InvalidArgument(f"No question {quoted(req.question)}; the questions: {', '.join(QUESTIONS)}.")
    refused = [name for name in given if name not in question.narrows]
    if refused:
        raise InvalidArgument(
            f"{question.name} cannot be narrowed by {', '.join(refused)}; it takes "
            f"{', '.join(sorted(question.narrows))}. Nothing was sent."
        )
    return question


def metric_names(query: str) -> list[str]:
    """The metric names a PromQL query mentions (identifiers that are not functions, keywords or labels)."""
    text = _GROUPING.sub(" ", _BRACES.sub(" ", _STRINGS.sub(" ", query)))
    names = []
    for match in _IDENT.finditer(text):
        word = match.group()
        if word.lower() in PROMQL_WORDS or _NUMBERISH.fullmatch(word[:1] or "x"):
            continue
        start, rest = match.start(), text[match.end() :].lstrip()
        if rest.startswith("("):
            continue  # a function
        if start and (text[start - 1].isalnum() or text[start - 1] in "_."):
            continue  # the tail of a number (1e3) or of a duration
        if word not in names:
            names.append(word)
    return names


def build_panels(
    queries: Sequence[Query],
    exprs: Sequence[str],
    results: Sequence[tuple[list[Series], int]],
    win: promql.Window,
    limit: int,
) -> tuple[list[models.Panel], dict[tuple[int, str], list[tuple[float, float]]]]:
    """Each panel's series summarized and ranked; ``limit`` series shown in all, shared out across the panels
    (each shows at least its most significant one)."""
    summaries: list[list[tuple[models.SeriesSummary, list[tuple[float, float]]]]] = []
    for query, (series, _total) in zip(queries, results, strict=True):
        pairs = [
            (
                shape.summarize(
                    s.labels, s.points, by=query.by, start=win.start, end=win.end, step_s=win.step_s
                ),
                s.points,
            )
            for s in series
        ]
        order = {id(summary): i for i, summary in enumerate(shape.ranked([p[0] for p in pairs]))}
        summaries.append(sorted(pairs, key=lambda p: order[id(p[0])]))
    quota = allot(limit, [len(s) for s in summaries])
    panels, points = [], {}
    for i, (query, expr, (_series, total), pairs, keep) in enumerate(
        zip(queries, exprs, results, summaries, quota, strict=True)
    ):
        shown = pairs[:keep]
        panels.append(
            models.Panel(
                title=query.title, unit=query.unit, promql=expr, total=total, series=[s for s, _ in shown]
            )
        )
        points.update({(i, s.name): p for s, p in shown})
    return panels, points


def allot(limit: int, sizes: Sequence[int]) -> list[int]:
    """``limit`` series shared across panels of ``sizes`` series, one round at a time, first panels first."""
    quota = [min(1, n) for n in sizes]
    left = max(0, limit - sum(quota))
    while left > 0 and any(q < n for q, n in zip(quota, sizes, strict=True)):
        for i, n in enumerate(sizes):
            if left > 0 and quota[i] < n:
                quota[i] += 1
                left -= 1
    return quota


def instant_panel(
    query: Query, question: Question, scope: Scope, samples: list[RawSample], sel: str
) -> models.Panel:
    """One panel from raw samples: the numerator's sum (over the denominator's) per series of ``query.by``."""
    assert query.instant is not None
    spec = query.instant
    sums: dict[tuple[str, ...], list[float]] = {}
    labels_of: dict[tuple[str, ...], dict[str, str]] = {}
    for sample in samples:
        in_numerator, in_denominator = sample.name in spec.numerator, sample.name in spec.denominator
        if not (in_numerator or in_denominator) or not scope.keeps(question, sample.labels):
            continue
        if not all((sample.labels.get(lbl) in values) == (op == "=") for lbl, op, values in spec.where):
            continue
        key = tuple(sample.labels.get(b, "") for b in query.by)
        totals = sums.setdefault(key, [0.0, 0.0])
        labels_of[key] = {b: sample.labels.get(b, "") for b in query.by}
        totals[0] += sample.value if in_numerator else 0.0
        totals[1] += sample.value if in_denominator else 0.0
    series = []
    for key, (numerator, denominator) in sums.items():
        if spec.denominator and denominator == 0:
            continue
        value = numerator * spec.scale / (denominator if spec.denominator else 1.0)
        series.append(shape.instant_summary(labels_of[key], value, by=query.by))
    ranked = shape.ranked(series)
    return models.Panel(
        title=query.title,
        unit=query.unit,
        promql=query.promql.format(sel=sel, w=f"{MIN_RATE_WINDOW_S}s"),  # the same, asked of a Prometheus
        total=len(ranked),
        series=ranked,
    )


def finish(
    question: str,
    what: str,
    source: models.MetricsSource,
    prom: Prometheus,
    win: promql.Window,
    panels: list[models.Panel],
    points: dict[tuple[int, str], list[tuple[float, float]]],
    notes: list[str],
    named: Question | None,
) -> Reply:
    answer = models.MetricsAnswer(
        verdict=shape.verdict(question, what, panels, win.span_s, instant=False),
        question=question,
        source=source,
        prometheus=f"{prom.url} ({prom.origin})",
        window=models.MetricsWindow(start=shape.iso(win.start), end=shape.iso(win.end), step_s=win.step_s),
        panels=panels,
        shown=sum(len(p.series) for p in panels),
        total=sum(p.total for p in panels),
        notes=notes,
        hints=hints_for(named, instant=False, cut=any(p.total > len(p.series) for p in panels)),
    )
    return Reply(answer, points)


def hints_for(question: Question | None, *, instant: bool, cut: bool = False) -> list[str]:
    hints = []
    if question is not None and cut:
        hints.append(
            f"narrow by {' or '.join(sorted(question.narrows))}, or raise limit, to see other series"
        )
    if not instant:
        hints.append(
            "last='6h' (or since/until) for another window; chart=true for a PNG of the series shown"
        )
        hints.append("each panel's promql can be asked raw (promql=...) to see other labels")
    return hints


def _what(win: promql.Window) -> str:
    """The window in the verdict: the span, and its end when it is not now."""
    ended = abs(time.time() - win.end) > max(60.0, win.step_s)
    return f"{window(win.span_s)} to {shape.iso(win.end)}" if ended else f"last {window(win.span_s)}"
