"""Newline framing over partial reads, oversized lines and end of stream."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from actors.framing.lines import LineStream
from actors.protocol.errors import MessageTooLargeError


async def lines_from(data: bytes, max_bytes: int = 64) -> list[bytes | str]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    stream = LineStream(receive, trio.testing.MemorySendStream(), max_bytes)
    got: list[bytes | str] = []
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            for i in range(len(data)):  # one byte per write: every line arrives in pieces
                await send.send_all(data[i : i + 1])
            await send.aclose()

        nursery.start_soon(feed)
        while True:
            try:
                line = await stream.receive()
            except MessageTooLargeError as exc:
                got.append(f"too large: {exc.size}")
                continue
            if line is None:
                return got
            got.append(line)


async def test_lines_arrive_whole_and_empty_lines_are_skipped() -> None:
    assert await lines_from(b'{"a":1}\n\n  \r\n{"b":2}\r\n{"c":3}') == [b'{"a":1}', b'{"b":2}', b'{"c":3}']


async def test_oversized_line_is_skipped_and_reported_then_reading_goes_on() -> None:
    got = await lines_from(b"x" * 200 + b"\nok\n" + b"y" * 70 + b"\n", max_bytes=64)
    assert got[1] == b"ok"
    assert isinstance(got[0], str) and got[0].startswith("too large")
    assert isinstance(got[2], str) and got[2].startswith("too large")
    assert len(got) == 3


async def test_send_appends_one_newline_per_frame() -> None:
    sink = trio.testing.MemorySendStream()
    stream = LineStream(trio.testing.MemoryReceiveStream(), sink, 64)
    await stream.send(b"{}")
    await stream.send(b"[]")
    assert await sink.get_data() == b"{}\n[]\n"


@pytest.mark.parametrize("tail", [b"", b"\n"])
async def test_end_of_stream_ends_cleanly(tail: bytes) -> None:
    assert await lines_from(b"one\n" + tail) == [b"one"]


async def test_an_oversized_line_reports_the_id_read_from_its_ends() -> None:
    big = b'{"jsonrpc":"2.0","id":41,"result":{"text":"' + b"x" * 300 + b'"}}\n'
    late = b'{"result":{"text":"' + b"y" * 300 + b'"},"jsonrpc":"2.0","id":"late"}\n'
    ids = []
    send, receive = trio.testing.memory_stream_one_way_pair()
    stream = LineStream(receive, trio.testing.MemorySendStream(), 64)
    await send.send_all(big + late)
    await send.aclose()
    for _ in range(2):
        with pytest.raises(MessageTooLargeError) as caught:
            await stream.receive()
        ids.append(caught.value.request_id)
    assert ids == [41, "late"]
    assert await stream.receive() is None
