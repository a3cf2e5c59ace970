"""Rate limits as GCRA (the generic cell rate algorithm): per key, one number, the theoretical arrival
time (TAT) of the next call, on Trio's clock. A key whose TAT has passed has its whole burst again and
needs no entry: such entries are dropped, so the table holds only callers that are using their burst.

Owns: the table key -> TAT, at most `max_keys` entries. Past that, the entries whose burst is back are
swept, then the one nearest to its whole burst is dropped (that caller gets a little more, never less).

Shared by a fleet ([fleet], actors/fleet/limits.py): the calls admitted per key since the last sync are
counted (`take_admitted`), the fleet's GCRA on Redis adds them to the key's shared TAT, and the answer
moves the local TAT forward (`catch_up`) for those keys and every key using its burst here (`busy`): what
other replicas admitted counts here too.
"""

from __future__ import annotations

from typing import Final

import attrs
import trio

SWEEP_EVERY: Final = 1024  # admissions between sweeps of the entries whose burst is back


@attrs.define(eq=False)
class RateBuckets:
    rate_per_s: float  # the sustained rate
    burst: int  # calls that may come at once after a quiet spell
    max_keys: int = 10_000
    _tat: dict[str, float] = attrs.field(factory=dict)
    _since_sweep: int = 0
    shared: bool = False  # in a fleet: admissions are counted for the next sync
    _admitted: dict[str, int] = attrs.field(factory=dict)  # per key since the last sync (shared only)

    @property
    def interval_s(self) -> float:
        return 1.0 / self.rate_per_s

    def admit(self, key: str, now: float | None = None) -> float:
        """0.0 when the call may go (and it is counted), else how many seconds until it may."""
        now = trio.current_time() if now is None else now
        interval = self.interval_s
        tat = max(self._tat.get(key, now), now)
        new_tat = tat + interval
        wait_s = new_tat - now - interval * self.burst
        if wait_s > 0:
            return wait_s
        self._tat[key] = new_tat
        if self.shared:
            self._admitted[key] = self._admitted.get(key, 0) + 1
        self._since_sweep += 1
        if len(self._tat) > self.max_keys or self._since_sweep >= SWEEP_EVERY:
            self._sweep(now)
        return 0.0

    def take_admitted(self) -> dict[str, int]:
        """The calls admitted per key since the last call of this (then forgotten)."""
        admitted, self._admitted = self._admitted, {}
        return admitted

    def busy(self, now: float | None = None) -> list[str]:
        """The keys using their burst now (their TAT is ahead): what a fleet sync asks about."""
        now = trio.current_time() if now is None else now
        return [key for key, tat in self._tat.items() if tat > now]

    def catch_up(self, key: str, ahead_s: float, now: float | None = None) -> None:
        """The fleet's TAT for `key`, `ahead_s` after now: the local one moves forward to it (never back)."""
        now = trio.current_time() if now is None else now
        if ahead_s > 0 and now + ahead_s > self._tat.get(key, now):
            self._tat[key] = now + ahead_s

    def _sweep(self, now: float) -> None:
        self._since_sweep = 0
        for key in [key for key, tat in self._tat.items() if tat <= now]:
            del self._tat[key]
        while len(self._tat) > self.max_keys:
            del self._tat[min(self._tat, key=self._tat.__getitem__)]

    def __len__(self) -> int:
        return len(self._tat)
