"""Fan-out of events to every session that listens (backend log messages today).

Publishing never blocks: each listener has a bounded queue, and a listener that does not keep up loses the
overflow (counted) rather than slowing the publisher or anyone else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, Generic, TypeVar

import trio

T = TypeVar("T")
LISTENER_QUEUE: Final = 256


class Broadcast(Generic[T]):
    def __init__(self) -> None:
        self._listeners: set[trio.MemorySendChannel[T]] = set()
        self.dropped = 0

    def publish(self, item: T) -> None:
        for listener in list(self._listeners):
            try:
                listener.send_nowait(item)
            except trio.WouldBlock:
                self.dropped += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._listeners.discard(listener)

    @contextmanager
    def listen(self) -> Iterator[trio.MemoryReceiveChannel[T]]:
        send, receive = trio.open_memory_channel[T](LISTENER_QUEUE)
        self._listeners.add(send)
        try:
            with receive:
                yield receive
        finally:
            self._listeners.discard(send)
            send.close()
