"""A call's W3C trace context in `_meta` (protocol/trace_context.py): read strictly, never raising; minted
for a client's call that can ask when its client sent none."""

from __future__ import annotations

from typing import Any

from actors.protocol.trace_context import CALLS_THAT_ASK, trace_id, with_trace

TRACE_A = "0af7651916cd43dd8448eb211c80319c"


def traced(trace: str) -> dict[str, Any]:
    return {"_meta": {"traceparent": f"00-{trace}-b7ad6b7169203331-01"}}


def test_a_malformed_trace_context_is_no_hint_and_never_raises() -> None:
    for meta in [
        None,
        "x",
        {"traceparent": 7},
        {"traceparent": "00-" + "0" * 32 + "-b7ad6b7169203331-01"},  # all-zero trace id
        {"traceparent": f"01-{TRACE_A}-b7ad6b7169203331-01"},  # a version we do not read
        {"traceparent": f"00-{TRACE_A.upper()}-b7ad6b7169203331-01"},
        {"traceparent": f"00-{TRACE_A}-b7ad6b7169203331-01\n"},
        {"traceparent": "x" * 10_000},
    ]:
        assert trace_id({"_meta": meta}) is None
    assert trace_id(["not", "params"]) is None


def test_a_call_that_can_ask_gets_a_trace_of_its_own_unless_its_client_sent_one() -> None:
    params = {"name": "t", "_meta": {"progressToken": 1}}
    minted, trace = with_trace("tools/call", params)
    assert trace is not None and trace_id(minted) == trace and minted["_meta"]["progressToken"] == 1
    assert "traceparent" not in params["_meta"]  # copied, never edited
    assert with_trace("tools/call", params)[1] != trace  # one per call
    assert with_trace("tools/call", traced(TRACE_A)) == (traced(TRACE_A), TRACE_A)  # the client's goes on
    odd = {"_meta": {"traceparent": "01-future-format"}}
    assert with_trace("tools/call", odd) == (odd, None)  # even one the gateway cannot read
    assert with_trace("tools/list", {}) == ({}, None)
    assert with_trace("tools/call", {"_meta": 5}) == ({"_meta": 5}, None)  # for the checks to refuse
    assert all(with_trace(method, {})[1] for method in CALLS_THAT_ASK)
