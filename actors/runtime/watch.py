"""Watch: the latest immutable snapshot from one publisher, for many readers.

A memory channel delivers every item to one receiver and makes a slow receiver block its sender. Readers of
the catalog need the opposite: each sees only the newest view, and none can ever slow the catalog down.
Values must be immutable; the Watch only swaps a reference and wakes the waiters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import trio

T = TypeVar("T")


class Watch(Generic[T]):
    def __init__(self, value: T) -> None:
        self._value = value
        self._version = 0
        self._changed = trio.Event()
        self._followers: dict[trio.MemorySendChannel[Any], object] = {}

    @property
    def value(self) -> T:
        return self._value

    @property
    def version(self) -> int:
        return self._version

    def publish(self, value: T) -> None:
        self._value = value
        self._version += 1
        changed, self._changed = self._changed, trio.Event()
        changed.set()
        for mailbox, marker in list(self._followers.items()):
            try:
                mailbox.send_nowait(marker)  # a reader with a full mailbox sees the change with its next item
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                del self._followers[mailbox]

    @contextmanager
    def follow(self, mailbox: trio.MemorySendChannel[Any], marker: object) -> Iterator[None]:
        """Put `marker` into `mailbox` at each publish meanwhile, so a task that already reads a mailbox
        learns of new versions without a task of its own to wait for them."""
        self._followers[mailbox] = marker
        try:
            yield
        finally:
            self._followers.pop(mailbox, None)

    async def wait_newer(self, seen_version: int) -> tuple[int, T]:
        """Wait until a version newer than `seen_version` exists; return (version, value)."""
        while self._version <= seen_version:
            await self._changed.wait()
        return self._version, self._value
