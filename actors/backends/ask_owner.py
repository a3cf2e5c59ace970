"""Whose call a backend's request for a client (sampling, elicitation, roots) belongs to.

A backend's request belongs to the call that caused it, for its whole life: parked between a modern
client's rounds or not, and even once that call's client is gone (the request is then refused, never given
to another client). What can tie a request to a call, strongest first:

1. The stream it came on: a Streamable HTTP server sends a request it makes while serving a call on that
   call's POST response stream (both official SDKs do), so the transport knows the call (`streamed_on`).
2. Its W3C trace context: an SDK that propagates trace context (the Python SDK does, through OpenTelemetry,
   even with no tracer configured) sends, in the request's `_meta.traceparent`, the trace id of the call it
   is serving. The gateway gives every call that can ask a trace id of its own (`with_trace`, in
   protocol/trace_context.py) when its client
   sent none, so two clients' calls never share one. A trace id of a call that has ended names no other.
3. Else the only call in flight that could have caused it: a tools/call, prompts/get, resources/read or
   completion/complete of a client (not a list, a ping or the gateway's own request). A call parked while
   its client answers a round counts: it is still waiting and may ask again. So does, for a while, a call
   the gateway gave up (its client cancelled it, or it timed out) that its backend may still be running:
   while one lingers, a request nothing names is refused unless every such call asks the same place.

A progressToken is no hint: an SDK's request carries its own (the Python SDK's is its request id, a small
integer, as the gateway's call ids are), so a match would be chance as often as cause.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Final

import attrs

from actors.protocol.envelopes import Call
from actors.protocol.trace_context import CALLS_THAT_ASK, trace_id


@attrs.frozen(slots=True)
class Owner:
    """The decision: `call` (the request is its), or no call and `why_not` (refuse, naming the reason), or
    neither (no call in flight could have caused it: the request is nobody's call's)."""

    call: Call | None = None
    why_not: str = ""


NOBODYS: Final = Owner()


def owner_of(
    params: object,
    inflight: Mapping[int, Call],
    streamed_on: object = None,
    ended: Container[str] = (),
    lingering: Sequence[Call] = (),
) -> Owner:
    """The call a backend's request (with `params`) belongs to; `streamed_on` is the id of the call on whose
    response stream it came, when the transport has streams; `ended` holds the trace ids of calls that have
    left `inflight` lately; `lingering`, the calls the gateway gave up lately that their backend may still
    be running (each still owns what nothing names). Reads params of any shape without raising."""
    if streamed_on is not None:
        call = inflight.get(streamed_on) if type(streamed_on) is int else None  # type: ignore[call-overload]
        if call is None:
            return Owner(why_not="the call it came with has ended")
        if not can_ask(call):
            return Owner(why_not=f"it came with a {call.method}, which is not a client's call that can ask")
        return Owner(call)
    candidates = [call for call in inflight.values() if can_ask(call)]
    trace = trace_id(params)
    if trace is not None:
        traced = [call for call in candidates if call.trace == trace]
        if traced:
            return _one_client(traced)
        if trace in ended:
            return Owner(why_not="the call it belongs to has ended")
    if lingering and {id(call.asks_to) for call in lingering} != {id(call.asks_to) for call in candidates}:
        return Owner(why_not="a call given up lately (cancelled, or timed out) may be the one asking")
    if not candidates:
        return NOBODYS
    return _one_client(candidates)


def can_ask(call: Call) -> bool:
    """A client's call of a kind whose handler may ask the client something."""
    return call.asks_to is not None and call.method in CALLS_THAT_ASK


def _one_client(calls: list[Call]) -> Owner:
    """The call, when all these calls ask the same place (one legacy session's, or one modern call's)."""
    targets = {id(call.asks_to) for call in calls}
    if len(targets) == 1:
        return Owner(calls[0])
    return Owner(why_not=f"calls of {len(targets)} clients are in progress on it; it is ambiguous")
