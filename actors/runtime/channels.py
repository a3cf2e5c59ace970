"""Sending on a memory channel without a trip through the scheduler when there is room; whether its
receiver is idle.

`MemorySendChannel.send` always yields (it is a checkpoint), even when the item fits: one extra task step
per message. On the forwarding path that is three steps per call. `put` takes the room when there is some
and waits (with the checkpoint) only when the channel is full. A loop that only ever `put`s must yield
elsewhere: the reader does when its stream has nothing to read, a request task when it waits for its
answer.
"""

from __future__ import annotations

from typing import Any, TypeVar

import trio

T = TypeVar("T")


def receiver_idle(channel: trio.MemorySendChannel[Any] | trio.MemoryReceiveChannel[Any]) -> bool:
    """A task waits to receive on the channel and nothing is queued in it: what is sent now goes straight to
    that task, which would take it next. `statistics()` says the same with an object made for each call, on
    a path taken twice per forwarded call; trio's channel state has said it with these two fields since its
    first release (a unit test holds them to `statistics()`)."""
    state = channel._state
    return not state.data and bool(state.receive_tasks)


async def put(channel: trio.MemorySendChannel[T], item: T) -> None:
    """Like `channel.send(item)`, without yielding when the channel has room; same errors."""
    try:
        channel.send_nowait(item)
    except trio.WouldBlock:
        await channel.send(item)
