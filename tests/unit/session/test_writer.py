"""Writer.write_now: a sender writes a frame for the writer only while it waits on an empty outbox, so a frame
never overtakes one queued before it."""

from __future__ import annotations

import os

import trio
import trio.testing

from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.protocol.messages import Encoded, Message, Notification, Response
from actors.session.budget import ByteBudget
from actors.session.inflight import Answers
from actors.session.writer import Writer


async def test_answers_skip_the_outbox_only_while_the_writer_is_idle_and_keep_their_order() -> None:
    read_end, write_end = os.pipe()
    client = LineStream(
        trio.testing.MemoryReceiveStream(), PipeStream(trio.lowlevel.FdStream(write_end)), 1 << 20
    )
    send, receive = trio.open_memory_channel[Message](4)
    answers = Answers(send)
    writer = Writer(transport=client, outbox=receive, on_peer_gone=lambda: None, answers=answers)
    assert not writer.write_now(Response(0, {}))  # not running yet: nobody waits on the outbox
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        await trio.testing.wait_all_tasks_blocked()
        answers.deliver(Response(1, {}))  # written in this task: the writer was idle
        assert os.read(read_end, 1000) == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
        send.send_nowait(Notification("notifications/progress", {"progress": 1}))  # handed to the writer
        assert not writer.write_now(Response(2, {}))  # it has not written that yet: no overtaking
        answers.deliver(Response(2, {}))  # so this one queues behind it
        await trio.testing.wait_all_tasks_blocked()
        assert os.read(read_end, 1000).split(b"\n")[:2] == [
            b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
            b'{"jsonrpc":"2.0","id":2,"result":{}}',
        ]
        send.close()
    assert answers.write_now is None  # a stopped writer is not written for
    os.close(read_end)


async def test_answers_the_writer_holds_for_a_client_that_reads_nothing_still_count_as_unread() -> None:
    """A real pipe whose reader reads nothing: the writer takes what is queued into one write and waits in
    it. Those answers are still held, so they still count, and more of them pass max_unread_bytes."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    client = LineStream(
        trio.testing.MemoryReceiveStream(), PipeStream(trio.lowlevel.FdStream(write_end)), 1 << 20
    )
    send, receive = trio.open_memory_channel[Message | Encoded](4)
    told: list[int] = []
    answers = Answers(send, budget=ByteBudget(max_unread_bytes=400_000), on_unread=told.append)
    writer = Writer(transport=client, outbox=receive, on_peer_gone=lambda: None, answers=answers)
    big = {"text": "x" * 100_000}  # more than a pipe holds: the writer's write waits in the middle
    async with trio.open_nursery() as nursery:
        await nursery.start(writer.run)
        answers.write_now = None  # every answer through the queue, as for a busy writer
        for n in range(3):
            answers.deliver(Response(n, big))
        await trio.testing.wait_all_tasks_blocked()  # the writer holds all three, stuck in its write
        assert answers.unread > 300_000 and not told
        answers.deliver(Response(3, big))
        assert told and told[0] > 400_000  # what the writer holds counts: a stuck client ends here
        nursery.cancel_scope.cancel()
    os.close(read_end)
