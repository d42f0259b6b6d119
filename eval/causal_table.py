"""The table of docs/diagnosis.md: each recorded failure class, the evidence its chain used, answer bytes and
the byte offset of the verdict (``python -m eval.causal_table``)."""

from __future__ import annotations

from tests.causal_support import RECORDED, replay

from ray_mcp.diagnosis import chains, report


def rows() -> list[str]:
    out = ["| class (recording) | chain (link kinds) | evidence used | answer bytes | verdict offset | verdict bytes |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    from tests.test_causal_reasoning import EXPECTED

    for path in sorted(p for p in RECORDED.glob("*.json") if p.stem in EXPECTED):
        ev = replay(path.stem)
        model, text = report.job_report("recorded", ev, max_bytes=6000)
        _phrase, found, _ = chains.explain_job(ev)
        top = found[0] if found else None
        kinds = " → ".join(link.kind for link in top.links) if top else "-"
        used = sorted({k for k in ("tasks", "actors", "nodes", "pgs", "workers", "events", "driver_lines")
                       if getattr(ev, k)} | ({"worker stderr"} if ev.worker_logs else set())
                      | ({"holders"} if ev.alive_actors else set()))  # fmt: skip
        offset = text.encode().find(model.verdict.encode())
        out.append(f"| {top.kind if top else '-'} ({path.stem}) | {kinds} | {', '.join(used)} | "
                   f"{len(text.encode())} | {offset} | {len(model.verdict.encode())} |")  # fmt: skip
    return out


if __name__ == "__main__":
    print("\n".join(rows()))
