"""Rates and quantiles from the meters' totals, sampled on the virtual clock."""

from __future__ import annotations

import math

import trio
import trio.testing

from actors.admin.rates import SAMPLE_S, RateSampler, quantile
from actors.protocol.envelopes import Call, ReplySlot
from actors.runtime.watch import Watch
from actors.telemetry.meters import LATENCY_BUCKETS_S, Meters


def buckets(by_bound: dict[float, int] | None = None) -> list[int]:
    """Counts per bucket from {upper bound: count}; math.inf for the last bucket."""
    counts = [0] * (len(LATENCY_BUCKETS_S) + 1)
    for bound, count in (by_bound or {}).items():
        counts[len(LATENCY_BUCKETS_S) if bound == math.inf else LATENCY_BUCKETS_S.index(bound)] = count
    return counts


def test_quantiles_interpolate_within_their_bucket() -> None:
    assert quantile(0.5, buckets()) is None
    # 100 observations in (0.01, 0.025]: the median is half way through that bucket
    assert quantile(0.5, buckets({0.025: 100})) == 0.01 + (0.025 - 0.01) * 0.5
    # 99 fast, 1 slow: p50 is among the fast, p99 at the top of the fast bucket, and above it the slow one
    mixed = buckets({0.001: 99, 1.0: 1})
    assert quantile(0.5, mixed) is not None and quantile(0.5, mixed) <= 0.001
    assert quantile(0.99, mixed) == 0.001
    assert quantile(0.999, mixed) is not None and 0.5 < quantile(0.999, mixed) <= 1.0
    assert quantile(0.5, buckets({math.inf: 3})) == LATENCY_BUCKETS_S[-1]


async def test_the_sampler_gives_calls_per_second_and_latency_per_interval(
    autojump_clock: trio.testing.MockClock,
) -> None:
    meters, changed = Meters(), Watch(0.0)
    alpha = meters.backend("alpha")
    sampler = RateSampler(meters, changed)
    async with trio.open_nursery() as nursery:
        await nursery.start(sampler.run)  # the first sample: the baseline, no point yet
        assert sampler.of("alpha") == []
        now = trio.current_time()
        for _ in range(5):
            alpha.answered(Call(1, "tools/call", {"name": "add"}, "s", ReplySlot()), None, now - 0.02)
        version = changed.version
        await changed.wait_newer(version)
        ((_, rate, p50_ms, p99_ms),) = sampler.of("alpha")
        assert rate == 5 / SAMPLE_S
        assert p50_ms is not None and 10.0 <= p50_ms <= 25.0 and p99_ms is not None and p99_ms <= 25.0
        await changed.wait_newer(changed.version)
        assert sampler.of("alpha")[-1][1:] == [0.0, None, None]  # a quiet second: no calls, no latency
        nursery.cancel_scope.cancel()
