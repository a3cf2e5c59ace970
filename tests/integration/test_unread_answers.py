"""A client that leaves its answers unread (#25's budgets, for answers): a WebSocket client asks for big
answers and reads none of them. The gateway keeps what waits for it as frames, counted, and past
max_unread_bytes ends its session (close 1008) instead of holding them without bound; another client on its
own connection is served all the while. Real test backend, real WebSockets, the gateway in this process."""

from __future__ import annotations

from pathlib import Path

import trio
from loguru import logger
from support import DEADLINE_S, backend_entry, connect, running, with_websocket, write_config
from trio_websocket import ConnectionClosed

ANSWER_BYTES = 100_000  # each answer's text; 200 of them are 20 MB, far past what the socket buffers take


async def test_a_client_that_reads_none_of_its_answers_is_closed_and_another_is_served(
    tmp_path: Path,
) -> None:
    config = with_websocket(
        write_config(
            tmp_path / "g.toml",
            [backend_entry("alpha", "--only=big_response,echo")],
            max_message_bytes=262_144,
            max_unread_bytes=1_048_576,
        ),
        send_timeout_s=600,  # so only the unread answers can end the session here
    )
    ended, lines = trio.Event(), []

    def note(message: object) -> None:
        lines.append(str(message))
        if "answers unread" in str(message):
            ended.set()

    sink = logger.add(note, level="WARNING", format="{message}")
    try:
        async with running(config) as gateway:
            url = gateway.websocket_url
            assert url is not None
            with trio.fail_after(DEADLINE_S):
                async with connect(url) as greedy, connect(url) as other:
                    big = {"name": "big_response", "arguments": {"bytes": ANSWER_BYTES}}
                    try:
                        for n in range(200):
                            await greedy.request(n, "tools/call", big)
                    except ConnectionClosed:
                        pass  # ended while it was still asking
                    await ended.wait()  # it read nothing: its session ends
                    (line,) = [line for line in lines if "answers unread" in line]
                    assert "max_unread_bytes 1048576" in line
                    await other.request("e", "tools/call", {"name": "echo", "arguments": {"text": "on"}})
                    answer = await other.answer_to("e")
                    assert answer["result"]["structuredContent"] == {"text": "on"}
                    received = 0
                    try:
                        while True:  # what was written before the end, then the close
                            await greedy.connection.get_message()
                            received += 1
                    except ConnectionClosed as closed:
                        assert closed.reason.code in (1008, 1006)  # 1006: the TCP stream dropped first
                    assert received < 200
    finally:
        logger.remove(sink)
