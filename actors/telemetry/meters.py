"""The counters the gateway keeps: plain integers and floats, bumped where each thing is seen (sessions and
backends write them) and read only when a reader asks (a scrape of the admin's /metrics, a tick of its status
page).

Every key a peer's data chooses is bounded, since each becomes a series at /metrics and an entry here: an
error code the gateway does not know counts as OTHER_CODE, a backend's tools past MAX_TOOLS_PER_BACKEND
count together under OTHER_TOOL. Methods, backends and frontends are the gateway's own names.

The hot path never takes a lock and allocates nothing per call: a call's latency is counted by the backend
link that answers it (`BackendMeter.answered`: a dict lookup, a bisect and three increments), its bytes by
whoever reads or writes its frame. Trio runs every task on one thread, so no increment can interleave with
another or with a reader. The Prometheus objects are built from these at scrape time (admin/exposition.py).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Final

import trio

from actors.limits import Limiter
from actors.policy import PolicyGate
from actors.protocol import errors
from actors.protocol.envelopes import Call
from actors.protocol.messages import RpcError

if TYPE_CHECKING:  # a gateway that does not trace imports no tracing module
    from actors.telemetry.tracing_durations import Durations

# Upper bounds of the latency buckets, in seconds: a local tool answers in a millisecond, a remote one may
# take a minute (the default request_timeout_s is 60).
LATENCY_BUCKETS_S: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
TOOLS_CALL: Final = "tools/call"
LISTEN: Final = "subscriptions/listen"  # a modern backend's standing request: listening, not a call
# The error codes counted by their own number: JSON-RPC's, MCP's and the gateway's. Any other integer a
# backend answers with is counted as OTHER_CODE: a backend choosing codes cannot grow the series.
KNOWN_CODES: Final = frozenset(
    {
        errors.PARSE_ERROR,
        errors.INVALID_REQUEST,
        errors.METHOD_NOT_FOUND,
        errors.INVALID_PARAMS,
        errors.INTERNAL_ERROR,
        errors.BACKEND_UNAVAILABLE,
        errors.REQUEST_TIMEOUT,
        errors.NOT_INITIALIZED,
        errors.URL_ELICITATION_REQUIRED,
        errors.HEADER_MISMATCH,
        errors.MISSING_REQUIRED_CLIENT_CAPABILITY,
        errors.UNSUPPORTED_PROTOCOL_VERSION,
    }
)
OTHER_CODE: Final = "other"
# Tools of one backend counted by name; the calls of any tool beyond these are counted together (a backend
# that renames its tools again and again cannot grow the series either). Far above any real tool list.
MAX_TOOLS_PER_BACKEND: Final = 1000
OTHER_TOOL: Final = "(other)"  # no valid MCP tool name has parentheses


def _no_calls_in_flight() -> Collection[Call]:
    return ()


class CallStats:
    """The calls of one tool (or one other method) of one backend: how many, how long, which errors."""

    __slots__ = ("buckets", "count", "errors", "sum_s")

    def __init__(self) -> None:
        self.count = 0
        self.sum_s = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)  # per bucket, not cumulative; the last is +Inf
        self.errors: dict[int | str, int] = {}  # a KNOWN_CODES code, or OTHER_CODE -> answers with it

    def observe(self, latency_s: float, error: RpcError | None) -> None:
        self.count += 1
        self.sum_s += latency_s
        self.buckets[bisect_left(LATENCY_BUCKETS_S, latency_s)] += 1
        if error is not None:
            code = error.code if error.code in KNOWN_CODES else OTHER_CODE
            self.errors[code] = self.errors.get(code, 0) + 1


class BackendMeter:
    """What one backend did, across all its runs. Its link counts calls and bytes; its actor counts starts
    and says which process is the current one."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "eras",
        "inflight_calls",
        "methods",
        "name",
        "pid",
        "ready_since",
        "sandbox",
        "starts",
        "tools",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.tools: dict[str, CallStats] = {}  # tools/call, by the backend's own tool name
        self.methods: dict[str, CallStats] = {}  # every other method sent for a client
        self.bytes_in = 0  # frames read from the backend
        self.bytes_out = 0  # frames written to it
        self.starts = 0  # runs the supervisor started; restarts are the ones after the first
        self.pid: int | None = None  # the current run's process, while it has one
        self.ready_since: float | None = None  # trio time the current run became ready
        self.inflight_calls: Callable[[], Collection[Call]] = _no_calls_in_flight  # the current run's table
        # the eras the current run is connected in: "legacy", "modern", "modern+legacy" (a legacy lane)
        self.eras: str | None = None
        self.sandbox: dict[str, Any] | None = None  # the current run's sandbox report (actors/sandbox/)

    def inflight(self) -> int:
        """Calls in flight now, not counting the standing subscriptions/listen of a modern backend."""
        return sum(1 for call in self.inflight_calls() if call.method != LISTEN)

    def listening(self) -> bool:
        """Its subscriptions/listen is open (a modern backend's)."""
        return any(call.method == LISTEN for call in self.inflight_calls())

    @property
    def restarts(self) -> int:
        return max(self.starts - 1, 0)

    def answered(self, call: Call, error: RpcError | None, sent_at: float) -> None:
        """A client's call got its one answer (the backend's, a timeout or the run's end)."""
        latency_s = trio.current_time() - sent_at
        if call.method == TOOLS_CALL:
            table, key = self.tools, (call.params or {}).get("name")
            key = key if isinstance(key, str) else ""
            if key not in table and len(table) >= MAX_TOOLS_PER_BACKEND:
                key = OTHER_TOOL
        else:
            table, key = self.methods, call.method
        stats = table.get(key)
        if stats is None:
            stats = table[key] = CallStats()
        stats.observe(latency_s, error)

    def run_started(self) -> None:
        self.starts += 1
        self.pid, self.ready_since = None, None

    def run_ended(self) -> None:
        self.pid, self.ready_since, self.inflight_calls, self.eras = None, None, _no_calls_in_flight, None

    def totals(self) -> tuple[int, list[int]]:
        """Every call so far and its latency buckets, over all tools and methods."""
        count, buckets = 0, [0] * (len(LATENCY_BUCKETS_S) + 1)
        for stats in (*self.tools.values(), *self.methods.values()):
            count += stats.count
            for index, n in enumerate(stats.buckets):
                buckets[index] += n
        return count, buckets


class Traffic:
    """Bytes of MCP frames between one frontend's clients and the gateway, counted by each session's reader
    and writer."""

    __slots__ = ("bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0


class Meters:
    """Every meter of one gateway, made on first use: one per backend, one per frontend."""

    def __init__(self) -> None:
        self.backends: dict[str, BackendMeter] = {}
        self.frontends: dict[str, Traffic] = {}
        self.policy: PolicyGate | None = None  # its decisions by (method, allow|deny): counted there
        self.limiter: Limiter | None = None  # its admissions and refusals by kind: counted there
        # with tracing on: mcp.server.operation.duration and mcp.client.operation.duration, also on /metrics
        self.durations: tuple[Durations, ...] = ()

    def backend(self, name: str) -> BackendMeter:
        meter = self.backends.get(name)
        if meter is None:
            meter = self.backends[name] = BackendMeter(name)
        return meter

    def frontend(self, name: str) -> Traffic:
        traffic = self.frontends.get(name)
        if traffic is None:
            traffic = self.frontends[name] = Traffic()
        return traffic
