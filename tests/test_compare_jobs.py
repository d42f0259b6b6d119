"""compare_jobs on real parts (issue 37 step 6): two runs of one job submitted to the session's head, where one
function got slower in the second (an env var changed); with the real Prometheus, each run's resource use. The
verdict names the slower function; the env var is named, its secret neighbour never shown. Bad input is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from tests.support import mcp_client, run_to_end, text_of, whole_bytes

from ray_mcp import models
from ray_mcp.limits import RESPONSE_BUDGET_BYTES
from ray_mcp.settings import Settings
from ray_mcp.shaping import compare as shape

pytestmark = pytest.mark.live

SECRET = "sk-live-7f3c9a0e5b2d4c61a8e9"
DRIVER = """
import os, time, ray
ray.init()
@ray.remote
def fast(i):
    return i
@ray.remote
def slow(i):
    time.sleep(float(os.environ["SLOW_S"]))
    return i
ray.get([fast.remote(i) for i in range(20)])
for i in range(6):
    ray.get(slow.remote(i))
print("done")
"""


@pytest.fixture
async def comparing(ray_cluster: Any, prometheus: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    settings = Settings(
        address=ray_cluster.dashboard_url,
        prometheus=prometheus,
        upload_roots=[tmp_path_factory.getbasetemp()],
    )
    async with mcp_client(settings) as client:
        yield client


async def run(client: Client, tmp_path: Path, slow_s: str) -> str:
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {"working_dir": str(tmp_path), "env_vars": {"SLOW_S": slow_s, "API_TOKEN": SECRET}}
    sid, info = await run_to_end(client, entrypoint="python driver.py", runtime_env=env)
    assert info["status"] == "SUCCEEDED", info
    return sid


async def test_two_runs_where_one_function_got_slower_name_that_function(
    comparing: Client, tmp_path: Path
) -> None:
    a = await run(comparing, tmp_path, "0.05")
    b = await run(comparing, tmp_path, "0.8")
    with anyio.fail_after(120):  # Ray's task events reach the State API a second or so after the tasks end
        while True:
            result = await comparing.call_tool("compare_jobs", {"a": a, "b": b})
            assert not result.is_error, text_of(result)
            answer = dict(result.structured_content or {})
            slow = next((r for r in answer["functions"] if r["name"] == "slow"), None)
            if slow and slow["a"] and slow["b"] and slow["a"]["count"] == slow["b"]["count"] == 6:
                break
            await anyio.sleep(1)
    text = text_of(result)
    assert whole_bytes(result) <= RESPONSE_BUDGET_BYTES, whole_bytes(result)
    print(text)  # the figures, for the log (-rP)
    assert answer["differences"][0]["kind"] == "function_slower", text
    assert '"slow" got slower' in answer["verdict"] and answer["verdict"].startswith("b took"), text
    assert slow["b"]["mean_s"] >= 5 * slow["a"]["mean_s"], slow
    fast = next(r for r in answer["functions"] if r["name"] == "fast")
    assert fast["a"]["count"] == fast["b"]["count"] == 20 and fast["b"]["failed"] == 0
    env = next(d for d in answer["differences"] if d["kind"] == "runtime_env")
    assert "env_vars.SLOW_S" in env["said"] and "API_TOKEN" not in env["said"], env
    assert SECRET not in text and SECRET not in str(answer), "a secret env var value was shown"
    assert answer["a"]["ray_version"] and answer["a"]["nodes"] and answer["b"]["status"] == "SUCCEEDED"
    assert answer["a"]["use"] is not None or any("Resource use" in n for n in answer["notes"]), text
    # the check fails without the rule that weighs a slower function
    a_side, b_side = models.RunSide(**answer["a"]), models.RunSide(**answer["b"])
    rows = [models.FunctionRow(**r) for r in answer["functions"]]
    assert shape.differences(a_side, b_side, rows, {})[0].kind == "function_slower"
    slower, shape.SLOWER = shape.SLOWER, float("inf")
    try:
        assert all(d.kind != "function_slower" for d in shape.differences(a_side, b_side, rows, {}))
    finally:
        shape.SLOWER = slower


async def test_compare_jobs_refuses_the_same_job_twice_and_an_unknown_job(comparing: Client) -> None:
    result = await comparing.call_tool("compare_jobs", {"a": "raysubmit_x1", "b": "raysubmit_x1"})
    assert result.is_error and "same job" in text_of(result) and "list_jobs" in text_of(result)
    result = await comparing.call_tool("compare_jobs", {"a": "raysubmit_nope1", "b": "raysubmit_nope2"})
    assert result.is_error and "list_jobs" in text_of(result), text_of(result)
