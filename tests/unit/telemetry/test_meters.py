"""The meters: a call's latency lands in its bucket, errors by code, starts and restarts, sums over tools.
Latency is measured on the virtual clock."""

from __future__ import annotations

import trio
import trio.testing

from actors.protocol.envelopes import Call, ReplySlot
from actors.protocol.messages import RpcError
from actors.telemetry.meters import (
    LATENCY_BUCKETS_S,
    MAX_TOOLS_PER_BACKEND,
    OTHER_CODE,
    OTHER_TOOL,
    BackendMeter,
    CallStats,
    Meters,
)


def tool_call(name: str) -> Call:
    return Call(1, "tools/call", {"name": name, "arguments": {}}, "s", ReplySlot())


def test_an_observation_lands_in_the_first_bucket_at_or_above_it() -> None:
    stats = CallStats()
    stats.observe(0.001, None)  # exactly a bound: Prometheus' le is inclusive
    stats.observe(0.0011, RpcError(-32000, "down"))
    stats.observe(1000.0, RpcError(-32000, "down"))
    index = LATENCY_BUCKETS_S.index(0.001)
    assert stats.buckets[index] == 1 and stats.buckets[index + 1] == 1 and stats.buckets[-1] == 1
    assert stats.count == 3 and stats.errors == {-32000: 2}
    assert abs(stats.sum_s - 1000.0021) < 1e-9


async def test_answered_counts_by_tool_and_by_method_with_the_time_since_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    meter = BackendMeter("alpha")
    sent = trio.current_time()
    await trio.sleep(0.2)
    meter.answered(tool_call("add"), None, sent)
    meter.answered(tool_call("add"), RpcError(-32601, "no"), sent)
    meter.answered(Call(2, "resources/read", {"uri": "x"}, "s", ReplySlot()), None, sent)
    assert set(meter.tools) == {"add"} and set(meter.methods) == {"resources/read"}
    add = meter.tools["add"]
    assert add.count == 2 and add.errors == {-32601: 1}
    assert add.buckets[LATENCY_BUCKETS_S.index(0.25)] == 2  # 0.2 s: in the 0.25 bucket
    count, buckets = meter.totals()
    assert count == 3 and sum(buckets) == 3


async def test_a_tool_call_without_a_name_is_counted_under_the_empty_name() -> None:
    meter = BackendMeter("alpha")
    meter.answered(Call(1, "tools/call", None, "s", ReplySlot()), None, 0.0)
    assert meter.tools[""].count == 1


def test_restarts_are_the_starts_after_the_first_and_a_run_end_forgets_the_process() -> None:
    meter = BackendMeter("alpha")
    assert meter.restarts == 0
    meter.run_started()
    meter.pid, meter.ready_since = 41, 1.0
    meter.inflight_calls = lambda: [Call(n, "tools/call", None, "s", ReplySlot()) for n in range(3)]
    assert meter.restarts == 0 and meter.inflight() == 3
    meter.run_ended()
    assert (meter.pid, meter.ready_since, meter.inflight()) == (None, None, 0)
    meter.run_started()
    meter.run_started()
    assert meter.restarts == 2


def test_meters_are_made_once_per_name() -> None:
    meters = Meters()
    assert meters.backend("a") is meters.backend("a") and meters.backend("a") is not meters.backend("b")
    assert meters.frontend("stdio") is meters.frontend("stdio")
    assert set(meters.backends) == {"a", "b"} and set(meters.frontends) == {"stdio"}


def test_error_codes_the_gateway_does_not_know_fold_into_other() -> None:
    stats = CallStats()
    for code in (-32602, -32042, 7, -1, 2**62, -32099, -32602):  # a backend may answer with any integer
        stats.observe(0.001, RpcError(code, "no"))
    assert stats.errors == {-32602: 2, -32042: 1, OTHER_CODE: 4}


async def test_a_backend_cannot_grow_the_tool_series_past_its_bound() -> None:
    meter = BackendMeter("alpha")
    for number in range(MAX_TOOLS_PER_BACKEND + 50):
        meter.answered(tool_call(f"tool{number}"), None, 0.0)
    meter.answered(tool_call("tool0"), None, 0.0)  # a tool counted by name goes on being counted so
    assert len(meter.tools) == MAX_TOOLS_PER_BACKEND + 1
    assert meter.tools[OTHER_TOOL].count == 50 and meter.tools["tool0"].count == 2
