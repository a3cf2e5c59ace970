"""Calls per second and p50/p99 latency per backend, sampled once a second for the status page's charts.

Each sample reads every backend meter's totals (telemetry/meters.py) and compares them with the last
sample's: the difference in calls over the time between them is the rate, and the difference in latency
buckets gives the quantiles, interpolated within the bucket they fall in (as Prometheus' histogram_quantile
does).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

import attrs
import trio

from actors.runtime.watch import Watch
from actors.telemetry.meters import LATENCY_BUCKETS_S, Meters

SAMPLE_S: Final = 1.0
SERIES_LENGTH: Final = 120  # samples kept per backend: the last two minutes


def quantile(q: float, buckets: Sequence[int]) -> float | None:
    """The q-quantile (0 < q < 1) of observations counted per bucket (LATENCY_BUCKETS_S, then +Inf), in
    seconds; None without observations. One in the +Inf bucket is reported as the largest bound."""
    total = sum(buckets)
    if total == 0:
        return None
    rank, seen = q * total, 0
    for index, count in enumerate(buckets):
        if count and seen + count >= rank:
            if index == len(LATENCY_BUCKETS_S):
                return LATENCY_BUCKETS_S[-1]
            lower = LATENCY_BUCKETS_S[index - 1] if index else 0.0
            upper = LATENCY_BUCKETS_S[index]
            return lower + (upper - lower) * (rank - seen) / count
        seen += count
    return LATENCY_BUCKETS_S[-1]


@attrs.frozen
class Sample:
    at: float  # wall-clock time (time.time())
    calls_per_s: float
    p50_s: float | None
    p99_s: float | None

    def as_json(self) -> list[Any]:
        """Compact, for the event stream: [at, calls/s, p50 ms, p99 ms]."""
        return [round(self.at, 3), round(self.calls_per_s, 2), _ms(self.p50_s), _ms(self.p99_s)]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


@attrs.define
class RateSampler:
    """Owns: each backend's series of samples and the totals of the last sample.
    Receives: nothing; reads the meters every SAMPLE_S.
    Sends: a tick on `changed` after each sample.
    Stops when: cancelled (with the admin's nursery).
    Errors: none.
    """

    meters: Meters
    changed: Watch[float]
    series: dict[str, deque[Sample]] = attrs.field(factory=dict)
    _last: dict[str, tuple[float, int, list[int]]] = attrs.field(
        factory=dict
    )  # name -> (time, calls, buckets)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.sample()
        task_status.started()
        while True:
            await trio.sleep(SAMPLE_S)
            self.sample()
            self.changed.publish(time.time())

    def sample(self) -> None:
        now, wall = trio.current_time(), time.time()
        for name, meter in self.meters.backends.items():
            count, buckets = meter.totals()
            last = self._last.get(name)
            self._last[name] = (now, count, buckets)
            if last is None:
                continue
            then, last_count, last_buckets = last
            delta = [new - old for new, old in zip(buckets, last_buckets, strict=True)]
            rate = (count - last_count) / (now - then) if now > then else 0.0
            kept = self.series.setdefault(name, deque(maxlen=SERIES_LENGTH))
            kept.append(Sample(wall, rate, quantile(0.5, delta), quantile(0.99, delta)))

    def of(self, name: str) -> list[list[Any]]:
        return [sample.as_json() for sample in self.series.get(name, ())]
