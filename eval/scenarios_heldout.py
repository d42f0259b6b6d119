"""Held-out failure scenarios: buggy Ray programs written as a user would write them, WITHOUT reference to the
diagnosis code, each with the facts an expert's first line would state. Run them on a private head and score
diagnose_job:

    .venv/bin/python -m eval.scenarios_heldout            # prints the table for docs/diagnosis.md

"found" means every cause fact appears somewhere in the answer; "first" means they are in the verdict line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import mcp_client

from ray_mcp.local_head import start_local_head
from ray_mcp.settings import Settings


@dataclass
class Scenario:
    name: str
    source: str
    # what the first line should name (case-insensitive substrings; a tuple holds alternatives, any one will do)
    facts: list[str | tuple[str, ...]]
    running: bool = False  # diagnose while it runs (a hang), not after it ends
    settle_s: float = 8.0  # how long a running scenario gets before the diagnosis
    extra: dict = field(default_factory=dict)


SCENARIOS = [
    Scenario(
        "named actor in the wrong namespace",
        """\
        import ray, subprocess, sys
        ray.init(namespace="training")

        @ray.remote(num_cpus=0)
        class Coordinator:
            def ping(self):
                return "pong"

        c = Coordinator.options(name="coordinator", lifetime="detached").remote()
        ray.get(c.ping.remote())
        ray.shutdown()

        ray.init(namespace="eval")
        coord = ray.get_actor("coordinator")
        print(ray.get(coord.ping.remote()))
        """,
        ["coordinator", "namespace", "training"],
    ),
    Scenario(
        "nested tasks starve the CPUs they hold",
        """\
        import ray
        ray.init()

        @ray.remote(num_cpus=1)
        def leaf(i):
            return i

        @ray.remote(num_cpus=1)
        def shard(i):
            return sum(ray.get([leaf.remote(j) for j in range(2)]))

        print(sum(ray.get([shard.remote(i) for i in range(4)])))
        """,
        ["leaf", "CPU", "shard"],
        running=True,
        settle_s=12,
    ),
    Scenario(
        "argument owned by a task's worker that exited",
        """\
        import os, ray
        ray.init()

        @ray.remote(num_cpus=0)
        class Loader:
            def produce(self):
                return ray.put(list(range(100_000)))
            def crash(self):
                os._exit(1)

        @ray.remote(num_cpus=0, max_retries=0)
        def consume(refs):
            return len(ray.get(refs[0]))

        loader = Loader.remote()
        inner = ray.get(loader.produce.remote())
        try:
            ray.get(loader.crash.remote())
        except Exception:
            pass
        print(ray.get(consume.remote([inner])))
        """,
        ["Loader", "owner"],
    ),
    Scenario(
        "actor method raises, driver re-raises",
        """\
        import ray
        ray.init()

        @ray.remote(num_cpus=0)
        class Evaluator:
            def score(self, batch):
                return sum(batch) / len(batch)

        ev = Evaluator.remote()
        print(ray.get(ev.score.remote([1, 2])))
        print(ray.get(ev.score.remote([])))
        """,
        ["ZeroDivisionError", "Evaluator.score"],
    ),
    Scenario(
        "detached actor whose constructor fails after the driver exits",
        """\
        import ray
        ray.init(namespace="svc")

        @ray.remote(num_cpus=0)
        class Tokenizer:
            def __init__(self):
                import time
                time.sleep(2)
                raise FileNotFoundError("/models/tokenizer.json")

        Tokenizer.options(name="tok", lifetime="detached").remote()
        print("started the tokenizer service")
        """,
        ["Tokenizer", "FileNotFoundError"],
        running=False,
        settle_s=10,
    ),
    Scenario(
        "task waits on an actor that can never be placed",
        """\
        import ray
        ray.init()

        @ray.remote(num_cpus=0, resources={"tpu": 1})
        class Sampler:
            def sample(self):
                return 1

        s = Sampler.remote()
        print(ray.get(s.sample.remote(), timeout=20))
        """,
        ["Sampler", "tpu"],
    ),
    Scenario(
        "worker segfault in a task",
        """\
        import ctypes, ray
        ray.init()

        @ray.remote(max_retries=1, num_cpus=0)
        def decode(frame):
            if frame == 3:
                ctypes.string_at(0)
            return frame

        print(ray.get([decode.remote(i) for i in range(5)]))
        """,
        ["decode", "worker"],
    ),
    Scenario(
        "placement group bundles bigger than any node",
        """\
        import ray
        from ray.util.placement_group import placement_group
        ray.init()

        pg = placement_group([{"CPU": 2}, {"CPU": 2}], strategy="STRICT_SPREAD", name="learners")
        ray.get(pg.ready(), timeout=15)
        """,
        ["learners", "STRICT_SPREAD"],
    ),
]


async def run_all(
    out: Path | None = None,
    scenarios: list[Scenario] | None = None,
    *,
    resources: str | None = None,
    extra_env: dict[str, str] | None = None,
) -> list[dict]:
    """Run the scenarios (this module's own by default) one after another on one private head."""

    head = await start_local_head(
        num_cpus=4, timeout_s=180.0, attempts=8, resources=resources, extra_env=extra_env
    )
    results = []
    try:
        roots = [Path(tempfile.gettempdir())]  # the scenarios' working dirs
        async with mcp_client(
            Settings(address=head.dashboard_url, allow_destructive=True, upload_roots=roots)
        ) as client:
            for sc in SCENARIOS if scenarios is None else scenarios:
                results.append(await run_one(client, sc, head))
                print(
                    json.dumps({k: v for k, v in results[-1].items() if not k.endswith("answer")}), flush=True
                )
    finally:
        head.stop()
    if out is not None:
        out.write_text(json.dumps(results, indent=1))
    return results


def has_fact(fact: str | tuple[str, ...], text: str) -> bool:
    """A fact is a case-insensitive substring, or a tuple of alternatives (any one of them)."""
    options = (fact,) if isinstance(fact, str) else fact
    return any(o.lower() in text.lower() for o in options)


async def submit(client, source: str) -> str:
    work = Path(tempfile.mkdtemp(prefix="heldout-"))
    (work / "main.py").write_text(textwrap.dedent(source))
    sub = await client.call_tool(
        "submit_job", {"entrypoint": "python main.py", "runtime_env": {"working_dir": str(work)}}
    )
    return sub.structured_content["submission_id"]


async def run_one(client, sc: Scenario, head=None) -> dict:
    """Submit the scenario's job and diagnose it once it ended (or, for a hang, while it runs).

    Optional hooks in ``sc.extra`` (async callables): ``setup(client, head)`` before the job, returning a
    dict that fills ``{placeholders}`` in the facts; ``during(client, head, sid)`` once the job is RUNNING;
    ``teardown(client, head)`` at the end. ``health=True`` also scores cluster_health.
    """
    ctx = await sc.extra["setup"](client, head) if "setup" in sc.extra else {}
    facts = [f.format(**ctx) if isinstance(f, str) else tuple(o.format(**ctx) for o in f) for f in sc.facts]
    sid = await submit(client, sc.source)
    deadline = time.monotonic() + 240
    during = sc.extra.get("during")
    try:
        while True:
            info = (await client.call_tool("get_job", {"job": sid})).structured_content
            if info["status"] in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            if info["status"] == "RUNNING" and during is not None:
                await during(client, head, sid)
                during = None
                continue
            if sc.running and info["status"] == "RUNNING":
                await asyncio.sleep(sc.settle_s)
                break
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(1)
        if not sc.running:
            await asyncio.sleep(min(sc.settle_s, 3))
        started = time.monotonic()
        result = await client.call_tool("diagnose_job", {"job": sid})
        took = time.monotonic() - started
        health = ""
        if sc.extra.get("health"):
            health = (await client.call_tool("cluster_health", {})).content[0].text
        if sc.running:
            await client.call_tool("stop_job", {"job": sid})
    finally:
        if "teardown" in sc.extra:
            await sc.extra["teardown"](client, head)
    text = result.content[0].text
    first = text.splitlines()[0] if text else ""
    row = {
        "name": sc.name,
        "status": info["status"],
        "found": all(has_fact(f, text) for f in facts),
        "first": all(has_fact(f, first) for f in facts),
        "bytes": len(text.encode()),
        "verdict_offset": 0 if first else -1,
        "verdict_bytes": len(first.encode()),
        "seconds": round(took, 1),
        "verdict": first,
        "kind": ((result.structured_content or {}).get("findings") or [{}])[0].get("kind"),
        "facts": [f if isinstance(f, str) else " | ".join(f) for f in facts],
        "answer": text,
    }
    if health:
        hfirst = health.splitlines()[0]
        row |= {
            "health_found": all(has_fact(f, health) for f in facts),
            "health_first": all(has_fact(f, hfirst) for f in facts),
            "health_answer": health,
        }
    return row


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rows = asyncio.run(run_all(target))
    hits = sum(r["found"] for r in rows)
    firsts = sum(r["first"] for r in rows)
    print(f"found {hits}/{len(rows)}, stated first {firsts}/{len(rows)}")
