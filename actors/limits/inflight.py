"""A cap on the calls one key (a principal, by default) has in flight at once, whatever sessions they come
on.

Owns: the table key -> calls in flight, at most `max_keys` entries; a key leaves it when its last call
ends, so the table holds only callers with calls in flight. A new key past `max_keys` is refused.
In a fleet ([fleet], actors/fleet/limits.py), `others` holds what the other replicas have in flight per
key, as of the last sync, and counts against the cap too.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs


@attrs.define(eq=False)
class InFlightCaps:
    max_calls: int
    max_keys: int = 10_000
    _counts: dict[str, int] = attrs.field(factory=dict)
    others: dict[str, int] = attrs.field(factory=dict)  # in a fleet: the other replicas' calls in flight

    def enter(self, key: str) -> Callable[[], None] | None:
        """The release of one slot (call it exactly once, when the call ends), or None: at the cap."""
        count = self._counts.get(key, 0)
        at_cap = count + self.others.get(key, 0) >= self.max_calls
        if at_cap or (count == 0 and len(self._counts) >= self.max_keys):
            return None
        self._counts[key] = count + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self._counts[key] - 1
            if left:
                self._counts[key] = left
            else:
                del self._counts[key]

        return release

    def counts(self) -> dict[str, int]:
        """This replica's calls in flight per key, now."""
        return dict(self._counts)

    def in_flight(self, key: str) -> int:
        return self._counts.get(key, 0)

    def __len__(self) -> int:
        return len(self._counts)
