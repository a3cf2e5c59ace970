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


def _reading_pipe() -> tuple[PipeStream, int]:
    """A PipeStream over a pipe's read end, and the write end."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    return PipeStream(trio.lowlevel.FdStream(read_end)), write_end


async def test_a_read_after_one_that_emptied_the_pipe_waits_before_trying_the_pipe(monkeypatch) -> None:
    stream, write_end = _reading_pipe()
    os.write(write_end, b"a\n")
    assert await stream.receive_some() == b"a\n"  # fewer bytes than asked for: the pipe is empty now
    reads: list[int] = []
    real_read = os.read

    def counted_read(fd: int, size: int) -> bytes:
        reads.append(fd)
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", counted_read)
    async with trio.open_nursery() as nursery:
        received: list[bytes] = []

        async def receive() -> None:
            received.append(await stream.receive_some())

        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        assert reads == []  # waiting for the pipe, not a read that finds it empty
        os.write(write_end, b"b\n")
    assert received == [b"b\n"]
    assert len(reads) == 1
    await stream.aclose()
    os.close(write_end)


async def test_a_read_that_filled_its_buffer_reads_again_at_once() -> None:
    stream, write_end = _reading_pipe()
    os.write(write_end, b"x" * 10)
    assert await stream.receive_some(4) == b"xxxx"  # as many as asked for: more may be there
    assert await stream.receive_some(4) == b"xxxx"
    assert await stream.receive_some(4) == b"xx"
    os.close(write_end)
    assert await stream.receive_some(4) == b""  # the end of the stream, after the wait
    await stream.aclose()


async def test_closing_a_pipe_wakes_its_reader_waiting_after_it_emptied_the_pipe() -> None:
    stream, write_end = _reading_pipe()
    os.write(write_end, b"a\n")
    assert await stream.receive_some() == b"a\n"
    outcomes: list[bool] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_record_closed_read, stream, outcomes)
        await trio.testing.wait_all_tasks_blocked()
        await stream.aclose()
    assert outcomes == [True]  # the waiting reader was told the pipe was closed
    await _record_closed_read(stream, outcomes)
    assert outcomes == [True, True]  # and so is a read after that
    os.close(write_end)


async def _record_closed_read(stream: PipeStream, outcomes: list[bool]) -> None:
    try:
        await stream.receive_some()
    except trio.ClosedResourceError:
        outcomes.append(True)
        return
    outcomes.append(False)
