"""SharedPollers (server/pollers.py) without a cluster: one poller per key however many subscribe at once, a
subscribe answered after the baseline round, the bounds per connection and in all, the notifications, and the
end of a poller (its last subscriber gone, the key ended or gone, a round that fails). The job and health feeds
are tested through MCP clients in test_live.py and test_health_watch.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ray_mcp.server.pollers import Polled, SharedPollers, Then


class Ticks:
    """A stand-in feed: ``t://<key>`` URIs, a state that counts its rounds, outcomes set by the test."""

    share_full = "This client already watches {watching} keys, its {per_session}."
    all_full: str | None = "Already watching {max_watched} keys."

    def __init__(self) -> None:
        self.polls: Counter[str] = Counter()
        self.outcome: dict[str, Polled] = {}
        self.failing: set[str] = set()

    def key_of(self, uri: str) -> str:
        if not uri.startswith("t://"):
            raise MCPError(INVALID_PARAMS, f"not a t:// URI: {uri}")
        return uri.removeprefix("t://").partition("?")[0]

    def label(self, key: str) -> str:
        return f"tick {key}"

    async def admit(self, key: str) -> None:
        if key == "missing":
            raise MCPError(INVALID_PARAMS, "nothing to watch")

    def start(self, key: str) -> list[int]:
        return []

    async def poll(self, key: str, state: list[int]) -> Polled:
        self.polls[key] += 1
        await asyncio.sleep(0)  # a round yields, as a read does
        if key in self.failing:
            raise RuntimeError("a bug in a round")
        state.append(self.polls[key])
        return self.outcome.get(key, Polled())


def pollers(feed: Ticks, published: list[str], **bounds: int) -> SharedPollers[str, list[int]]:
    async def publish(uri: str) -> None:
        published.append(uri)

    return SharedPollers(
        feed, publish, poll_interval_s=0.01, per_session=bounds.pop("per_session", 3), **bounds
    )


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(20):
        while not condition():
            await anyio.sleep(0.01)


def tick_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("tick ") and not t.done()]


async def test_concurrent_subscribers_share_one_poller_answered_after_its_baseline_and_stopped_by_the_last() -> (
    None
):
    feed, published = Ticks(), []
    watchers = pollers(feed, published)
    try:
        await watchers.subscribe("t://solo", None, 1)
        assert feed.polls["solo"] >= 1  # answered once the baseline round is in, not before
        await watchers.unsubscribe("t://solo", None, 1)
        async with anyio.create_task_group() as tg:
            for owner in range(1, 11):
                tg.start_soon(watchers.subscribe, "t://a", None, owner)
        assert watchers.watched == {"a": 10}
        assert len(tick_tasks()) == 1  # one poll loop, however many subscribed at once
        watch = watchers.watch_of("a")
        assert (
            watch is not None and watch.rounds >= 1 and watch.state
        )  # the baseline was in before the answer
        for owner in range(1, 10):
            await watchers.unsubscribe("t://a", None, owner)
        assert watchers.watched == {"a": 1} and not watch.task.done()  # type: ignore[union-attr]
        await watchers.unsubscribe("t://a", None, 10)
        assert watchers.watched == {}
        await until(lambda: not tick_tasks())
    finally:
        await watchers.aclose()
    with pytest.raises(MCPError, match="not a t:// URI"):
        await watchers.subscribe("ray://jobs/x", None, 1)
    with pytest.raises(MCPError, match="nothing to watch"):
        await watchers.subscribe("t://missing", None, 1)
    assert watchers.watched == {}


async def test_a_client_watches_its_share_and_the_server_a_bounded_number() -> None:
    feed, published = Ticks(), []
    watchers = pollers(feed, published, per_session=2, max_watched=3)
    try:
        await watchers.subscribe("t://a", None, 1)
        await watchers.subscribe("t://b", None, 1)
        await watchers.subscribe("t://b?again", None, 1)  # a key it watches already: no new share
        with pytest.raises(MCPError, match="already watches 2 keys, its 2"):
            await watchers.subscribe("t://c", None, 1)
        await watchers.subscribe("t://c", None, 2)  # another client's share
        with pytest.raises(MCPError, match="Already watching 3 keys"):
            await watchers.subscribe("t://d", None, 2)
        await watchers.unsubscribe("t://a", None, 1)
        await watchers.unsubscribe("t://b", None, 1)  # one of its two streams on b: it still holds b
        await watchers.subscribe("t://d", None, 1)
        with pytest.raises(MCPError, match="already watches 2 keys"):
            await watchers.subscribe("t://e", None, 1)
        await watchers.unsubscribe("t://b?again", None, 1)
        await watchers.subscribe("t://e", None, 1)
        assert watchers.watched == {"c": 1, "d": 1, "e": 1}
    finally:
        await watchers.aclose()
    unbounded = Ticks()
    unbounded.all_full = None  # a feed with no refusal for a bound on the keys watched at once
    with pytest.raises(ValueError, match="all_full"):
        pollers(unbounded, published, max_watched=1)


async def test_a_change_notifies_each_uri_once_and_an_ended_or_gone_key_stops_its_poller() -> None:
    feed, published = Ticks(), []
    watchers = pollers(feed, published)
    try:
        await watchers.subscribe("t://a", None, 1)
        await watchers.subscribe("t://a", None, 2)
        await watchers.subscribe("t://a?other", None, 3)
        feed.outcome["a"] = Polled(changed=True, then=Then.END)
        watch = watchers.watch_of("a")
        assert watch is not None
        await until(lambda: watch.task is not None and watch.task.done())
        assert watch.notified == 1 and sorted(published) == ["t://a", "t://a?other"]
        assert watchers.watched == {"a": 3}  # ended: its subscribers stay, to read the end

        feed.outcome["b"] = Polled(then=Then.GONE)
        await watchers.subscribe("t://b", None, 4)
        await until(lambda: "b" not in watchers.watched)  # gone: dropped although subscribed
        for key in "xyz":  # and its share is free again
            await watchers.subscribe(f"t://{key}", None, 4)

        feed.failing.add("f")
        await watchers.subscribe("t://f", None, 5)  # a failing round still answers the subscribe
        failing = watchers.watch_of("f")
        assert failing is not None
        await until(lambda: feed.polls["f"] >= 3)  # and the next rounds still run
        assert failing.rounds == 0 and failing.task is not None and not failing.task.done()
    finally:
        await watchers.aclose()
    assert watchers.watched == {} and not tick_tasks()
