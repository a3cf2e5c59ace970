"""Rate limits as GCRA (the generic cell rate algorithm): per key, one number, the theoretical arrival
time (TAT) of the next call, on Trio's clock. A key whose TAT has passed has its whole burst again and
needs no entry: such entries are dropped, so the table holds only callers that are using their burst.

Owns: the table key -> TAT, at most `max_keys` entries. Past that, the entries whose burst is back are
swept, then the one nearest to its whole burst is dropped (that caller gets a little more, never less).
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
        self._since_sweep += 1
        if len(self._tat) > self.max_keys or self._since_sweep >= SWEEP_EVERY:
            self._sweep(now)
        return 0.0

    def _sweep(self, now: float) -> None:
        self._since_sweep = 0
        for key in [key for key, tat in self._tat.items() if tat <= now]:
            del self._tat[key]
        while len(self._tat) > self.max_keys:
            del self._tat[min(self._tat, key=self._tat.__getitem__)]

    def __len__(self) -> int:
        return len(self._tat)
