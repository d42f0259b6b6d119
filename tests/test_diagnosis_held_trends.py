"""Trends of what a running job holds (issue 37 step 5), on real parts: the session's Ray head, the real
Prometheus scraping it (tests/prometheus.py) and a driver of our own. Its actor holds a CPU and does nothing
while the driver fills the object store steadily: diagnose_job names the CPU held idle, with its use, and the
store filling, with its rate, each from Prometheus's history of Ray's own metrics (test_trend_rules.py checks the
same rules over written records; this checks the PromQL behind them against what Ray exports).

Each check is also run with its rule taken out of the registry, over the same evidence read again: the finding
must then be missing.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from tests.rule_checks import without
from tests.state_drivers import driver_with_args
from tests.test_diagnosis_trends import diagnose_until, evidence_of, kinds

pytestmark = pytest.mark.live

HOLDS_AND_FILLS = """
import threading
import numpy as np
@ray.remote(num_cpus=1)
class Holder:
    def ready(self):
        return 1
holder = Holder.remote()
ray.get(holder.ready.remote())  # placed: it holds its CPU from here on, and never works
kept = []
def fill():
    while True:  # 16 MiB a second into the store, every object still referenced
        kept.append(ray.put(np.ones(8 << 20, dtype=np.uint8)))
        time.sleep(0.5)
threading.Thread(target=fill, daemon=True).start()
print("JOB", ray.get_runtime_context().get_job_id(), flush=True)
"""


async def test_a_cpu_held_idle_and_a_store_filling_are_named_with_their_figures(
    metrics_client: Client, ray_cluster: Any, prometheus: str
) -> None:
    with driver_with_args(ray_cluster.gcs_address, HOLDS_AND_FILLS) as job_id:
        assert job_id
        answer, text = await diagnose_until(metrics_client, job_id, "idle_resources", 300)
        idle = next(f for f in answer["findings"] if f["kind"] == "idle_resources")
        print(answer["verdict"], idle["title"], sep="\n")  # the figures, for the log (-rP)
        assert "the job holds 1 CPU(s) but its workers used" in idle["title"], idle["title"]
        used = float(idle["title"].split("its workers used ")[1].split("%")[0])
        assert used < 10, idle["title"]  # an actor that sleeps: a few percent of one core at most
        answer, text = await diagnose_until(metrics_client, job_id, "store_filling", 300)
        filling = next(f for f in answer["findings"] if f["kind"] == "store_filling")
        print(filling["title"])
        assert answer["verdict"].startswith("RUNNING"), text
        ev = await evidence_of(ray_cluster, prometheus, job_id)
        assert {"idle_resources", "store_filling"} <= kinds(ev), ev.trends
        with without("trends.job_trends"):
            assert not {"idle_resources", "store_filling"} & kinds(ev)
