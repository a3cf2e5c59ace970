"""Clients that never end their Streamable HTTP sessions (issue #24): at its share a client's least recently
active idle session is ended to make room; only when all are busy is a new one refused, with Retry-After
and a JSON-RPC error naming the initialize. Loopback aliases are one client; with tokens, each principal
is. Raw HTTP against a gateway running in this process with a real backend process behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, aclosing, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Final

import httpx2
import jwt
import orjson
import pytest
import trio
from loguru import logger
from support import DEADLINE_S, backend_entry, running, with_http, with_websocket, write_config
from test_http import (
    ACCEPT_BOTH,
    call,
    hang_up_after_first_event,
    initialize,
    open_session,
    sse_events,
)
from trio_websocket import ConnectionRejected, open_websocket_url, wrap_client_stream

from actors.frontends.admission import RETRY_AFTER_S
from actors.gateway import Gateway

SECRET: Final = "a-test-secret-of-at-least-32-bytes-long"
PER_CLIENT: Final = 32  # the default max_sessions_per_client


def config(tmp_path: Path, **http: Any) -> Path:
    return with_http(write_config(tmp_path / "g.toml", [backend_entry("t", "--only=echo,progress")]), **http)


async def ping(http: httpx2.AsyncClient, url: str, session_id: str, **headers: str) -> int:
    """A ping in the session: its HTTP status (404 once the session was ended)."""
    message = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
    answer = await http.post(
        url, json=message, headers={**ACCEPT_BOTH, **headers, "mcp-session-id": session_id}
    )
    return answer.status_code


@contextmanager
def made_room() -> Iterator[list[str]]:
    """The sessions (by label) the gateway ended to make room meanwhile, with the limit it names."""
    ended: list[str] = []

    def sink(message: Any) -> None:
        if "to make room" in message.record["message"]:
            ended.append(f"{message.record['extra'].get('session')}: {message.record['message']}")

    handle = logger.add(sink, level="INFO")
    try:
        yield ended
    finally:
        logger.remove(handle)


async def until_at_rest(gateway: Gateway, count: int) -> None:
    """Until `count` sessions have no HTTP request open: the gateway has seen the client close them."""
    assert gateway.http_listener is not None
    with trio.fail_after(DEADLINE_S):
        while len(gateway.http_listener._sessions._resting) < count:  # noqa: ASYNC110 (no event to wait on)
            await trio.sleep(0.01)


@asynccontextmanager
async def get_stream(
    http: httpx2.AsyncClient, url: str, session_id: str, **extra: str
) -> AsyncIterator[None]:
    """The session's standalone SSE stream, open (the gateway has answered it) until the block ends."""
    headers = {**extra, "accept": "text/event-stream", "mcp-session-id": session_id}
    async with http.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        yield


@asynccontextmanager
async def call_in_flight(http: httpx2.AsyncClient, url: str, session_id: str) -> AsyncIterator[None]:
    """A slow call in the session, in flight (its first progress has come) until the block ends."""
    headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
    body = orjson.dumps(call(2, "progress", {"steps": 2, "delay": 600}, token="slow"))
    async with (
        http.stream("POST", url, content=body, headers=headers) as response,
        aclosing(sse_events(response)) as events,
    ):
        async for event in events:
            if event["data"]:
                break
        yield


async def test_a_client_at_its_share_ends_its_least_recently_active_idle_session_to_make_room(
    tmp_path: Path,
) -> None:
    async with running(config(tmp_path)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        ids = [await open_session(http, url) for _ in range(PER_CLIENT)]  # none is ever DELETEd
        assert await ping(http, url, ids[0]) == 200  # the first is used again: the second is now the oldest
        with made_room() as ended:
            newest = await open_session(http, url)
        assert await ping(http, url, ids[1]) == 404  # ended to make room: its client initializes again
        assert [await ping(http, url, i) for i in (ids[0], *ids[2:], newest)] == [200] * PER_CLIENT
        assert len(ended) == 1 and ended[0].startswith("http-2: ") and "max_sessions_per_client" in ended[0]


async def test_when_every_session_of_a_client_is_busy_a_new_one_gets_429_with_retry_after(
    tmp_path: Path,
) -> None:
    async with running(config(tmp_path)) as gateway, httpx2.AsyncClient() as http, AsyncExitStack() as busy:
        url = gateway.http_url
        assert url is not None
        ids = [await open_session(http, url) for _ in range(PER_CLIENT)]
        with trio.fail_after(DEADLINE_S):
            await busy.enter_async_context(call_in_flight(http, url, ids[0]))
            streams = AsyncExitStack()
            await busy.enter_async_context(streams)
            for session_id in ids[1:]:
                await streams.enter_async_context(get_stream(http, url, session_id))
        refused = await http.post(url, json=initialize(7), headers=ACCEPT_BOTH)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == str(RETRY_AFTER_S)
        error = refused.json()
        assert error["id"] == 7 and error["error"]["code"] == -32000
        assert "max_sessions_per_client" in error["error"]["message"]
        assert "mcp-session-id" not in refused.headers
        assert [await ping(http, url, i) for i in ids] == [200] * PER_CLIENT  # nobody was ended
        await streams.aclose()  # the GET streams end: those sessions are idle again
        await until_at_rest(gateway, PER_CLIENT - 1)
        assert await open_session(http, url)
        assert await ping(http, url, ids[0]) == 200  # the call in flight kept its session
        statuses = [await ping(http, url, i) for i in ids[1:]]
        assert sorted(statuses) == [200] * (PER_CLIENT - 2) + [404]  # one idle one made room


async def test_a_session_whose_dropped_stream_may_still_be_resumed_is_not_ended_to_make_room(
    tmp_path: Path,
) -> None:
    async with (
        running(config(tmp_path, max_sessions_per_client=1, resume_window_s=600)) as gateway,
        httpx2.AsyncClient() as http,
    ):
        url = gateway.http_url
        assert url is not None
        slow = call(2, "progress", {"steps": 2, "delay": 600}, token="slow")
        headers, _ = await hang_up_after_first_event(http, url, slow)
        await until_at_rest(gateway, 1)  # no HTTP request open, but its call is still in flight
        refused = await http.post(url, json=initialize(4), headers=ACCEPT_BOTH)
        assert refused.status_code == 429 and refused.json()["id"] == 4
        assert await ping(http, url, headers["mcp-session-id"]) == 200


async def test_a_full_listener_ends_the_least_recently_active_idle_session_of_any_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAP_TEST_SECRET", SECRET)
    auth = {"jwt_secret_env": "CAP_TEST_SECRET"}
    alice, bob = (jwt.encode({"sub": name}, SECRET, algorithm="HS256") for name in ("alice", "bob"))
    as_alice, as_bob = {"authorization": f"Bearer {alice}"}, {"authorization": f"Bearer {bob}"}
    async with running(config(tmp_path, auth=auth, max_sessions=2)) as gateway, httpx2.AsyncClient() as http:
        url = gateway.http_url
        assert url is not None
        first, second = await open_session(http, url, **as_alice), await open_session(http, url, **as_alice)
        with made_room() as ended:
            bobs = await open_session(http, url, **as_bob)
        assert await ping(http, url, first, **as_alice) == 404
        assert await ping(http, url, second, **as_alice) == await ping(http, url, bobs, **as_bob) == 200
        assert len(ended) == 1 and ended[0].startswith("http-1: ") and "max_sessions = 2" in ended[0]
        async with get_stream(http, url, second, **as_alice), get_stream(http, url, bobs, **as_bob):
            full = await http.post(url, json=initialize(8), headers={**ACCEPT_BOTH, **as_alice})
        assert full.status_code == 503 and full.headers["retry-after"] == str(RETRY_AFTER_S)
        assert full.json()["id"] == 8


async def test_with_tokens_each_subject_from_one_address_has_its_own_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAP_TEST_SECRET", SECRET)
    auth = {"jwt_secret_env": "CAP_TEST_SECRET"}
    alice, bob = (jwt.encode({"sub": name}, SECRET, algorithm="HS256") for name in ("alice", "bob"))
    as_alice, as_bob = {"authorization": f"Bearer {alice}"}, {"authorization": f"Bearer {bob}"}
    async with (
        running(config(tmp_path, auth=auth, max_sessions_per_client=1)) as gateway,
        httpx2.AsyncClient() as http,
    ):
        url = gateway.http_url
        assert url is not None
        alices = await open_session(http, url, **as_alice)
        bobs = await open_session(http, url, **as_bob)  # bob's share: alice's session stays
        assert await ping(http, url, alices, **as_alice) == await ping(http, url, bobs, **as_bob) == 200
        again = await open_session(http, url, **as_alice)  # alice's share: her own idle session makes room
        assert await ping(http, url, alices, **as_alice) == 404
        assert await ping(http, url, again, **as_alice) == await ping(http, url, bobs, **as_bob) == 200


async def test_a_loopback_alias_counts_as_the_same_client(tmp_path: Path) -> None:
    async with (
        running(config(tmp_path, host="0.0.0.0", max_sessions_per_client=1)) as gateway,
        httpx2.AsyncClient() as local,
        httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address="127.0.0.2")) as alias,
    ):
        assert gateway.http_url is not None
        url = gateway.http_url.replace("0.0.0.0", "127.0.0.1")
        first = await open_session(local, url)
        async with get_stream(local, url, first):
            refused = await alias.post(url, json=initialize(3), headers=ACCEPT_BOTH)
            assert refused.status_code == 429 and refused.json()["id"] == 3
        await until_at_rest(gateway, 1)
        second = await open_session(alias, url)  # the first is idle now: it makes room
        assert await ping(local, url, first) == 404
        assert await ping(alias, url, second) == 200


async def test_a_websocket_from_a_loopback_alias_counts_as_the_same_client(tmp_path: Path) -> None:
    """The WebSocket listener keys its share the same way; a connection is always busy, so it is refused."""
    both = with_websocket(config(tmp_path), host="0.0.0.0", max_sessions_per_client=1)
    async with running(both) as gateway:
        assert gateway.websocket_url is not None
        url = gateway.websocket_url.replace("0.0.0.0", "127.0.0.1")
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        retry_after = (b"retry-after", str(RETRY_AFTER_S).encode())
        async with open_websocket_url(url):
            with trio.socket.socket() as sock:  # a connection from 127.0.0.2
                await sock.bind(("127.0.0.2", 0))
                await sock.connect(("127.0.0.1", port))
                # the library raises the refusal in its reader task, in the nursery it is given
                with pytest.RaisesGroup(
                    pytest.RaisesExc(
                        ConnectionRejected,
                        check=lambda rejected: (
                            rejected.status_code == 429 and retry_after in rejected.headers
                        ),
                    )
                ):
                    async with trio.open_nursery() as nursery:
                        await wrap_client_stream(nursery, trio.SocketStream(sock), "127.0.0.1", "/mcp")
