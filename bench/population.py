"""Fill the cluster under test: live actors, finished tasks, placement groups and jobs, grown step by step.

Actors and placement groups belong to one driver process (the holder) that we start and kill: when it exits,
Ray removes them. Jobs are submitted through the Jobs API and stay in the cluster's job table.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from bench.common import Target, clean_env

# A custom resource of the embedded head, so that placement groups reserve nothing real; on a given cluster
# each bundle takes a thousandth of a CPU instead.
PG_RESOURCE = "bench_pg_slot"

HOLDER = textwrap.dedent(
    """
    import json, sys, ray
    from ray.util.placement_group import placement_group, remove_placement_group

    ray.init(address=sys.argv[1], namespace="ray-mcp-bench", log_to_driver=False)
    bundle = json.loads(sys.argv[2])

    @ray.remote(num_cpus=0)
    class BenchIdle:
        def ping(self):
            return 1

    @ray.remote(num_cpus=0.5)
    def bench_noop(i):
        return i

    actors, groups, pending = [], [], []
    print("ready", flush=True)
    for line in sys.stdin:
        kind, n = line.split()
        n = int(n)
        if kind == "actors":
            new = [BenchIdle.remote() for _ in range(n)]
            ray.get([a.ping.remote() for a in new])
            actors += new
        elif kind == "tasks":
            for start in range(0, n, 1000):
                ray.get([bench_noop.remote(i) for i in range(start, min(n, start + 1000))])
        elif kind == "pgs":
            new = [placement_group([bundle]) for _ in range(n)]
            ray.get([g.ready() for g in new])
            groups += new
        elif kind == "pending":  # groups that can never fit: they stay PENDING, explained by pg_status
            pending += [placement_group([{k: 1e6 for k in bundle}], name=f"bench-pending-{i}") for i in range(n)]
        elif kind == "unpend":
            for g in pending:
                remove_placement_group(g)
            pending = []
        print("ok", flush=True)
    """
)

LOG_JOB_LINES = 2000  # the job whose log `ray job logs` prints whole and tail_logs tails


class Population:
    """The holder driver plus the jobs submitted so far; ``grow_to`` adds what a level needs."""

    def __init__(self, target: Target, work_dir: Path) -> None:
        self.target = target
        self.work_dir = work_dir
        self.counts = {"actors": 0, "tasks": 0, "pgs": 0, "jobs": 0}
        self.proc: subprocess.Popen[str] | None = None
        self._jobs: Any = None
        self.log_job: str | None = None

    def start(self) -> None:
        from ray.job_submission import JobSubmissionClient

        bundle = {PG_RESOURCE: 1} if self.target.embedded else {"CPU": 0.001}
        script = self.work_dir / "holder.py"
        script.write_text(HOLDER)
        self._log = open(self.work_dir / "holder.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [sys.executable, str(script), self.target.gcs_address, json.dumps(bundle)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=clean_env(),
        )
        self._expect("ready", 300)
        self._jobs = JobSubmissionClient(self.target.dashboard_url)

    def _expect(self, word: str, timeout_s: float) -> None:
        """Read the holder's stdout up to the line ``word``; Ray prints its own warnings there too."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()  # blocks until the holder prints (or dies: "")
            if line.strip() == word:
                return
            if not line:
                break
            print(f"    holder: {line.strip()[:200]}", flush=True)
        log = (self.work_dir / "holder.log").read_text()[-3000:]
        raise RuntimeError(f"the holder driver did not answer {word!r}: {log}")

    def _holder(self, kind: str, n: int) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{kind} {n}\n")
        self.proc.stdin.flush()
        self._expect("ok", 1800)

    async def grow_to(self, actors: int, tasks: int, pgs: int, jobs: int) -> None:
        started = time.monotonic()
        new_jobs = await anyio.to_thread.run_sync(self._submit_jobs, jobs - self.counts["jobs"])
        for kind, want in (("actors", actors), ("tasks", tasks), ("pgs", pgs)):
            if want > self.counts[kind]:
                await anyio.to_thread.run_sync(self._holder, kind, want - self.counts[kind])
                self.counts[kind] = want
        await self.wait_jobs(new_jobs)
        self.counts["jobs"] = jobs
        await self._wait_task_events(tasks)
        print(
            f"  cluster now holds {actors} live actors, {tasks} finished tasks, {pgs} placement groups, "
            f"{jobs} jobs (+{time.monotonic() - started:.0f} s)",
            flush=True,
        )

    def _submit_jobs(self, n: int) -> list[str]:
        return [self._jobs.submit_job(entrypoint="echo ray-mcp-bench") for _ in range(max(0, n))]

    async def wait_jobs(self, ids: list[str], timeout_s: float = 1800) -> None:
        with anyio.fail_after(timeout_s):
            pending = set(ids)
            while pending:
                jobs = await anyio.to_thread.run_sync(self._jobs.list_jobs)
                done = {j.submission_id for j in jobs if str(j.status) in ("SUCCEEDED", "FAILED", "STOPPED")}
                pending -= done
                if pending:
                    await anyio.sleep(1)

    async def _wait_task_events(self, tasks: int, timeout_s: float = 120) -> None:
        """Task events reach the GCS a little after the tasks finish: wait until it counts them all."""
        import httpx

        params: dict[str, Any] = {
            "limit": 1,
            "filter_keys": "func_or_class_name",
            "filter_predicates": "=",
            "filter_values": "bench_noop",
            "timeout": 30,
        }
        with anyio.move_on_after(timeout_s):
            async with httpx.AsyncClient(base_url=self.target.dashboard_url, timeout=60) as http:
                while True:
                    body = (await http.get("/api/v0/tasks", params=params)).json()
                    if int(body["data"]["result"].get("num_filtered") or 0) >= tasks:
                        return
                    await anyio.sleep(1)

    async def pending_groups(self, n: int) -> None:
        """Add ``n`` placement groups that can never fit (0: remove them); they stay PENDING meanwhile."""
        await anyio.to_thread.run_sync(self._holder, "pending" if n else "unpend", n)
        print(f"  cluster now holds {n} pending placement groups", flush=True)

    async def submit_log_job(self) -> str:
        """A finished job with a ~150 KB log: the subject of get_job, `ray job status` and the log rows."""
        code = f"for i in range({LOG_JOB_LINES}): print('bench log line', i, 'x' * 60)"
        sid = await anyio.to_thread.run_sync(
            lambda: self._jobs.submit_job(entrypoint=f"{sys.executable} -c {json.dumps(code)}")
        )
        await self.wait_jobs([sid])
        self.log_job = str(sid)
        return self.log_job

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=60)
            self.proc = None
            self._log.close()
