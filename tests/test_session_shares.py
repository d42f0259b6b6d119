"""HTTP sessions and fair shares on ray-mcp's real HTTP stack (uvicorn, the session shares, the SDK's streamable
HTTP app), served in this process: no Ray head is needed (nothing here reads a cluster).

* A session that made no request after its initialize (its handshake finished or not) is closed after a short
  grace, not the 30-minute idle timeout; a session that made one stays.
* A client at its share that opens another session gets it in place of its own longest-idle one; another
  client is untouched.
* The share is keyed on what a client cannot forge: its peer address. X-Forwarded-For counts only from a proxy
  the operator names, and a made-up Authorization header (no token configured) names nobody.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from tests.support import serve_ray_mcp_http, serving_ray_mcp_http

from ray_mcp import sdk_private
from ray_mcp.settings import Settings

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
ids = itertools.count(2)


def settings(**overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "address": "http://127.0.0.1:9",
        "transport": "streamable-http",
        "host": "127.0.0.1",
        "max_sessions_per_client": 2,
        "session_unused_timeout_s": 600.0,
    }
    return Settings(**{**base, **overrides})


@pytest.fixture
def serve() -> Iterator[Any]:
    def start(**overrides: Any) -> Any:
        return serve_ray_mcp_http(settings(**overrides), gcs_lookup=None)

    yield start


def peer(address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address), timeout=30)


async def open_session(http: httpx.AsyncClient, url: str, *, handshake: bool = True, **headers: str) -> str:
    opened = await http.post(url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    if handshake:
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(url, json=done, headers=in_session(session))).status_code == 202
    return session


def in_session(session: str) -> dict[str, str]:
    return {**MCP_HEADERS, "mcp-session-id": session}


async def request(http: httpx.AsyncClient, url: str, session: str) -> int:
    """A request in the session (tools/list): 200 while it is open, 404 once it is closed."""
    body = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/list"}
    return (await http.post(url, json=body, headers=in_session(session))).status_code


async def is_open(http: httpx.AsyncClient, url: str, session: str) -> bool:
    """Without using it: a DELETE would close it, a request would use it; a GET of its stream with a bad
    Accept is answered 406 while it is open and 404 once closed."""
    answer = await http.get(url, headers={"mcp-session-id": session, "accept": "text/html"})
    assert answer.status_code in (404, 406), answer.status_code
    return answer.status_code != 404


async def test_sessions_that_made_no_request_are_closed_after_the_grace_and_used_ones_stay(
    serve: Any,
) -> None:
    with serve(session_unused_timeout_s=1.0, max_sessions_per_client=8) as url:
        async with peer("127.0.0.1") as http:
            bare = await open_session(http, url, handshake=False)
            handshaken = await open_session(http, url)  # initialize and notifications/initialized, no request
            used = await open_session(http, url)
            assert await request(http, url, used) == 200
            with anyio.fail_after(60):
                while await is_open(http, url, bare) or await is_open(http, url, handshaken):
                    await anyio.sleep(0.2)
            assert await request(http, url, used) == 200  # the same grace passed for it: still open


async def test_an_unused_session_is_closed_after_its_grace_even_when_no_other_request_comes() -> None:
    """The grace is kept by a timer, not only by the next request: here no request follows the initialize,
    and the session manager's own table is watched directly."""
    with serving_ray_mcp_http(settings(session_unused_timeout_s=1.0), gcs_lookup=None) as (url, server):
        async with peer("127.0.0.1") as http:
            bare = await open_session(http, url, handshake=False)
            table = sdk_private.open_sessions(server.session_manager)
            assert bare in table
            with anyio.fail_after(30):
                while bare in table:
                    await anyio.sleep(0.2)


async def test_a_client_at_its_share_gives_up_its_longest_idle_session_and_others_keep_theirs(
    serve: Any,
) -> None:
    with serve() as url:
        async with peer("127.0.0.1") as http, peer("127.0.0.2") as other:
            theirs = await open_session(other, url)
            assert await request(other, url, theirs) == 200
            first = await open_session(http, url)
            second = await open_session(http, url)
            assert await request(http, url, first) == 200  # second is now the longest idle
            third = await open_session(http, url)  # at its share: second makes room
            assert not await is_open(http, url, second)
            assert await request(http, url, first) == 200 and await request(http, url, third) == 200
            assert await request(other, url, theirs) == 200  # another client's session is never touched


async def test_forwarding_and_authorization_headers_do_not_make_a_new_client(serve: Any) -> None:
    with serve() as url:
        async with peer("127.0.0.1") as http:
            sessions = []
            for n in range(3):  # each claims another client; all come from one peer, which holds two at most
                forged = {"x-forwarded-for": f"10.9.8.{n}", "authorization": f"Bearer made-up-{n}"}
                sessions.append(await open_session(http, url, **forged))
            assert [await is_open(http, url, s) for s in sessions] == [False, True, True]


async def test_x_forwarded_for_counts_from_a_proxy_the_operator_names(serve: Any) -> None:
    with serve(trusted_proxies=["127.0.0.1"]) as url:
        async with peer("127.0.0.1") as proxy:
            sessions = [
                await open_session(proxy, url, **{"x-forwarded-for": f"10.9.8.{n}"}) for n in range(3)
            ]
            assert [await is_open(proxy, url, s) for s in sessions] == [True, True, True]  # three clients
