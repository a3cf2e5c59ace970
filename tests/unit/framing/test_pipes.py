"""PipeStream.send_whole_nowait: a small frame goes into a pipe whole or not at all, and never anywhere else
without waiting; LineStream.send_nowait never overtakes a send under way."""

from __future__ import annotations

import os
import select
import socket

import trio
import trio.testing

from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream


def _pipe() -> tuple[int, PipeStream]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    return read_end, PipeStream(trio.lowlevel.FdStream(write_end))


def _fill(read_end: int, stream: PipeStream, room: int) -> int:
    """Fill the pipe, then read back `room` bytes; returns how many bytes it holds."""
    fd, held = stream._pipe.fileno(), 0
    while True:
        try:
            held += os.write(fd, b"x" * 65536)
        except BlockingIOError:
            break
    return held - len(os.read(read_end, room))


def _drain(read_end: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(read_end, 1 << 20)
        except BlockingIOError:
            return data
        data += chunk


async def test_a_small_frame_goes_whole_into_a_pipe_with_room() -> None:
    read_end, stream = _pipe()
    assert stream.send_whole_nowait(b'{"id":1}\n')
    assert stream.send_whole_nowait(b"y" * select.PIPE_BUF)  # the largest atomic write
    assert _drain(read_end) == b'{"id":1}\n' + b"y" * select.PIPE_BUF
    await stream.aclose()
    os.close(read_end)


async def test_nothing_is_written_past_pipe_buf_or_into_a_full_pipe() -> None:
    read_end, stream = _pipe()
    assert not stream.send_whole_nowait(b"y" * (select.PIPE_BUF + 1))  # could be cut: never tried
    assert _drain(read_end) == b""
    held = _fill(read_end, stream, room=100)  # room for 100 bytes, not for the frame
    assert not stream.send_whole_nowait(b"z" * 1000)
    assert _drain(read_end) == b"x" * held  # not one byte of the frame went in
    await stream.aclose()
    assert not stream.send_whole_nowait(b"after close")  # closed: False, and send_all says why
    os.close(read_end)


async def test_a_socket_is_never_written_without_waiting() -> None:
    ours, theirs = socket.socketpair()  # what a Node client's stdio is: no atomic-write promise
    stream = PipeStream(trio.lowlevel.FdStream(os.dup(ours.fileno())))
    assert not stream.send_whole_nowait(b'{"id":1}\n')
    theirs.setblocking(False)
    try:
        theirs.recv(100)
        raise AssertionError("nothing should have been written")
    except BlockingIOError:
        pass
    await stream.aclose()
    ours.close()
    theirs.close()


async def test_line_stream_does_not_write_beside_a_send_under_way() -> None:
    read_end, pipe = _pipe()
    lines = LineStream(trio.testing.MemoryReceiveStream(), pipe, 1 << 20)
    assert lines.send_nowait([b'{"id":1}', b'{"id":2}'])
    assert _drain(read_end) == b'{"id":1}\n{"id":2}\n'
    _fill(read_end, pipe, room=0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lines.send_many, [b'{"id":3}'])  # waits for room, holding the send
        await trio.testing.wait_all_tasks_blocked()
        _drain(read_end)  # room now, but the first send has not finished its frame
        assert not lines.send_nowait([b'{"id":4}'])
    assert _drain(read_end).endswith(b'{"id":3}\n')
    await pipe.aclose()
    os.close(read_end)


async def test_the_descriptor_a_pipe_stream_reads_is_its_fd_streams_even_once_closed() -> None:
    read_end, stream = _pipe()
    assert stream._fd.fd == stream._pipe.fileno() >= 0
    await stream.aclose()
    assert stream._fd.fd == stream._pipe.fileno() == -1
    os.close(read_end)
