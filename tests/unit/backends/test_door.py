"""BackendDoor.call_now: a session writes a call itself only while the backend actor waits on an empty inbox,
and a call it wrote is in the in-flight table like any other (answered, swept, failed)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import orjson
import trio
import trio.testing

from actors.backends.connection import BackendLink
from actors.backends.door import BackendDoor
from actors.backends.errors import BackendExitedError
from actors.protocol.envelopes import BackendCommand, Call, ReplySlot
from actors.protocol.messages import Response


@attrs.define
class PipeLike:
    """Takes frames without waiting while `room`; records them."""

    room: bool = True
    written: list[dict[str, object]] = attrs.field(factory=list)

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        if self.room:
            self.written += [orjson.loads(frame) for frame in frames]
        return self.room

    async def send_many(self, frames: Sequence[bytes]) -> None:
        self.written += [orjson.loads(frame) for frame in frames]


def make(transport: PipeLike) -> tuple[BackendLink, trio.MemorySendChannel[BackendCommand], BackendDoor]:
    link = BackendLink(
        name="alpha",
        transport=transport,  # type: ignore[arg-type]
        on_notification=lambda _: None,
        cancel_scope=trio.CancelScope(),
        request_timeout_s=5.0,
    )
    calls, inbox = trio.open_memory_channel[BackendCommand](4)
    return link, calls, BackendDoor(link, inbox)


def call(call_id: int) -> Call:
    return Call(call_id, "tools/call", {"name": "echo"}, "s1", ReplySlot())


async def test_an_idle_actor_has_the_call_written_for_it_and_answered_from_its_table() -> None:
    transport = PipeLike()
    link, calls, door = make(transport)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(door.inbox.receive)  # the actor's serve loop, waiting
        await trio.testing.wait_all_tasks_blocked()
        first = call(1)
        assert door.call_now(first)
        assert transport.written == [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
        ]
        assert link.inflight == {1: first}
        link._dispatch_any(Response(1, {"content": []}), nursery)
        reply = await first.reply_to.wait()  # type: ignore[union-attr]
        assert reply.result == {"content": []} and link.inflight == {}
        calls.send_nowait(call(2))  # now the actor has something to do: the next call queues behind it
        assert not door.call_now(call(3))
    assert transport.written[1:] == [] and list(link.inflight) == []


async def test_nothing_is_written_for_a_busy_actor_a_full_pipe_or_a_lost_link() -> None:
    transport = PipeLike()
    link, _, door = make(transport)
    assert not door.call_now(call(1))  # nobody waits on the inbox: the actor is busy (or not serving)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(door.inbox.receive)
        await trio.testing.wait_all_tasks_blocked()
        transport.room = False
        assert not door.call_now(call(2))  # the pipe is full: the inbox takes it, nothing is tracked
        transport.room = True
        link.lose(BackendExitedError("connection closed"))
        assert not door.call_now(call(3))
        nursery.cancel_scope.cancel()
    assert transport.written == [] and link.inflight == {}


async def test_a_call_written_by_the_door_is_swept_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    transport = PipeLike()
    link, _, door = make(transport)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(door.inbox.receive)
        nursery.start_soon(link.sweep)
        await trio.testing.wait_all_tasks_blocked()
        late = call(7)
        assert door.call_now(late)
        reply = await late.reply_to.wait()  # type: ignore[union-attr]
        assert reply.error is not None and trio.current_time() == 5.0
        await trio.testing.wait_all_tasks_blocked()
        assert transport.written[-1]["method"] == "notifications/cancelled"  # and the backend is told
        nursery.cancel_scope.cancel()
