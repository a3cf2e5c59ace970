"""Writer.write_now: a sender writes a frame for the writer only while it waits on an empty outbox, so a frame
never overtakes one queued before it."""

from __future__ import annotations

import os

import trio
import trio.testing

from actors.framing.lines import LineStream
from actors.framing.pipes import PipeStream
from actors.protocol.messages import Message, Notification, Response
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
