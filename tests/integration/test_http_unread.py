"""A Streamable HTTP client that leaves its answers unread (issue #34, point 4): they count against
[gateway] max_unread_bytes until they are written to its HTTP streams, as on WebSocket, so past it the
session ends (and what its POSTs held goes: their connections are cut); and a session has at most
[http] max_streams_per_session requests open. Raw sockets for the client that does not read, the official
SDK client for the one that does; the gateway in this process with a real backend process behind it."""

from __future__ import annotations

import operator
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path
from typing import Any, Final

import attrs
import httpx2
import orjson
import trio
from loguru import logger
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import DEADLINE_S, LEGACY_ERA, backend_entry, running, with_http, write_config
from test_http import ACCEPT_BOTH, call, open_session, sse_events

ANSWER_BYTES: Final = 1_500_000  # far past what a connection whose client reads nothing buffers
BUDGET: Final = 2 * 1024 * 1024  # max_unread_bytes (and max_message_bytes: the answers must fit a frame)
POSTS: Final = 12  # 18 MB of answers: nine times the budget


@attrs.define
class UnreadPost:
    """A POST asking for a big answer, on a connection whose client reads almost nothing of it (a small
    receive window, so the answer cannot all go into the kernel's buffers)."""

    stream: trio.SocketStream
    received: bytes = b""

    @classmethod
    async def send(cls, url: str, session_id: str, request_id: int) -> UnreadPost:
        host, port = url.split("//")[1].split("/")[0].rsplit(":", 1)
        sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        await sock.connect((host, int(port)))
        body = orjson.dumps(call(request_id, "big_response", {"bytes": ANSWER_BYTES}))
        head = (
            f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-session-id: {session_id}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        )
        post = cls(trio.SocketStream(sock))
        await post.stream.send_all(head.encode() + body)
        return post

    async def read_head(self) -> None:
        """Until the answer's head has come (it is being written: the rest waits, unread)."""
        await self._read_until(lambda: b"\r\n\r\n" in self.received)

    async def read_answer(self) -> tuple[int, bool]:
        """The rest, until the answer (chunked: no Content-Length) is whole or the gateway closed the
        connection: its status and whether it is whole; (0, False) when the connection was reset."""
        try:
            await self._read_until(lambda: self.received.endswith(b"\r\n0\r\n\r\n"))
        except trio.BrokenResourceError:  # reset: the gateway closed with our request's rest unread
            return 0, False
        status = int(self.received.split(maxsplit=2)[1]) if self.received else 0
        return status, self.received.endswith(b"\r\n0\r\n\r\n")

    async def _read_until(self, done: Callable[[], bool]) -> None:
        while not done() and (chunk := await self.stream.receive_some(1 << 20)):
            self.received += chunk


async def test_an_http_client_that_reads_none_of_its_answers_is_dropped_and_another_is_served(
    tmp_path: Path,
) -> None:
    backends = [backend_entry("t", "--only=big_response,echo")]
    config = with_http(
        write_config(tmp_path / "g.toml", backends, max_message_bytes=BUDGET, max_unread_bytes=BUDGET),
        max_message_bytes=BUDGET,
    )
    ended, lines = trio.Event(), []

    def note(message: object) -> None:
        lines.append(str(message))
        if "answers unread" in str(message):
            ended.set()

    posts: list[UnreadPost] = []
    sink = logger.add(note, level="WARNING", format="{message}")
    try:
        async with running(config) as gateway, httpx2.AsyncClient() as http:
            url = gateway.http_url
            assert url is not None
            session_id = await open_session(http, url)
            try:
                with trio.fail_after(DEADLINE_S):
                    while not ended.is_set():  # one at a time: no burst of answers queued at once
                        assert len(posts) < POSTS, "the session went on past max_unread_bytes"
                        posts.append(await UnreadPost.send(url, session_id, len(posts)))
                        await posts[-1].read_head()
                    answers = [await post.read_answer() for post in posts]  # what it had: cut, or told
            finally:
                for post in posts:  # (before the gateway stops: a write it is blocked in ends too)
                    await post.stream.aclose()
            (line,) = [line for line in lines if "answers unread" in line]
            assert f"max_unread_bytes {BUDGET}" in line
            assert len(posts) <= 3  # the third answer at the latest: 4.5 MB, past the budget
            cut = [status in (0, 200) and not whole for status, whole in answers]  # while it was written
            told = [status == 404 and whole for status, whole in answers]  # before: the session has ended
            assert cut[0] and all(map(operator.or_, cut, told)), answers
            ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
            gone = await http.post(url, json=ping, headers={**ACCEPT_BOTH, "mcp-session-id": session_id})
            assert gone.status_code == 404
            async with (
                httpx2.AsyncClient() as other,
                Client(streamable_http_client(url, http_client=other), mode=LEGACY_ERA) as client,
            ):
                answer = await client.call_tool("echo", {"text": "on"})
                assert answer.structured_content == {"text": "on"}
    finally:
        logger.remove(sink)


@asynccontextmanager
async def call_in_flight(
    http: httpx2.AsyncClient, url: str, session_id: str, request_id: int
) -> AsyncIterator[None]:
    """A slow call in the session, in flight (its first progress has come) until the block ends."""
    headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
    body = orjson.dumps(call(request_id, "progress", {"steps": 2, "delay": 600}, token=f"p{request_id}"))
    async with (
        http.stream("POST", url, content=body, headers=headers) as response,
        aclosing(sse_events(response)) as events,
    ):
        async for event in events:
            if event["data"]:
                break
        yield


async def test_a_session_at_max_streams_per_session_gets_429_naming_the_request(tmp_path: Path) -> None:
    config = with_http(
        write_config(tmp_path / "g.toml", [backend_entry("t", "--only=progress,echo")]),
        max_streams_per_session=2,
    )
    async with running(config) as gateway, httpx2.AsyncClient() as http, AsyncExitStack() as busy:
        url = gateway.http_url
        assert url is not None
        session_id = await open_session(http, url)
        with trio.fail_after(DEADLINE_S):
            for request_id in (2, 3):
                await busy.enter_async_context(call_in_flight(http, url, session_id, request_id))
        headers = {**ACCEPT_BOTH, "mcp-session-id": session_id}
        refused = await http.post(url, json=call(4, "echo", {"text": "one too many"}), headers=headers)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
        error: dict[str, Any] = refused.json()
        assert error["id"] == 4 and "max_streams_per_session" in error["error"]["message"]
        other = await open_session(http, url)  # another session has its own
        served = await http.post(
            url, json=call(5, "echo", {"text": "mine"}), headers={**headers, "mcp-session-id": other}
        )
        assert served.status_code == 200 and served.json()["result"]["structuredContent"] == {"text": "mine"}
