"""Shutdown as a state, not a race: one object, owned by the root, that every stopping part reads.

    running ──begin()──> polite ──hurry()──> hurried ──hurry()──> forced

- `polite`: sessions answer and flush what they have in flight, then each backend is asked to leave (its
  stdin closed) and given time to do so.
- `hurried` (a signal during shutdown): the polite waits end at once; a backend that has not left gets
  SIGTERM now.
- `forced` (another signal): the SIGTERM waits end at once too; SIGKILL now.

A shutdown has a `Budget`: its whole length split into the phases, so that it ends within that length
whatever its parts do. Whoever waits in a phase does it in `phase()`, a cancel scope that ends at the
phase's deadline or as soon as the shutdown is hurried past it. Nothing here knows MCP.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import attrs
import trio

# Shares of a shutdown's whole length (they add up to 1).
DRAIN_SHARE: Final = 0.3  # sessions answer and flush what is in flight
POLITE_SHARE: Final = 0.3  # backends leave on their own once their stdin is closed
TERM_SHARE: Final = 0.2  # after SIGTERM to each backend's group and descendants
KILL_SHARE: Final = 0.2  # after SIGKILL, for the exits to be seen and reaped


class Urgency(enum.IntEnum):
    RUNNING = 0
    POLITE = 1
    HURRIED = 2
    FORCED = 3


@attrs.frozen
class Budget:
    """How long each phase of a stop may take (seconds); together, at most `total_s`."""

    drain_s: float
    polite_s: float
    term_s: float
    kill_s: float

    @classmethod
    def of(cls, total_s: float) -> Budget:
        return cls(total_s * DRAIN_SHARE, total_s * POLITE_SHARE, total_s * TERM_SHARE, total_s * KILL_SHARE)

    @property
    def total_s(self) -> float:
        return self.drain_s + self.polite_s + self.term_s + self.kill_s


@attrs.define(eq=False)
class Shutdown:
    """Owns: the urgency, the budget of the shutdown under way, and the cancel scopes of the phases being
    waited out (each removed when its phase ends).
    Stops when: never; a gateway has one, for its whole life."""

    urgency: Urgency = Urgency.RUNNING
    budget: Budget | None = None  # set by begin()
    reason: str = ""
    _begun: trio.Event = attrs.field(factory=trio.Event)
    _phases: list[tuple[Urgency, trio.CancelScope]] = attrs.field(factory=list)

    @property
    def begun(self) -> bool:
        return self.urgency >= Urgency.POLITE

    def begin(self, reason: str, budget: Budget) -> bool:
        """Start the shutdown (once: False when it had begun already, whose budget stays)."""
        if self.begun:
            return False
        self.urgency, self.budget, self.reason = Urgency.POLITE, budget, reason
        self._begun.set()
        return True

    def hurry(self) -> Urgency:
        """One step more urgent (at most forced): the phases that end at the new urgency end now."""
        if self.urgency < Urgency.FORCED:
            self.urgency = Urgency(self.urgency + 1)
        for until, scope in self._phases:
            if self.urgency >= until:
                scope.cancel()
        return self.urgency

    async def wait_begun(self) -> None:
        await self._begun.wait()

    def budget_or(self, default: Budget) -> Budget:
        """The shutdown's budget once it has begun; else `default` (a backend stopped alone)."""
        return self.budget if self.budget is not None else default

    @contextmanager
    def phase(self, duration_s: float, *, until: Urgency) -> Iterator[trio.CancelScope]:
        """A cancel scope that ends after `duration_s`, or once the urgency reaches `until` (at once if it
        has already)."""
        scope = trio.CancelScope(deadline=trio.current_time() + max(duration_s, 0.0))
        if self.urgency >= until:
            scope.cancel()
        entry = (until, scope)
        self._phases.append(entry)
        try:
            with scope:
                yield scope
        finally:
            self._phases.remove(entry)
