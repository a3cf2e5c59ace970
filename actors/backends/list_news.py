"""News of backends' list changes between this replica's backend actors and the fleet ([fleet]).

A backend whose own server announced a tools, prompts or resources list change is `heard`: the fleet's relay
(`announced`, set only with a [fleet] table) tells the other replicas. Another replica's news of it arrives as
`elsewhere`: this replica's actor of that backend lists it again as if its own server had said so, and
never tells the fleet of it again (no loops). An actor lists each kind once at a time: news arriving while a
listing runs is one more listing after it, however many came (backend/actor.py).

When Redis answers again after it did not, news may have been lost both ways while it was away: every
backend here `checks` its lists (a listing that is news to clients only if a list differs), and the relay
publishes the changes it could not (fleet/relay.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

import attrs

Relist = Callable[[str, bool], None]  # (a list_changed method, announced): the kinds it names listed again
CHANGE_METHODS: Final = (
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
)


@attrs.define(eq=False)
class ListNews:
    """Owns: the relist trigger of each backend actor running here, by backend name.
    Receives: `heard` (a backend's own server), `elsewhere` (another replica's backend, through the relay).
    Sends: `announced` (the relay's publish), each backend actor's relist trigger.
    Stops when: with the gateway; nothing of its own runs."""

    announced: Callable[[str, str], None] | None = None  # (backend, method): the fleet's relay publishes it
    _relists: dict[str, Relist] = attrs.field(factory=dict)

    @contextmanager
    def hearing(self, backend: str, relist: Relist) -> Iterator[None]:
        """While a backend actor runs, news for its name reaches `relist`."""
        self._relists[backend] = relist
        try:
            yield
        finally:
            if self._relists.get(backend) is relist:  # a reload's new actor of the name may have taken it
                del self._relists[backend]

    def heard(self, backend: str, method: str) -> None:
        if self.announced is not None:
            self.announced(backend, method)

    def elsewhere(self, backend: str, method: str) -> bool:
        """Another replica's `backend` announced `method`: False when no backend of that name runs here."""
        relist = self._relists.get(backend)
        if relist is None:
            return False
        relist(method, True)
        return True

    def check_all(self) -> None:
        """Every backend here lists each of its lists again, news to clients only where one differs."""
        for relist in list(self._relists.values()):
            for method in CHANGE_METHODS:
                relist(method, False)
