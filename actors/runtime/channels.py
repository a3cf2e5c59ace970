"""Sending on a memory channel without a trip through the scheduler when there is room.

`MemorySendChannel.send` always yields (it is a checkpoint), even when the item fits: one extra task step
per message. On the forwarding path that is three steps per call. `put` takes the room when there is some
and waits (with the checkpoint) only when the channel is full. A loop that only ever `put`s must yield
elsewhere: the reader does when its stream has nothing to read, a request task when it waits for its
answer.
"""

from __future__ import annotations

from typing import TypeVar

import trio

T = TypeVar("T")


async def put(channel: trio.MemorySendChannel[T], item: T) -> None:
    """Like `channel.send(item)`, without yielding when the channel has room; same errors."""
    try:
        channel.send_nowait(item)
    except trio.WouldBlock:
        await channel.send(item)
