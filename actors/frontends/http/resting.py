"""The HTTP sessions that have no HTTP request open, least recently active first: over the whole listener
and per client.

Eviction (a client at its share, the listener at its limit) and idle expiry read the oldest first; a
session leaves when a request for it comes in and comes back, newest, when its last request ends. Every
step is O(1), so a full listener costs a new session no scan of the sessions that are busy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Resting(Generic[T]):
    """Owns: two orders of the same items, by key: every one, and each client's."""

    def __init__(self) -> None:
        self._all: OrderedDict[str, T] = OrderedDict()
        self._by_client: dict[str, OrderedDict[str, T]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def add(self, key: str, client: str, item: T) -> None:
        """`item` is at rest from now on: the most recently active."""
        self._all[key] = item
        self._all.move_to_end(key)
        mine = self._by_client.setdefault(client, OrderedDict())
        mine[key] = item
        mine.move_to_end(key)

    def discard(self, key: str, client: str) -> None:
        """`item` is busy, or gone."""
        self._all.pop(key, None)
        mine = self._by_client.get(client)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._by_client[client]

    def oldest(self, client: str | None = None) -> Iterator[tuple[str, T]]:
        """The items at rest, least recently active first: `client`'s, or all when None. A live view: stop
        reading it before adding or discarding."""
        order = self._all if client is None else self._by_client.get(client)
        return iter(order.items()) if order is not None else iter(())
