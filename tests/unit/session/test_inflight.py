"""Answers: how a backend's connection puts an answer in a session's outbox without ever waiting on a client
that reads slowly, and how the dispatcher waits for such a client before it takes another call."""

from __future__ import annotations

import tracemalloc

import trio
import trio.testing
from support import decoded

from actors.protocol import codec
from actors.protocol.envelopes import Reply
from actors.protocol.messages import Encoded, ErrorResponse, Message, Notification, Response, RpcError
from actors.session.budget import ByteBudget
from actors.session.inflight import Answers, InFlightTable


async def test_answers_past_a_full_outbox_wait_in_order_and_the_dispatcher_waits_for_them() -> None:
    send, receive = trio.open_memory_channel[Message](1)
    answers = Answers(send)
    for n in (1, 2, 3):
        answers.deliver(Response(n, {}))  # never blocks: the outbox takes one, the rest wait beside it
    assert decoded(receive.receive_nowait()) == Response(1, {})
    answers.deliver(Response(4, {}))  # behind the ones waiting, though the outbox has room now
    assert [decoded(m).id for m in answers.overflow] == [2, 3, 4]  # type: ignore[union-attr]
    drained = False

    async def dispatcher() -> None:
        nonlocal drained
        await answers.wait_drained()
        drained = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(dispatcher)
        await trio.testing.wait_all_tasks_blocked()
        assert not drained
        assert [decoded(m).id for m in answers.take_overflow()] == [2, 3, 4]  # type: ignore[union-attr]
    assert drained and not answers.overflow
    send.close()
    answers.deliver(Response(5, {}))  # the session is over: dropped, never raised
    assert not answers.overflow


async def test_an_entry_answers_once_and_a_cancelled_one_not_at_all() -> None:
    send, receive = trio.open_memory_channel[Message](8)
    table = InFlightTable(Answers(send))
    first, second = table.accept(1), table.accept(2)
    first.fill(Reply(result={"n": 1}))
    first.fill(Reply(error=RpcError(-1, "too late")))  # a timeout after the answer: ignored
    second.silent = True  # the client cancelled it
    second.fill(Reply(result={"n": 2}))
    assert decoded(receive.receive_nowait()) == Response(1, {"n": 1})
    assert len(table) == 0 and receive.statistics().current_buffer_used == 0
    assert table.owed_answers(RpcError(-1, "x")) == []
    third = table.accept(3)
    assert table.owed_answers(RpcError(-1, "x")) == [ErrorResponse(3, RpcError(-1, "x"))]
    third.fill(Reply(error=RpcError(-2, "failed")))
    assert decoded(receive.receive_nowait()) == ErrorResponse(3, RpcError(-2, "failed"))


async def test_answers_waiting_for_the_writer_are_kept_as_frames_and_counted_up_to_max_unread_bytes() -> None:
    send, receive = trio.open_memory_channel[Message | Encoded](1)
    budget = ByteBudget(max_unread_bytes=250)
    told: list[int] = []
    answers = Answers(send, budget=budget, on_unread=told.append)
    big = Response(1, {"text": "x" * 60})  # 98 bytes as a frame
    size = len(codec.encode(big))
    answers.deliver(big)
    answers.deliver(Response(2, {"text": "x" * 60}))
    queued = receive.receive_nowait()
    assert isinstance(queued, Encoded) and queued.frame == codec.encode(big)  # bytes, not a decoded tree
    assert isinstance(answers.overflow[0], Encoded) and answers.unread == 2 * size and not told
    answers.deliver(Response(3, {"text": "x" * 60}))  # the writer holds the first, not yet written: counted
    assert told == [3 * size]  # past 250 bytes unread: the session is told, once
    answers.written(size)  # the writer wrote the first
    answers.deliver(Response(4, {}))
    assert told == [3 * size] and answers.unread == 2 * size + len(codec.encode(Response(4, {})))
    answers.written(sum(len(message.frame) for message in answers.take_overflow()))  # type: ignore[union-attr]
    assert answers.unread == 0
    send.close()
    answers.deliver(Response(6, {"text": "x" * 60}))  # after the session: dropped, and not counted
    assert answers.unread == 0


def test_a_notification_no_frame_can_hold_is_dropped_where_it_is_delivered() -> None:
    send, receive = trio.open_memory_channel[Message | Encoded](1)
    answers = Answers(send)
    answers.deliver(Notification("notifications/message", {"data": 2**70}))  # no JSON integer that size
    assert receive.statistics().current_buffer_used == 0 and answers.unread == 0  # and nothing raised


def test_an_answer_waiting_for_the_writer_holds_what_its_length_counts() -> None:
    # orjson returns its write buffer unshrunk (4 KiB for `{}`, ~10x the text past that): a frame kept as
    # written held up to ten times the bytes max_unread_bytes counted.
    send, receive = trio.open_memory_channel[Message | Encoded](1000)
    answers = Answers(send)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(200):
            answers.deliver(Response(n, {"content": [{"type": "text", "text": "x" * 3000}]}))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 2 * answers.unread, (held, answers.unread)  # was ~10x
    receive.close()
