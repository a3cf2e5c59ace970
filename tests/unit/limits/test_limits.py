"""[limits]: GCRA buckets on Trio's clock and caps on calls in flight, both with bounded tables."""

from __future__ import annotations

import trio
import trio.testing

from actors.limits import Limiter, LimitSettings, Refusal
from actors.limits.gcra import RateBuckets
from actors.limits.inflight import InFlightCaps
from actors.limits.limiter import LimitKey


async def test_a_bucket_lets_its_burst_through_and_refuses_the_next_until_it_refills(
    autojump_clock: trio.testing.MockClock,
) -> None:
    buckets = RateBuckets(rate_per_s=2.0, burst=3)
    assert [buckets.admit("alice") for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst, at the bound
    assert buckets.admit("alice") == 0.5  # one past it: one interval (1/rate) to wait
    assert buckets.admit("bob") == 0.0  # another key has its own bucket
    await trio.sleep(0.5)
    assert buckets.admit("alice") == 0.0  # one call's worth came back
    assert buckets.admit("alice") == 0.5


async def test_a_bucket_whose_burst_is_back_needs_no_entry(autojump_clock: trio.testing.MockClock) -> None:
    buckets = RateBuckets(rate_per_s=10.0, burst=2, max_keys=2)
    buckets.admit("a")
    buckets.admit("b")
    await trio.sleep(1.0)  # both full again
    buckets.admit("c")  # past max_keys: the full ones are swept
    assert len(buckets) == 1


async def test_the_table_of_buckets_is_capped_and_drops_the_nearest_to_full(
    autojump_clock: trio.testing.MockClock,
) -> None:
    buckets = RateBuckets(rate_per_s=1.0, burst=5, max_keys=3)
    for key, calls in (("a", 1), ("b", 3), ("c", 3), ("d", 3)):
        for _ in range(calls):
            assert buckets.admit(key) == 0.0
    assert len(buckets) == 3  # "a" (one call used: nearest to its whole burst) left the table


def test_calls_in_flight_are_capped_per_key_and_released_once() -> None:
    caps = InFlightCaps(max_calls=2, max_keys=2)
    first, second = caps.enter("alice"), caps.enter("alice")
    assert first is not None and second is not None
    assert caps.enter("alice") is None  # one past the cap
    first()
    first()  # a second release of the same slot changes nothing
    assert caps.in_flight("alice") == 1
    assert caps.enter("bob") is not None
    assert caps.enter("carol") is None  # the table is full of keys with calls in flight
    second()
    assert caps.in_flight("alice") == 0 and len(caps) == 1  # an idle key leaves the table


async def test_the_limiter_says_when_to_retry_in_whole_seconds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = Limiter(LimitSettings(calls_per_s=0.2, burst=1, per=LimitKey.TOOL))
    release = limiter.admit("alice", "alpha", "echo")
    assert callable(release)
    refused = limiter.admit("alice", "alpha", "echo")
    assert isinstance(refused, Refusal)
    assert refused.message == "rate limited, retry in 5 s" and refused.retry_after_s == 5.0
    assert callable(limiter.admit("alice", "alpha", "add"))  # per tool: another bucket
    assert limiter.refusals == {"rate": 1}


async def test_the_limiter_caps_calls_in_flight_and_frees_the_slot_of_a_refused_rate() -> None:
    limiter = Limiter(LimitSettings(max_inflight=1))
    release = limiter.admit("alice", "alpha", "echo")
    assert callable(release)
    refused = limiter.admit("alice", "beta", "add")
    assert isinstance(refused, Refusal) and refused.kind == "inflight"
    assert "1 calls already in flight for this caller" in refused.message
    release()
    assert callable(limiter.admit("alice", "beta", "add"))


async def test_a_caller_refused_because_the_table_of_callers_is_full_is_told_so() -> None:
    limiter = Limiter(LimitSettings(max_inflight=5, max_keys=1))
    assert callable(limiter.admit("alice", "alpha", "echo"))
    refused = limiter.admit("bob", "alpha", "echo")  # bob has nothing in flight: not his own cap
    assert isinstance(refused, Refusal) and "for this caller" not in refused.message
    assert "calls in flight for 1 callers" in refused.message


async def test_a_reload_keeps_the_same_limits_buckets_and_starts_changed_ones_afresh() -> None:
    settings = LimitSettings(calls_per_s=1.0, burst=1)
    limiter = Limiter(settings)
    assert callable(limiter.admit("alice", "a", "t"))
    limiter.reconfigure(LimitSettings(calls_per_s=1.0, burst=1))
    assert isinstance(limiter.admit("alice", "a", "t"), Refusal)  # same settings: the same bucket
    limiter.reconfigure(None)
    assert not limiter.active
