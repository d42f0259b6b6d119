"""A second held-out set: buggy Ray programs of kinds the diagnosis issues do not name (Serve constructors,
named and detached actors across jobs and namespaces, async actors, concurrency groups, streaming generators,
ray.wait timeouts, placement groups removed under their actors), plus variants of the named classes with other
mechanisms (OOM of an actor, a node death that takes a placement-group bundle, an owner that is a task,
contention across three jobs, a deadlock through named actors). Written as a Ray user would hit them, WITHOUT
reference to the diagnosis code; each names the facts an expert's first line would state (the last link of
the causal chain, not the symptom). Runs on one private head with the first set's runner:

    .venv/bin/python -m eval.scenarios_heldout2 [results.json] [--only name,name] [--notes DIR]

The head has 4 CPUs and custom resources {"accel": 2, "license": 1}, and its memory monitor threshold is set a
few GB above what the machine uses when it starts (so that an actor can reach it without starving the host).
One scenario adds a second node (`ray start --address`, all agent ports explicit) and kills its raylet by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from eval.scenarios_heldout import Scenario, run_all, submit

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
HEAD_RESOURCES = json.dumps({"accel": 2, "license": 1})
OOM_HEADROOM_BYTES = 7 * 1024**3  # other helpers' heads come and go: 3 GB was crossed


# -- hooks: jobs around the scenario's own ------------------------------------------------------------------


async def wait_status(client, sid: str, wanted: tuple[str, ...], timeout_s: float = 150.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        status = (await client.call_tool("get_job", {"job": sid})).structured_content["status"]
        if status in wanted or status in TERMINAL or time.monotonic() > deadline:
            return status
        await asyncio.sleep(1)


async def wait_marker(client, sid: str, marker: str, timeout_s: float = 90.0) -> bool:
    """Wait until the job's driver log shows ``marker`` (the holder is up), or the job ended."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        log = await client.call_tool("tail_logs", {"job": sid, "lines": 50})
        if not log.is_error and marker in log.content[0].text:
            return True
        if await wait_status(client, sid, TERMINAL, 0) in TERMINAL:
            return marker in (await client.call_tool("tail_logs", {"job": sid, "lines": 50})).content[0].text
        await asyncio.sleep(1.5)
    return False


def jobs_first(*sources: str, marker: str = "", keep: bool = False):
    """A setup hook: submit these jobs first; wait for each to end, or (``keep``) to print ``marker``."""

    async def setup(client, head) -> dict:
        sids = [await submit(client, src) for src in sources]
        for sid in sids:
            if keep:
                print(f"  holder job {sid} up: {await wait_marker(client, sid, marker)}", flush=True)
            else:
                print(f"  setup job {sid}: {await wait_status(client, sid, TERMINAL)}", flush=True)
        KEPT.extend(sids if keep else [])
        return {}

    return setup


KEPT: list[str] = []  # holder jobs still running, stopped by the teardown


def then_clean(source: str | None = None):
    """A teardown hook: stop the kept holder jobs, then run ``source`` (a cleanup job) to its end."""

    async def teardown(client, head) -> None:
        while KEPT:
            await client.call_tool("stop_job", {"job": KEPT.pop()})
        if source is not None:
            sid = await submit(client, source)
            print(f"  cleanup job {sid}: {await wait_status(client, sid, TERMINAL, 90)}", flush=True)

    return teardown


def job_during(source: str, marker: str, delay_s: float):
    """A during hook: ``delay_s`` after the scenario's driver printed ``marker``, another job runs to its end."""

    async def during(client, head, sid: str) -> None:
        await wait_marker(client, sid, marker)
        await asyncio.sleep(delay_s)
        other = await submit(client, source)
        print(f"  concurrent job {other}: {await wait_status(client, other, TERMINAL, 90)}", flush=True)

    return during


# -- the two-node scenario: a worker node joins, then its raylet is killed by pid ---------------------------

WORKER: dict = {}


async def add_worker_node(client, head) -> dict:
    from tests.test_multi_node import LocalWorker

    worker = LocalWorker(
        num_cpus=1, resources=json.dumps({"shard_host": 1}), head_gcs_address=head.gcs_address
    )
    worker.spawn()
    WORKER["node"] = worker
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        nodes = (await client.call_tool("list_nodes", {})).structured_content["nodes"]
        alive = [n for n in nodes if "shard_host" in json.dumps(n) and n["state"] == "ALIVE"]
        if alive:
            WORKER["node_id"] = alive[0]["node_id"]
            print(f"  worker node {alive[0]['node_id']} alive", flush=True)
            return {"worker_node": alive[0]["node_id"][:8]}
        await asyncio.sleep(1)
    raise RuntimeError("the worker node did not join within 120 s")


async def kill_worker_raylet(client, head, sid: str) -> None:
    import psutil

    await wait_marker(client, sid, "shard servers up")
    await asyncio.sleep(3)
    for pid in WORKER["node"].owned_pids():
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).name() == "raylet":
                os.kill(pid, signal.SIGKILL)
                print(f"  killed the worker node's raylet, pid {pid}", flush=True)
    # diagnose once the GCS has declared the node dead (its health check takes up to ~30 s), as a user would
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        nodes = (await client.call_tool("list_nodes", {})).structured_content["nodes"]
        if any(n["node_id"] == WORKER["node_id"] and n["state"] == "DEAD" for n in nodes):
            print("  the worker node is DEAD in the GCS", flush=True)
            return
        await asyncio.sleep(2)


async def stop_worker_node(client, head) -> None:
    if "node" in WORKER:
        await asyncio.to_thread(WORKER.pop("node").stop)


def oom_threshold() -> str:
    """Ray's memory monitor threshold (a fraction of host memory): what the host uses now, plus headroom."""
    import psutil

    mem = psutil.virtual_memory()
    return f"{min(0.95, (mem.total - mem.available + OOM_HEADROOM_BYTES) / mem.total):.3f}"


# -- the scenarios ----------------------------------------------------------------------------------------

SERVE_SHUTDOWN = """
import ray
from ray import serve
ray.init()
serve.shutdown()
"""

SCENARIOS = [
    Scenario(
        "node_death_takes_pg_bundle",
        """
        import time
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        @ray.remote(num_cpus=1)
        class ShardServer:
            def __init__(self, shard):
                self.shard = shard

            def lookup(self, key):
                return (self.shard, key)

        ray.init()
        # one bundle per shard; shard 1 needs the host with the shard index on disk
        pg = placement_group([{"CPU": 1}, {"CPU": 1, "shard_host": 1}], strategy="SPREAD")
        ray.get(pg.ready())
        servers = [
            ShardServer.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)
            ).remote(i)
            for i in range(2)
        ]
        ray.get([s.lookup.remote(0) for s in servers])
        print("shard servers up", flush=True)
        for step in range(3000):
            out = ray.get([s.lookup.remote(step) for s in servers])
            if step % 50 == 0:
                print("step", step, out, flush=True)
            time.sleep(0.1)
        """,
        ["ShardServer", "{worker_node}"],
        extra={
            "setup": add_worker_node,
            "during": kill_worker_raylet,
            "teardown": stop_worker_node,
            "health": True,
        },
    ),
    Scenario(
        "oom_kills_caching_actor",
        """
        import ray

        @ray.remote(num_cpus=0, max_restarts=0)
        class FeatureCache:
            def __init__(self):
                self.partitions = []

            def load_partition(self, i):
                # each partition stays cached: nothing is ever evicted
                self.partitions.append(b"\\x01" * (256 * 1024 * 1024))
                return len(self.partitions)

        ray.init()
        cache = FeatureCache.remote()
        for i in range(48):
            n = ray.get(cache.load_partition.remote(i))
            print("cached partitions:", n, flush=True)
        """,
        ["FeatureCache", ("OOM", "out of memory", "memory monitor", "OutOfMemory")],
        extra={"health": True},
    ),
    Scenario(
        "owner_task_crashed_after_handing_refs",
        """
        import ctypes
        import time
        import ray

        @ray.remote(num_cpus=0)
        class ShardRegistry:
            def __init__(self):
                self.shards = []

            def register(self, refs):
                self.shards.extend(refs)

            def all(self):
                return self.shards

        @ray.remote(num_cpus=0.1)
        def index_shard(i):
            time.sleep(2)  # parse the shard
            return {"shard": i, "rows": 1000 + i}

        def validate_checksums(refs):
            # a native checksum helper with a bad pointer
            return ctypes.cast(8, ctypes.POINTER(ctypes.c_long)).contents.value

        @ray.remote(max_retries=0)
        def load_shards(registry, n):
            refs = [index_shard.remote(i) for i in range(n)]
            ray.get(registry.register.remote(refs))  # consumers can start while the shards are indexed
            validate_checksums(refs)
            return n

        ray.init()
        registry = ShardRegistry.remote()
        load_shards.remote(registry, 4)  # fire and forget: the registry hands out the shards
        while len(ray.get(registry.all.remote())) < 4:
            time.sleep(0.2)
        time.sleep(3)
        refs = ray.get(registry.all.remote())
        print("rows", sum(ray.get(r)["rows"] for r in refs))
        """,
        ["load_shards", ("SIGSEGV", "segfault", "segmentation", "crashed", "WorkerCrashedError")],
    ),
    Scenario(
        "actor_init_keyerror",
        """
        import os
        import ray

        @ray.remote(num_cpus=0)
        class Tokenizer:
            def __init__(self, vocab_env):
                self.vocab_path = os.environ[vocab_env]  # not set in the job's runtime_env

            def encode(self, text):
                return [hash(w) % 50000 for w in text.split()]

        ray.init()
        tok = Tokenizer.remote("TOKENIZER_VOCAB")
        print(ray.get(tok.encode.remote("hello world")))
        """,
        ["Tokenizer", "KeyError"],
    ),
    Scenario(
        "pg_removed_under_its_actors",
        """
        import contextlib
        import time
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        @contextlib.contextmanager
        def reserved(bundles):
            pg = placement_group(bundles, strategy="PACK")
            ray.get(pg.ready())
            try:
                yield pg
            finally:
                remove_placement_group(pg)

        @ray.remote(num_cpus=1)
        class Rollout:
            def __init__(self, rank):
                self.rank = rank

            def sample(self, n):
                return [self.rank] * n

        ray.init()
        with reserved([{"CPU": 1}] * 2) as pg:
            workers = [
                Rollout.options(
                    scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)
                ).remote(i)
                for i in range(2)
            ]
            ray.get([w.sample.remote(1) for w in workers])
            print("warm-up done", flush=True)
        time.sleep(2)
        print(len(ray.get([w.sample.remote(100) for w in workers])))
        """,
        ["Rollout", "placement group", "removed"],
    ),
    Scenario(
        "streaming_generator_raises_midway",
        """
        import ray

        @ray.remote(num_returns="streaming")
        def read_rows(path):
            rows = ["1,0.5", "2,0.7", "3,n/a", "4,0.1"]
            for line in rows:
                idx, score = line.split(",")
                yield int(idx), float(score)

        ray.init()
        total = 0.0
        for ref in read_rows.remote("/data/scores.csv"):
            idx, score = ray.get(ref)
            total += score
        print("total", total)
        """,
        ["read_rows", "ValueError"],
    ),
    Scenario(
        "ray_wait_timeout_straggler",
        """
        import time
        import ray

        @ray.remote
        def score_chunk(i):
            retries = 0
            while i == 5:  # the empty chunk: the retry loop never ends
                retries += 1
                time.sleep(0.5)
            return i * 0.1

        ray.init()
        refs = [score_chunk.remote(i) for i in range(8)]
        ready, not_ready = ray.wait(refs, num_returns=len(refs), timeout=15)
        assert not not_ready, f"{len(not_ready)} chunks did not finish in 15 s"
        print(sum(ray.get(ready)))
        """,
        ["score_chunk"],
    ),
    Scenario(
        "wrong_namespace_get_actor",
        """
        import ray

        ray.init()  # no namespace given: the job runs in an anonymous one
        store = ray.get_actor("feature_store")
        print(ray.get(store.get.remote("user_1")))
        """,
        ["feature_store", "prod"],
        extra={
            "setup": jobs_first("""
                import ray

                @ray.remote(num_cpus=0)
                class FeatureStore:
                    def __init__(self):
                        self.table = {"user_1": [0.1, 0.2]}

                    def get(self, key):
                        return self.table.get(key)

                ray.init(namespace="prod")
                fs = FeatureStore.options(name="feature_store", lifetime="detached").remote()
                ray.get(fs.get.remote("user_1"))
                print("feature store up")
                """),
            "teardown": then_clean("""
                import ray
                ray.init(namespace="prod")
                ray.kill(ray.get_actor("feature_store"))
                """),
        },
    ),
    Scenario(
        "actor_killed_by_another_job",
        """
        import time
        import ray

        @ray.remote(num_cpus=0)
        class Indexer:
            def __init__(self):
                self.docs = 0

            def add(self, n):
                self.docs += n
                return self.docs

        ray.init(namespace="search")
        idx = Indexer.options(name="indexer").remote()
        for step in range(240):
            ray.get(idx.add.remote(10))
            if step % 10 == 0:
                print("indexed", step * 10, flush=True)
            time.sleep(0.5)
        print("done")
        """,
        ["Indexer", "ray.kill"],
        extra={
            "during": job_during(
                """
            import ray

            ray.init(namespace="search")
            for name in ["indexer", "indexer-old"]:  # clean up stale indexers
                try:
                    ray.kill(ray.get_actor(name))
                    print("killed stale actor", name)
                except ValueError:
                    pass
            """,
                marker="indexed 0",
                delay_s=3,
            )
        },
    ),
    Scenario(
        "named_actor_deadlock",
        """
        import ray

        @ray.remote
        class Ledger:
            def __init__(self):
                self.balances = {"alice": 100, "bob": 20}

            def balance(self, who):
                return self.balances[who]

            def transfer(self, src, dst, amount):
                auditor = ray.get_actor("auditor")
                if ray.get(auditor.approve.remote(src, amount)):
                    self.balances[src] -= amount
                    self.balances[dst] += amount
                return self.balances

        @ray.remote
        class Auditor:
            def approve(self, who, amount):
                ledger = ray.get_actor("ledger")
                return ray.get(ledger.balance.remote(who)) >= amount

        ray.init(namespace="bank")
        ledger = Ledger.options(name="ledger").remote()
        auditor = Auditor.options(name="auditor").remote()
        print("transferring", flush=True)
        print(ray.get(ledger.transfer.remote("alice", "bob", 30)))
        """,
        ["Ledger", "Auditor", ("deadlock", "cycle", "each other")],
        running=True,
        settle_s=45,
    ),
    Scenario(
        "async_actor_awaits_event_never_set",
        """
        import asyncio
        import ray

        @ray.remote
        class Batcher:
            def __init__(self, batch_size):
                self.batch_size = batch_size
                self.pending = []
                self.flushed = asyncio.Event()

            async def submit(self, item):
                self.pending.append(item)
                if len(self.pending) >= self.batch_size:
                    self.pending.clear()
                    self.flushed.set()
                await self.flushed.wait()  # released when a full batch is flushed
                return item

        ray.init()
        b = Batcher.remote(batch_size=64)
        refs = [b.submit.remote(i) for i in range(10)]
        print("submitted 10 items", flush=True)
        print(ray.get(refs))
        """,
        ["Batcher", "submit"],
        running=True,
        settle_s=45,
    ),
    Scenario(
        "concurrency_group_slot_held_forever",
        """
        import time
        import ray

        @ray.remote(concurrency_groups={"io": 1, "compute": 2})
        class Monitor:
            def __init__(self):
                self.samples = []

            @ray.method(concurrency_group="io")
            def poll(self, interval_s):
                while True:
                    self.samples.append(time.time())
                    time.sleep(interval_s)

            @ray.method(concurrency_group="io")
            def latest(self):
                return self.samples[-1] if self.samples else None

            @ray.method(concurrency_group="compute")
            def crunch(self, n):
                return sum(range(n))

        ray.init()
        m = Monitor.remote()
        m.poll.remote(0.5)
        print("crunch", ray.get(m.crunch.remote(10**6)), flush=True)
        print("latest sample", ray.get(m.latest.remote()))
        """,
        ["Monitor", "poll", "latest"],
        running=True,
        settle_s=45,
    ),
    Scenario(
        "own_actors_hold_every_cpu",
        """
        import ray

        @ray.remote(num_cpus=1)
        class EnvRunner:
            def __init__(self, seed):
                self.seed = seed

            def rollout(self, n):
                return [self.seed * i for i in range(n)]

        @ray.remote(num_cpus=1)
        def aggregate_returns(*batches):
            return sum(sum(b) for b in batches)

        ray.init()
        runners = [EnvRunner.remote(s) for s in range(4)]
        batches = [r.rollout.remote(100) for r in runners]
        print("rollouts submitted", flush=True)
        print(ray.get(aggregate_returns.remote(*batches)))
        """,
        ["aggregate_returns", "EnvRunner"],
        running=True,
        settle_s=45,
        extra={"health": True},
    ),
    Scenario(
        "three_jobs_contend_for_accel",
        """
        import ray

        @ray.remote(num_cpus=1, resources={"accel": 1})
        class Learner:
            def step(self):
                return 0

        ray.init()
        learner = Learner.remote()
        print("learner created", flush=True)
        print(ray.get(learner.step.remote()))
        """,
        ["Learner", "accel", "RolloutWorker"],
        running=True,
        settle_s=45,
        extra={
            "setup": jobs_first(
                *[
                    """
                import time
                import ray

                @ray.remote(num_cpus=0, resources={"accel": 1})
                class RolloutWorker:
                    def ready(self):
                        return True

                    def run(self):
                        while True:
                            time.sleep(1)

                ray.init()
                w = RolloutWorker.remote()
                ray.get(w.ready.remote())
                print("rollout worker up", flush=True)
                ray.get(w.run.remote())
                """
                ]
                * 2,
                marker="rollout worker up",
                keep=True,
            ),
            "teardown": then_clean(),
            "health": True,
        },
    ),
    Scenario(
        "detached_actor_of_finished_job_holds_license",
        """
        import ray

        @ray.remote(num_cpus=0, resources={"license": 1})
        class LicensedSolver:
            def solve(self, x):
                return x * 2

        ray.init(namespace="solver")
        s = LicensedSolver.remote()
        print("solver created", flush=True)
        print(ray.get(s.solve.remote(21)))
        """,
        ["license", "TokenBucket", "detached"],
        running=True,
        settle_s=45,
        extra={
            "setup": jobs_first("""
                import ray

                @ray.remote(num_cpus=0, resources={"license": 1})
                class TokenBucket:
                    def __init__(self, rate):
                        self.rate = rate

                    def take(self):
                        return True

                ray.init(namespace="ratelimit")
                tb = TokenBucket.options(name="api_tokens", lifetime="detached").remote(100)
                ray.get(tb.take.remote())
                print("token bucket up")
                """),
            "teardown": then_clean("""
                import ray
                ray.init(namespace="ratelimit")
                ray.kill(ray.get_actor("api_tokens"))
                """),
            "health": True,
        },
    ),
    Scenario(
        "serve_replicas_hold_accel",
        """
        import ray

        @ray.remote(num_cpus=1, resources={"accel": 1})
        def finetune(steps):
            return steps

        ray.init()
        print("submitting finetune", flush=True)
        print(ray.get(finetune.remote(1000)))
        """,
        ["finetune", "accel", "Reranker"],
        running=True,
        settle_s=45,
        extra={
            "setup": jobs_first("""
                import socket
                import ray
                from ray import serve

                @serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 0, "resources": {"accel": 1}})
                class Reranker:
                    async def __call__(self, request):
                        return {"scores": [0.9, 0.1]}

                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
                s.close()
                ray.init()
                serve.start(http_options={"host": "127.0.0.1", "port": port})
                serve.run(Reranker.bind(), name="ranker", route_prefix="/rank")
                print("ranker up")
                """),
            "teardown": then_clean(SERVE_SHUTDOWN),
            "health": True,
        },
    ),
    Scenario(
        "serve_constructor_raises",
        """
        import socket
        import ray
        from ray import serve

        @serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.5})
        class Embedder:
            def __init__(self, model_path):
                with open(model_path, "rb") as f:
                    self.weights = f.read()

            async def __call__(self, request):
                return {"dim": len(self.weights)}

        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        ray.init()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(Embedder.bind("/models/embedder-v3/weights.bin"), name="embedder", route_prefix="/embed")
        print("embedder up")
        """,
        ["Embedder", "FileNotFoundError"],
        extra={"teardown": then_clean(SERVE_SHUTDOWN), "health": True},
    ),
]


def write_notes(rows: list[dict], answers: Path, table: Path) -> None:
    """The raw answers (for the diagnosis helper) and the results table."""
    parts = ["# Held-out set 2: diagnose_job answers (raw)\n"]
    for r in rows:
        parts.append(f"\n## {r['name']} (job {r['status']}; facts: {', '.join(r['facts'])})\n")
        parts.append(f"\n```\n{r['answer']}\n```\n")
        if "health_answer" in r:
            parts.append(f"\ncluster_health:\n\n```\n{r['health_answer']}\n```\n")
    answers.write_text("".join(parts))
    lines = [
        "| scenario | job | found | first | answer B | verdict B | s | health found/first | facts |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        health = f"{r['health_found']}/{r['health_first']}" if "health_found" in r else "-"
        lines.append(
            f"| {r['name']} | {r['status']} | {r['found']} | {r['first']} | {r['bytes']} | "
            f"{r['verdict_bytes']} | {r['seconds']} | {health} | {'; '.join(r['facts']).replace(' | ', ' or ')} |"
        )
    hits, firsts = sum(r["found"] for r in rows), sum(r["first"] for r in rows)
    lines.append(f"\nfound {hits}/{len(rows)}, stated first {firsts}/{len(rows)}")
    table.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    args = sys.argv[1:]
    only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else None
    target = next((Path(a) for a in args if a.endswith(".json")), None)  # the raw rows, answers included
    chosen = [s for s in SCENARIOS if only is None or s.name in only]
    rows = asyncio.run(
        run_all(
            target,
            chosen,
            resources=HEAD_RESOURCES,
            extra_env={"RAY_memory_usage_threshold": oom_threshold()},
        )
    )
    hits, firsts = sum(r["found"] for r in rows), sum(r["first"] for r in rows)
    print(f"found {hits}/{len(rows)}, stated first {firsts}/{len(rows)}")
    if "--notes" in args:  # a directory: heldout2-answers.md and heldout2-results.md
        notes = Path(args[args.index("--notes") + 1])
        write_notes(rows, notes / "heldout2-answers.md", notes / "heldout2-results.md")
