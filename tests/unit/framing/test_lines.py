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


async def lines_read_whole(chunks: list[bytes], max_bytes: int = 64) -> list[bytes | str]:
    """Each chunk arrives in a read of its own (a stream that hands over what each send wrote)."""
    send, receive = trio.open_memory_channel[bytes](len(chunks) + 1)

    class Chunks(trio.abc.ReceiveStream):
        async def receive_some(self, max_bytes: int | None = None) -> bytes:
            try:
                return await receive.receive()
            except trio.EndOfChannel:
                return b""

        async def aclose(self) -> None:
            receive.close()

    for chunk in chunks:
        send.send_nowait(chunk)
    send.close()
    stream = LineStream(Chunks(), trio.testing.MemorySendStream(), max_bytes)
    got: list[bytes | str] = []
    while True:
        try:
            line = await stream.receive()
        except MessageTooLargeError as exc:
            got.append(f"too large: {exc.size}, id {exc.request_id}")
            continue
        if line is None:
            return got
        got.append(line)


async def test_a_line_read_alone_is_taken_as_a_line_split_over_reads_is() -> None:
    big = b'{"jsonrpc":"2.0","id":7,"result":"' + b"x" * 80 + b'"}\n'
    chunks = [b'{"a":1}\n', b"\r\n", b"  \n", b'{"b":2}\r\n', big, b'{"c":', b"3}\n", b'{"d":4}\n']
    assert await lines_read_whole(chunks) == [
        b'{"a":1}',
        b'{"b":2}',
        f"too large: {len(big) - 1}, id 7",
        b'{"c":3}',
        b'{"d":4}',
    ]
    whole = [line for line in await lines_from(b"".join(chunks), max_bytes=200)]  # the same, byte by byte
    assert whole == [b'{"a":1}', b'{"b":2}', big[:-1], b'{"c":3}', b'{"d":4}']


async def test_a_whole_line_after_an_oversized_one_being_skipped_ends_the_skip() -> None:
    chunks = [b"x" * 100, b"y" * 10 + b"\n", b'{"ok":1}\n']
    assert await lines_read_whole(chunks) == ["too large: 110, id None", b'{"ok":1}']
