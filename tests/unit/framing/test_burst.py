"""The burst (framing/burst.py): what the lines of one read send to a pipe goes out in one write when the
reading task next waits; a cork the pipe cannot take goes out ahead of anything sent later, and while it
waits nothing joins it."""

from __future__ import annotations

import os
import select
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from actors.framing.burst import BURST, close_burst
from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.protocol.messages import Message, Request
from actors.session.reader import Reader


class CountedPipe(PipeStream):
    """A real pipe's write end that counts its writes without waiting."""

    writes = 0

    def send_whole_nowait(self, data: bytes) -> bool:
        self.writes += 1
        return super().send_whole_nowait(data)


class Peers:
    """A stream read from (two lines arrive in one read: a burst) and a stream written to (`out`)."""

    def __init__(self, nursery: trio.Nursery, *, corked: bool = True) -> None:
        self.in_read, self.in_write = os.pipe()
        self.out_read, out_write = os.pipe()
        os.set_blocking(self.out_read, False)
        self.pipe = CountedPipe(trio.lowlevel.FdStream(out_write))
        self.incoming = LineStream(PipeStream(trio.lowlevel.FdStream(self.in_read)), self.pipe, 1 << 20)
        self.out = LineStream(PipeStream(trio.lowlevel.FdStream(os.dup(self.in_read))), self.pipe, 1 << 20)
        if corked:
            self.out.cork_with(nursery)

    def arrive(self, data: bytes) -> None:
        os.write(self.in_write, data)

    def written(self) -> bytes:
        data = b""
        while True:
            try:
                data += os.read(self.out_read, 1 << 20)
            except BlockingIOError:
                return data

    def fill(self) -> bytes:
        """Fill the out pipe to the last byte; what went in."""
        filler = b""
        for size in (65536, 4096, 256, 16, 1):
            while True:
                try:
                    filler += b"x" * os.write(self.pipe._fd.fd, b"x" * size)
                except BlockingIOError:
                    break
        return filler


@pytest.fixture
async def peers() -> AsyncIterator[Peers]:
    async with trio.open_nursery() as nursery:
        made = Peers(nursery)
        yield made
        close_burst()
        nursery.cancel_scope.cancel()
    os.close(made.in_write)
    os.close(made.out_read)


async def test_frames_sent_while_the_lines_of_one_read_are_handled_go_out_in_one_write(peers: Peers) -> None:
    peers.arrive(b'{"id":1}\n{"id":2}\n')
    assert await peers.incoming.receive() == b'{"id":1}'
    assert peers.out.send_nowait([b"a1"])
    assert await peers.incoming.receive() == b'{"id":2}'
    assert peers.out.send_nowait([b"a2"])
    assert peers.written() == b""  # held while the read's lines are handled
    with trio.move_on_after(0.05):  # the reader's next wait: the burst closes first
        await peers.incoming.receive()
    assert peers.written() == b"a1\na2\n"
    assert peers.pipe.writes == 1


async def test_a_line_read_alone_sends_at_once() -> None:
    async with trio.open_nursery() as nursery:
        peers = Peers(nursery)
        peers.arrive(b'{"id":1}\n')
        assert await peers.incoming.receive() == b'{"id":1}'
        assert peers.out.send_nowait([b"a1"])
        assert peers.written() == b"a1\n"  # no burst for one line: nothing to coalesce
        nursery.cancel_scope.cancel()


async def test_a_stream_without_a_spare_nursery_never_holds_frames() -> None:
    async with trio.open_nursery() as nursery:
        peers = Peers(nursery, corked=False)
        peers.arrive(b'{"id":1}\n{"id":2}\n')
        await peers.incoming.receive()
        assert peers.out.send_nowait([b"a1"])
        assert peers.written() == b"a1\n"
        close_burst()
        nursery.cancel_scope.cancel()


async def test_a_cork_the_full_pipe_cannot_take_goes_out_ahead_of_what_is_sent_later(peers: Peers) -> None:
    filler = peers.fill()
    peers.arrive(b'{"id":1}\n{"id":2}\n')
    await peers.incoming.receive()
    assert peers.out.send_nowait([b"a1"])
    assert peers.out.send_nowait([b"a2"])
    close_burst()  # the pipe is full: stuck, and a task waits for room to write it
    await trio.testing.wait_all_tasks_blocked()
    assert not peers.out.send_nowait([b"a3"])  # refused: the caller's slow path keeps the order and waits
    later = trio.Event()

    async def send_later() -> None:
        await peers.out.send_many([b"a4"])
        later.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_later)
        await trio.testing.wait_all_tasks_blocked()
        data = b""
        while not later.is_set() or data.count(b"\n") < 3:
            data += peers.written()
            await trio.lowlevel.checkpoint()  # the writers wait for the room this drain makes
    assert data == filler + b"a1\na2\na4\n"
    assert peers.out.send_nowait([b"a5"])  # written: nothing held, no burst open
    assert peers.written() == b"a5\n"


async def test_a_cork_never_holds_more_than_one_atomic_write(peers: Peers) -> None:
    frame = b"y" * (select.PIPE_BUF * 2 // 3)
    peers.arrive(b'{"id":1}\n{"id":2}\n')
    await peers.incoming.receive()
    assert peers.out.send_nowait([frame])
    assert peers.written() == b""
    assert peers.out.send_nowait([frame + b"z"])  # both would pass PIPE_BUF: the first goes out now
    assert peers.written() == frame + b"\n"
    close_burst()
    assert peers.written() == frame + b"z\n"
    big = b"w" * select.PIPE_BUF
    peers.arrive(b'{"id":3}\n{"id":4}\n')
    await peers.incoming.receive()
    assert peers.out.send_nowait([big]) is False  # too big for one atomic write, as before: the slow way
    assert peers.written() == b""


async def test_the_reader_writes_what_it_held_before_it_waits_for_the_dispatcher(peers: Peers) -> None:
    """Line 1 is forwarded at once (held); line 2 must wait for room in the dispatcher's inbox, and the
    forwarded frame must not wait with it (its answer may be what frees the room)."""
    dispatch_send, dispatch_recv = trio.open_memory_channel[Message](0)
    outbox_send, _outbox_recv = trio.open_memory_channel[Message](1)

    def take_now(message: Message) -> bool:
        return isinstance(message, Request) and message.id == 1 and peers.out.send_nowait([b"forwarded 1"])

    reader = Reader(peers.incoming, dispatch_send, outbox_send, take_now)
    line = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n'
    async with trio.open_nursery() as nursery:
        await nursery.start(reader.run)
        peers.arrive(line % 1 + line % 2)
        await trio.testing.wait_all_tasks_blocked()  # the reader waits to put request 2 in the inbox
        assert BURST.is_open is False
        assert peers.written() == b"forwarded 1\n"
        assert (await dispatch_recv.receive()).id == 2  # type: ignore[union-attr]
        nursery.cancel_scope.cancel()


async def test_a_burst_left_open_across_a_wait_is_written_when_that_task_step_ends(peers: Peers) -> None:
    peers.arrive(b'{"id":1}\n{"id":2}\n')
    await peers.incoming.receive()  # the burst is open: a second line came in the same read
    assert peers.out.send_nowait([b"a1"])
    assert peers.written() == b""
    await trio.lowlevel.checkpoint()  # a wait that closes nothing itself: the step ends, StepEnd writes
    assert BURST.is_open is False
    assert peers.written() == b"a1\n"


async def test_a_stuck_cork_found_at_a_task_steps_end_is_written_once_there_is_room(peers: Peers) -> None:
    filler = peers.fill()
    peers.arrive(b'{"id":1}\n{"id":2}\n')
    await peers.incoming.receive()
    assert peers.out.send_nowait([b"a1"])
    await trio.lowlevel.checkpoint()  # StepEnd finds the pipe full: a task of the spare nursery waits
    await trio.testing.wait_all_tasks_blocked()
    data = b""
    with trio.fail_after(5):  # without StepEnd the frame would be held until some reader's next wait
        while data.count(b"\n") < 1:
            data += peers.written()
            await trio.lowlevel.checkpoint()
    assert data == filler + b"a1\n"
