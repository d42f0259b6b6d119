"""Held-out set 3: buggy RL post-training programs written blind to the diagnosis code (failure mechanisms no
issue names, plus hangs), each with the facts an expert's first line would state, status first. Run on a
private head and score diagnose_job (not collected by pytest):

    .venv/bin/python -m eval.scenarios_heldout3 [out.json]

Uses the runner of eval/scenarios_heldout.py: "found" means every fact appears somewhere in the answer,
"first" means they are all in the verdict line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.support import mcp_client

from eval.scenarios_heldout import Scenario, run_one, submit
from ray_mcp.local_head import start_local_head
from ray_mcp.settings import Settings

FAILED = ("fail",)
STUCK = ("running", "stuck", "hang", "hung", "blocked", "waiting", "deadlock", "no progress")


async def run_to_end(client, source: str, timeout_s: float = 120.0) -> dict:
    """Submit a helper job and wait for it to end; its get_job result."""
    sid = await submit(client, source)
    deadline = time.monotonic() + timeout_s
    while True:
        info = (await client.call_tool("get_job", {"job": sid})).structured_content
        if info["status"] in ("SUCCEEDED", "FAILED", "STOPPED") or time.monotonic() > deadline:
            return info
        await asyncio.sleep(1)


# -- name collision: a detached actor left behind by an earlier job holds the name ------------------------

OLD_BUFFER_JOB = """
import ray

ray.init()


@ray.remote
class ReplayBuffer:
    def __init__(self):
        self.items = []

    def add(self, x):
        self.items.append(x)


buf = ReplayBuffer.options(name="replay_buffer", namespace="rlhf", lifetime="detached").remote()
ray.get(buf.add.remote(1))
print("replay buffer v1 up")
"""

KILL_BUFFER_JOB = """
import ray

ray.init()
ray.kill(ray.get_actor("replay_buffer", namespace="rlhf"))
"""


async def old_buffer(client, head) -> dict:
    info = await run_to_end(client, OLD_BUFFER_JOB)
    print("setup job:", info["status"], info.get("job_id"), flush=True)
    return {"old_job": info.get("job_id") or "?", "old_sid": info["submission_id"]}


async def kill_old_buffer(client, head) -> None:
    await run_to_end(client, KILL_BUFFER_JOB)


# -- user stop: the job is stopped from outside while the learner is mid-step -------------------------------


async def stop_mid_step(client, head, sid: str) -> None:
    await asyncio.sleep(12)
    await client.call_tool("stop_job", {"job": sid})


# -- Serve: a deployment whose health check starts failing --------------------------------------------------

SERVE_SHUTDOWN_JOB = """
import ray
from ray import serve

ray.init()
serve.shutdown()
"""


async def serve_shutdown(client, head) -> None:
    await run_to_end(client, SERVE_SHUTDOWN_JOB)


SCENARIOS = [
    Scenario(
        "threaded_actor_sample_raises",
        """
        import ray

        ray.init()


        @ray.remote(max_concurrency=4)
        class ReplayBuffer:
            def __init__(self, capacity):
                self.capacity = capacity
                self.data = []

            def add(self, batch):
                self.data.extend(batch)
                self.data = self.data[-self.capacity:]
                return len(self.data)

            def sample(self, batch_size):
                import random
                if batch_size > len(self.data):
                    raise ValueError(f"cannot sample {batch_size} transitions from a buffer of {len(self.data)}")
                return random.sample(self.data, batch_size)


        buf = ReplayBuffer.remote(capacity=10_000)
        ray.get(buf.add.remote(list(range(64))))
        # four learner threads sample concurrently; warm-up forgot to fill the buffer to batch size
        batches = ray.get([buf.sample.remote(256) for _ in range(4)])
        print(len(batches))
        """,
        [FAILED, "ReplayBuffer", "sample", "ValueError"],
    ),
    Scenario(
        "rollout_worker_segfault_restarts_exhausted",
        """
        import ctypes
        import ray

        ray.init()


        @ray.remote(max_restarts=2, max_task_retries=2)
        class RolloutWorker:
            def __init__(self, seed):
                self.seed = seed

            def rollout(self, steps):
                # the simulator's C extension dereferences a bad pointer for this env config
                ctypes.string_at(0)
                return [0.0] * steps


        workers = [RolloutWorker.remote(seed=i) for i in range(2)]
        episodes = ray.get([w.rollout.remote(128) for w in workers])
        print(sum(len(e) for e in episodes))
        """,
        [FAILED, "RolloutWorker", ("segmentation fault", "sigsegv", "signal 11", "segfault")],
    ),
    Scenario(
        "task_returns_unpicklable_env_pool",
        """
        import threading
        import ray

        ray.init()


        class EnvPool:
            def __init__(self, n):
                self.envs = [f"CartPole-{i}" for i in range(n)]
                self.lock = threading.Lock()


        @ray.remote
        def build_env_pool(n):
            return EnvPool(n)


        pool = ray.get(build_env_pool.remote(8))
        print(pool.envs)
        """,
        [FAILED, "build_env_pool", ("pickle", "serializ")],
    ),
    Scenario(
        "pythonpath_typo_import_fails_in_workers_only",
        """
        import os
        import sys
        import tempfile
        import ray

        # the team's reward plugins live in a shared directory; the driver finds them through sys.path
        shared = tempfile.mkdtemp(prefix="rlhf_plugins_")
        with open(os.path.join(shared, "reward_model.py"), "w") as f:
            f.write("def score(xs):\\n    return [len(x) / 10 for x in xs]\\n")
        sys.path.insert(0, shared)
        import reward_model  # works on the driver

        ray.init()


        # typo in the workers' PYTHONPATH: "rlhf_plugin_" instead of "rlhf_plugins_"
        @ray.remote(runtime_env={"env_vars": {"PYTHONPATH": shared.replace("rlhf_plugins_", "rlhf_plugin_")}})
        def score_batch(batch):
            from reward_model import score
            return score(batch)


        print(reward_model.score(["warm", "up"]))
        print(ray.get([score_batch.remote(["a response", "another"]) for _ in range(3)]))
        """,
        [FAILED, "score_batch", "reward_model"],
    ),
    Scenario(
        "killed_parameter_server_handle_used_by_task",
        """
        import ray

        ray.init()


        @ray.remote
        class ParameterServer:
            def __init__(self):
                self.weights = [0.0] * 16
                self.version = 0

            def get_weights(self):
                return self.version, self.weights


        @ray.remote
        def run_rollouts(ps, n):
            version, weights = ray.get(ps.get_weights.remote())
            return [sum(weights) + i for i in range(n)]


        ps = ParameterServer.remote()
        print("initial weights", ray.get(ps.get_weights.remote())[0])
        # "reset" step from a refactor: meant to recreate the server, but the new one is never made
        ray.kill(ps)
        results = ray.get([run_rollouts.remote(ps, 4) for _ in range(2)])
        print(results)
        """,
        [FAILED, "ParameterServer", ("ray.kill", "killed")],
    ),
    Scenario(
        "detached_replay_buffer_name_taken",
        """
        import ray

        ray.init(namespace="rlhf")


        @ray.remote
        class ReplayBuffer:
            def __init__(self, capacity):
                self.capacity = capacity
                self.items = []

            def add(self, x):
                self.items.append(x)
                return len(self.items)


        buf = ReplayBuffer.options(name="replay_buffer", lifetime="detached").remote(capacity=100_000)
        print(ray.get(buf.add.remote({"prompt": "hi", "reward": 1.0})))
        """,
        [
            FAILED,
            "replay_buffer",
            ("already taken", "already exists", "taken", "in use"),
            ("{old_job}", "{old_sid}"),
        ],
        extra={"setup": old_buffer, "teardown": kill_old_buffer},
    ),
    Scenario(
        "cancelled_straggler_rollouts_then_get_all",
        """
        import time
        import ray

        ray.init()


        @ray.remote
        def generate_rollouts(i):
            time.sleep(1 if i < 6 else 60)
            return [i] * 8


        refs = [generate_rollouts.remote(i) for i in range(8)]
        ready, stragglers = ray.wait(refs, num_returns=6, timeout=30)
        for ref in stragglers:
            ray.cancel(ref)
        # bug: gathers every ref, the cancelled stragglers included
        rollouts = ray.get(refs)
        print(len(rollouts))
        """,
        [FAILED, "generate_rollouts", "cancel"],
    ),
    Scenario(
        "job_stopped_by_user_mid_train_step",
        """
        import time
        import ray

        ray.init()


        @ray.remote
        class Learner:
            def __init__(self):
                self.step = 0

            def train_step(self):
                for _ in range(600):
                    time.sleep(0.5)
                self.step += 1
                return self.step


        learner = Learner.remote()
        for epoch in range(10):
            print("epoch", epoch, "step", ray.get(learner.train_step.remote()), flush=True)
        """,
        [("stopped",), ("request", "user", "stop_job", "manual")],
        extra={"during": stop_mid_step},
    ),
    Scenario(
        "streaming_rollout_generator_fails_midway",
        """
        import ray

        ray.init()


        @ray.remote
        def stream_rollouts(n):
            for episode in range(n):
                if episode == 5:
                    raise RuntimeError(f"env reset failed at episode {episode}: simulation diverged")
                yield {"episode": episode, "reward": episode * 0.1}


        total = 0.0
        for ref in stream_rollouts.remote(20):
            total += ray.get(ref)["reward"]
            print("reward so far", total, flush=True)
        """,
        [FAILED, "stream_rollouts", "RuntimeError"],
    ),
    Scenario(
        "serve_reward_model_health_check_fails",
        """
        import socket
        import time
        import urllib.request

        import ray
        from ray import serve

        ray.init()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        serve.start(http_options={"host": "127.0.0.1", "port": port})


        @serve.deployment(health_check_period_s=2, health_check_timeout_s=5)
        class RewardModel:
            def __init__(self):
                self.checks = 0

            def check_health(self):
                self.checks += 1
                if self.checks > 3:
                    raise RuntimeError("reward model weights not loaded: checkpoint shard 3 missing")

            async def __call__(self, request):
                return {"reward": 0.5}


        serve.run(RewardModel.bind(), name="reward", route_prefix="/reward")
        while True:
            try:
                print(urllib.request.urlopen(f"http://127.0.0.1:{port}/reward", timeout=5).read(), flush=True)
            except Exception as e:
                print("request failed:", e, flush=True)
            time.sleep(2)
        """,
        ["RewardModel", ("health check", "check_health", "unhealthy", "health-check")],
        running=True,
        settle_s=50.0,
        extra={"teardown": serve_shutdown},
    ),
    Scenario(
        "learner_and_rollout_worker_wait_on_each_other",
        """
        import ray

        ray.init()


        @ray.remote
        class RolloutWorker:
            def __init__(self):
                self.learner = None
                self.version = 0

            def set_learner(self, learner):
                self.learner = learner

            def collect(self):
                weights = ray.get(self.learner.get_weights.remote())  # waits for the learner
                return [sum(weights)] * 4

            def policy_version(self):
                return self.version


        @ray.remote
        class Learner:
            def __init__(self, worker):
                self.worker = worker
                self.weights = [0.1] * 8

            def sync(self):
                import time
                time.sleep(1)
                return ray.get(self.worker.policy_version.remote())  # waits for the worker

            def get_weights(self):
                return self.weights


        worker = RolloutWorker.remote()
        learner = Learner.remote(worker)
        ray.get(worker.set_learner.remote(learner))
        sync_ref = learner.sync.remote()
        batch_ref = worker.collect.remote()
        print(ray.get([sync_ref, batch_ref]))
        """,
        [STUCK, "Learner", "RolloutWorker"],
        running=True,
        settle_s=55.0,
    ),
    Scenario(
        "driver_waits_on_queue_never_filled",
        """
        import ray
        from ray.util.queue import Queue

        ray.init()
        train_queue = Queue(maxsize=64)
        eval_queue = Queue(maxsize=64)


        @ray.remote
        def rollout_producer(queue, worker_id):
            for i in range(4):
                queue.put({"worker": worker_id, "traj": [i] * 8})
            return worker_id


        # bug: producers are handed the eval queue, the learner loop reads the train queue
        ray.get([rollout_producer.remote(eval_queue, w) for w in range(2)])
        while True:
            batch = train_queue.get()  # blocks forever
            print(batch, flush=True)
        """,
        [STUCK, ("queue.get", "_QueueActor")],
        running=True,
        settle_s=55.0,
    ),
]


async def run_all(out: Path | None = None) -> list[dict]:
    """Like eval.scenarios_heldout.run_all, but a scenario whose hooks raise is recorded as a miss with its
    error, and the next one still runs (the set is run once)."""
    head = await start_local_head(num_cpus=4, timeout_s=180.0, attempts=8)
    rows: list[dict] = []
    try:
        roots = [Path(tempfile.gettempdir())]
        settings = Settings(address=head.dashboard_url, allow_destructive=True, upload_roots=roots)
        async with mcp_client(settings) as client:
            for sc in SCENARIOS:
                try:
                    row = await run_one(client, sc, head)
                except Exception as e:  # one broken scenario must not end the run
                    row = {"name": sc.name, "found": False, "first": False, "error": repr(e), "answer": ""}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if not k.endswith("answer")}), flush=True)
                if out is not None:
                    out.write_text(json.dumps(rows, indent=1))
    finally:
        head.stop()
    return rows


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    rows = asyncio.run(run_all(target))
    hits = sum(r["found"] for r in rows)
    firsts = sum(r["first"] for r in rows)
    print(json.dumps({"found": f"{hits}/{len(rows)}", "first": f"{firsts}/{len(rows)}"}))
