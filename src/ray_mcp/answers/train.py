"""Ray Train runs from the dashboard's Train API, and a run's latest checkpoint from its storage.

Ray 2.60 serves two Train endpoints: ``/api/train/v2/runs/v1`` for Train v2 (the default since
``RAY_TRAIN_V2_ENABLED`` defaults to on) and ``/api/train/v2/runs`` for the legacy v1 trainers. Both read a
state actor that exists only once a training driver ran with ``RAY_TRAIN_ENABLE_STATE_TRACKING=1``; without it
the dashboard answers 500 and we say that the runs are unknown (never "no runs").

Checkpoints are not in the Train API. The checkpoint manager writes ``checkpoint_manager_snapshot.json`` in the
run's storage directory; it is read when that directory is on this machine (the run's nodes are local), else
the answer says it could not be checked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from ray_mcp import limits
from ray_mcp.errors import NotFound, RayRequestFailed
from ray_mcp.limits import DASHBOARD_BODY_CHARS, TRAIN_RUN_NAMES_SHOWN
from ray_mcp.models import TrainCheckpoint, TrainRun, TrainRunList
from ray_mcp.shaping.train import build_run, build_run_list, checkpoint_from_snapshot, find_run
from ray_mcp.sources.hosts import local_addresses
from ray_mcp.sources.routes import TRAIN_RUNS_PATH, Routes

SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"  # ray.train.v2._internal.constants
STATE_TRACKING = "RAY_TRAIN_ENABLE_STATE_TRACKING"


class TrainStateOff(RayRequestFailed):
    """No Train state actor: no run started with state tracking since the head started."""


class Train:
    """The Ray Train runs of one cluster."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes
        self.dashboard_url = routes.dashboard.dashboard_url

    async def runs(self) -> list[dict[str, Any]]:
        """Every Train v2 run the cluster's Train state actor knows, newest first (Ray returns them at once)."""
        return await _train_runs(self.routes)

    async def list_runs(self, *, status: str | None, name: str | None, limit: int) -> TrainRunList:
        try:
            runs = await self.runs()
        except TrainStateOff as exc:  # runs unknown, not an error: nothing to list, and the note says why
            return TrainRunList(known=False, total=0, matched=0, shown=0, notes=[str(exc)])
        return build_run_list(runs, status=status, name=name, limit=limit, now_s=time.time())

    async def get_run(self, run: str) -> TrainRun:
        if not run.strip():
            raise NotFound("The run is empty. Call list_train_runs to see the run ids and names.")
        runs = await self.runs()
        found = find_run(runs, run.strip())
        if found is None:
            names = ", ".join(sorted({str(r.get("name")) for r in runs})[:TRAIN_RUN_NAMES_SHOWN]) or "none"
            raise NotFound(
                f"No Train run with id or name {run!r} on the cluster at {self.dashboard_url} (run "
                f"names: {names}). Call list_train_runs to see them."
            )
        notes: list[str] = []
        checkpoint = await anyio.to_thread.run_sync(read_checkpoint, found, notes)
        return build_run(found, now_s=time.time(), checkpoint=checkpoint, notes=notes)


async def _train_runs(routes: Routes) -> list[dict[str, Any]]:
    """The runs, or why they are unknown: Ray's Train route answers 404 and 500 with reasons worth telling."""
    what = f"the Train runs ({TRAIN_RUNS_PATH})"
    answer = await routes.train_runs()
    status, body = answer.status, answer.text
    url = routes.dashboard.dashboard_url
    if status == 404:
        raise RayRequestFailed(
            f"Train runs unknown: the Ray dashboard at {url} has no Train API ({TRAIN_RUNS_PATH} "
            "answered 404; it needs Ray 2.4x or later with the dashboard's train module)."
        )
    if status == 500 and "not installed" in body:
        raise RayRequestFailed(
            f"Train runs unknown: Ray Train is not installed where the dashboard at {url} runs "
            "(it answered: Train is not installed). Install ray[train] on the cluster's head node."
        )
    if status == 500 and STATE_TRACKING in body:
        raise TrainStateOff(
            f"Train runs unknown: the cluster at {url} has no Ray Train state. Ray records runs "
            f"only when the training driver runs with {STATE_TRACKING}=1 (for a job: runtime_env "
            f'{{"env_vars": {{"{STATE_TRACKING}": "1"}}}}), and no such run has started since the head started. '
            "Runs without it do not show here; use list_jobs and list_actors (class RayTrainWorker) instead."
        )
    if status >= 400:
        short = " ".join(body.split())[:DASHBOARD_BODY_CHARS]
        raise RayRequestFailed(
            f"The Ray dashboard at {url} refused {what}: HTTP {status} {short}. "
            + ("The Train state actor did not answer; retry." if status == 503 else "")
        )
    try:
        data = answer.json()
    except ValueError as exc:
        raise RayRequestFailed(f"The Ray dashboard at {url} answered {what} with non-JSON.") from exc
    runs = data.get("train_runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise RayRequestFailed(f"The Ray dashboard at {url} answered {what} without train_runs.")
    return [r for r in runs if isinstance(r, dict)]


def read_checkpoint(run: Mapping[str, Any], notes: list[str]) -> TrainCheckpoint | None:
    """The run's checkpoint manager snapshot, if its storage is a directory of this machine."""
    config = ((run.get("run_settings") or {}).get("run_config")) or {}
    storage, name = str(config.get("storage_path") or ""), str(config.get("name") or run.get("name") or "")
    if not storage or not name:
        notes.append("Latest checkpoint unknown: the run records no storage path.")
        return None
    where = storage.rstrip("/") + "/" + name
    local = storage.removeprefix("file://")
    if "://" in local or not local.startswith("/"):
        notes.append(f"Latest checkpoint not checked: the run's storage {where} is not a local path.")
        return None
    if not runs_here(run):
        notes.append(
            f"Latest checkpoint not checked: the run's storage {where} is on the cluster's nodes, "
            "not on the machine ray-mcp runs on."
        )
        return None
    path = Path(local) / name / SNAPSHOT_FILE
    try:
        with path.open("rb") as f:
            raw = f.read(limits.TRAIN_SNAPSHOT_BYTES + 1)
    except FileNotFoundError:
        notes.append(f"No checkpoint yet: {path} does not exist (it is written at the first checkpoint).")
        return None
    except OSError as exc:
        notes.append(f"Latest checkpoint not read: {path}: {exc.strerror or type(exc).__name__}.")
        return None
    if len(raw) > limits.TRAIN_SNAPSHOT_BYTES:
        notes.append(
            f"Latest checkpoint not read: {path} is larger than {limits.TRAIN_SNAPSHOT_BYTES:,} bytes."
        )
        return None
    try:
        snapshot = json.loads(raw)
    except ValueError:
        notes.append(f"Latest checkpoint not read: {path} is not JSON.")
        return None
    if not isinstance(snapshot, dict):
        return None
    return checkpoint_from_snapshot(snapshot, str(path))


def runs_here(run: Mapping[str, Any]) -> bool:
    """True if the run's workers ran on this machine (their node IP is one of ours)."""
    ips = {
        str(w.get("node_ip"))
        for a in run.get("attempts") or []
        for w in a.get("workers") or []
        if w.get("node_ip")
    }
    ips |= {str(((run.get("job_details") or {}).get("driver_info") or {}).get("node_ip_address") or "")} - {
        ""
    }
    return bool(ips) and ips <= local_addresses()
