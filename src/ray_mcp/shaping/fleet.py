"""The fleet's rows -> one answer, roll-ups first (pure functions)."""

from __future__ import annotations

from ray_mcp.amounts import age
from ray_mcp.models.kuberay import Fleet, FleetRow
from ray_mcp.sources.kube_names import violation
from ray_mcp.text import quoted

STUCK = "upgrade stuck"  # kuberay_status's verdict for a RayService upgrade that does not finish


def _gpus(value: float) -> str:
    return f"{value:g}"


def fleet_answer(
    rows: list[FleetRow],
    *,
    total_listed: int,
    next_page: str | None,
    scopes: list[str],
    notes: list[str],
) -> Fleet:
    """Problems first (kuberay_status's findings), then the rest by namespace and name; roll-ups over them."""
    live = [r for r in rows if r.kind != "record"]
    unhealthy = [r for r in live if r.finding is not None]
    stuck = sum(1 for r in live if r.verdict == STUCK)
    known = [r for r in live if r.gpus_used is not None]
    asked = sum(r.gpus_requested for r in live)
    idle = sum(max(r.gpus_requested - (r.gpus_used or 0), 0) for r in known) if known else None
    unknown_gpus = sum(1 for r in live if r.gpus_used is None and r.gpus_requested)
    if idle is None:
        gpu_text = f"{_gpus(asked)} GPU(s) asked for, use unknown" if asked else "no GPUs asked for"
    else:
        gpu_text = f"{_gpus(idle)} GPU(s) idle of {_gpus(asked)} asked for" + (
            f" (use unknown on {unknown_gpus} more cluster(s))" if unknown_gpus else ""
        )
    records = len(rows) - len(live)
    rollup = (
        f"{len(live)} KubeRay object(s): {len(unhealthy)} unhealthy, {gpu_text}, {stuck} upgrade(s) stuck"
        + (f"; {records} terminated cluster(s) kept by the History Server" if records else "")
        + (" (this page; more with next_page)" if next_page else "")
    )
    ordered = sorted(rows, key=lambda r: (r.kind == "record", r.finding is None, r.namespace, r.kind, r.name))
    hint = (
        "Each row's address is the --address (or a clusters-file entry) that every other tool takes for it; "
        "kuberay_status(name=<address>) reads one from this server."
        + (f" Next page: kuberay_fleet(page={next_page!r}, same arguments)." if next_page else "")
    )
    return Fleet(
        rollup=rollup,
        unhealthy=len(unhealthy),
        gpus_idle=idle,
        upgrades_stuck=stuck,
        rows=ordered,
        total_listed=total_listed,
        next_page=next_page,
        scopes=scopes,
        notes=notes,
        hint=hint,
    )


def render_fleet(fleet: Fleet) -> str:
    lines = [fleet.rollup + ".", "Listed: " + "; ".join(fleet.scopes) + "." if fleet.scopes else ""]
    for r in fleet.rows:
        where = f"{r.namespace}/{r.name}" + (f" (context {quoted(r.context)})" if r.context else "")
        groups = ", ".join(
            f"{g.name if violation(g.name, 'label') is None else quoted(g.name)} "
            f"{g.ready}/{g.desired if g.desired is not None else '?'}"
            for g in r.groups
        )
        gpus = (
            f"GPUs {_gpus(r.gpus_requested)} asked, "
            + (f"{_gpus(r.gpus_used)} used" if r.gpus_used is not None else "use unknown")
            if r.gpus_requested or r.gpus_used
            else ""
        )
        parts = [
            r.state,
            f"workers ready/desired: {groups}" if groups else "",
            gpus,
            age(r.age_s) if r.kind != "record" else "",
            f"Ray: {r.ray_verdict}" if r.ray_verdict else "",
        ]
        lines.append(f"{r.verdict.upper()}: {r.kind} {where}: " + "; ".join(p for p in parts if p))
        if r.finding:
            lines.append(f"  {r.finding}")
        if r.address:
            lines.append(f"  address: {r.address}")
    lines += [f"Note: {n}" for n in fleet.notes]
    if fleet.hint:
        lines.append(fleet.hint)
    return "\n".join(line for line in lines if line)
