"""The checks of issue 39's rules, shared by their live scenarios (test_diagnosis_follow.py, which record the
evidence with RAY_MCP_RECORD=1) and their unit tests over those recordings (test_diagnosis_follow_replay.py).
Each takes diagnose_job's answer as text: its first line is the verdict, and the scorer reads the root cause in
the first 1,200 bytes (no wrong cause in the first 300)."""

from __future__ import annotations

from collections.abc import Callable


def first(text: str, n: int) -> str:
    """The first ``n`` bytes of the answer, as a scorer reads them."""
    return text.encode()[:n].decode(errors="ignore")


def verdict(text: str) -> str:
    return text.splitlines()[0]


def unserialisable(text: str) -> None:
    """Pattern 2: the argument, the attribute that holds the lock, and the call site, in the verdict."""
    v = verdict(text)
    assert "FeatureStoreClient" in v and "featurize" in v and "main.py:19" in v, text
    assert '"_session_lock"' in v and "_thread.lock" in v and "cannot be serialised" in v, text


def missing_file(text: str) -> None:
    """Pattern 2: a file the task cannot find, left out by the runtime_env's excludes, with what was uploaded."""
    v = verdict(text)
    assert "load_shard (main.py:6)" in v and "data/train.csv" in v, text
    assert 'runtime_env excludes "data/" left it out' in v, text
    assert "uploaded: working_dir" in first(text, 1200) and "_ray_pkg_" in first(text, 1200), text


def read_only(text: str) -> None:
    """Pattern 3: a numpy array written in place, read-only because Ray handed it over zero-copy."""
    v = verdict(text)
    assert "normalise (main.py:7)" in v and "read-only" in v, text
    assert "zero-copy" in first(text, 1200) and "copy()" in first(text, 1200), text


def nested_refs(text: str) -> None:
    """Pattern 3: ObjectRefs inside a list arrive as refs: Ray resolves only top-level arguments."""
    v = verdict(text)
    assert "total (main.py:11)" in v and "ObjectRef" in v, text
    assert "top-level arguments" in first(text, 1200) and "ray.get" in first(text, 1200), text


def wrong_address(text: str) -> None:
    """Pattern 6: the driver never reached the cluster: the address it tried and this cluster's."""
    v = verdict(text)
    assert "never reached this cluster" in v and "10.11.12.13:6379" in first(text, 300), text
    assert "this cluster's GCS is at" in first(text, 1200) or "none of this cluster's nodes" in first(
        text, 1200
    )


def async_blocking(text: str) -> None:
    """Pattern 4: the blocking get in an async actor, with Ray's warning; the starved call is not running."""
    v = verdict(text)
    assert "Gateway" in v and "blocks its own async event loop" in v, text
    head = first(text, 1200)
    assert "Gateway.refresh" in head and "fetch_weights" in head and "Gateway.health" in head, text
    assert "starved, not running" in head and "Using blocking ray.get inside async actor" in head, text


def pg_self_deadlock(text: str) -> None:
    """Pattern 5: work captured into a group that its own actor holds is a self-deadlock, not infeasible."""
    v = verdict(text)
    assert "self-deadlock" in v and "coord-gang" in first(text, 300) and "shard" in first(text, 300), text
    assert "Coordinator" in first(text, 1200) and "infeasible" not in first(text, 300), text


def train_failure(text: str) -> None:
    """Pattern 7: the user's exception Train recorded leads; the framework's actors it tore down do not."""
    v = verdict(text)
    assert "ValueError" in v and "NaN loss" in v and "main.py:14 in train_loop" in v, text
    assert "Ray Train failed on the user's exception it recorded from worker rank 1" in v, text
    assert "RayTrainWorker" not in first(text, 300) and "TrainController" not in first(text, 300), text


def peer_wait(text: str) -> None:
    """Pattern 4: a hang traced to what its blocking call waits for (a peer to connect to its socket)."""
    v = verdict(text)
    assert "receive_weights" in v and "accept" in v and "a peer to connect" in v, text


def owner_job(text: str) -> None:
    """Pattern 1: an actor another job created, dead with its owner: that job's driver, how and when it ended."""
    v, head = verdict(text), first(text, 1200)
    # Either its calls failed once it died, or (when the creator ended first) the lookup of its name did.
    assert ("FeatureCache" in v or "feature_cache" in v) and "owner" in v, text
    assert "owner, the driver of another job, job" in head, text
    assert "SUCCEEDED at" in head and 'lifetime="detached"' in head, text


def store_holder(text: str) -> None:
    """Pattern 7: a store one actor's references fill leads, with its holder and call site, before the Learner
    that waits for CPU."""
    v, head = verdict(text), first(text, 1200)
    assert "object store is near full" in v and "ReplayBuffer" in v, text
    assert "main.py:fill" in head and "Learner" not in first(text, 300), text


FOLLOW: dict[str, Callable[[str], None]] = {
    "follow_unserialisable": unserialisable,
    "follow_missing_file": missing_file,
    "follow_read_only": read_only,
    "follow_nested_refs": nested_refs,
    "follow_wrong_address": wrong_address,
    "follow_async_blocking": async_blocking,
    "follow_pg_self_deadlock": pg_self_deadlock,
    "follow_train_failure": train_failure,
    "follow_peer_wait": peer_wait,
    "follow_owner_job": owner_job,
    "follow_store_holder": store_holder,
}
