"""Fan-out of events to every session that listens (backend log messages today).

Publishing never blocks: each listener is a bounded channel (a session's mailbox), and a listener that does
not keep up loses the overflow (counted) rather than slowing the publisher or anyone else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

import trio

T = TypeVar("T")


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
    def deliver_to(self, mailbox: trio.MemorySendChannel[T]) -> Iterator[None]:
        """Publish into an existing channel (a session's one mailbox) meanwhile; it stays open after."""
        self._listeners.add(mailbox)
        try:
            yield
        finally:
            self._listeners.discard(mailbox)
