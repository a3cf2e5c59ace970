"""W3C trace context in a request's `_meta` (`traceparent`): read a call's trace id, and give a client's call
that can ask a trace of its own when its client sent none.

MCP carries `traceparent` in `params._meta` (normative from 2026-07-28; SDKs that propagate OpenTelemetry
context send it before that too). The gateway reads it for one purpose here: a backend's request for a
client names, by its trace id, the call it is serving (backends/ask_owner.py). Parsing is strict and never
raises: anything but a well-formed version-00 value is no trace at all.
"""

from __future__ import annotations

import os
from typing import Any, Final

from actors.protocol.eras import request_meta

# The client's calls whose handler may ask the client something (sampling, elicitation, roots) meanwhile.
CALLS_THAT_ASK: Final = frozenset({"tools/call", "prompts/get", "resources/read", "completion/complete"})
TRACEPARENT: Final = "traceparent"
TRACEPARENT_CHARS: Final = 55  # version 00: "00-", 32 hex trace id, "-", 16 hex parent id, "-", 2 hex flags
HEX: Final = frozenset("0123456789abcdef")


def trace_id(params: object) -> str | None:
    """The trace id of a well-formed version-00 `_meta.traceparent` (not all zeros), else None."""
    meta = request_meta(params)
    value = meta.get(TRACEPARENT) if meta is not None else None
    if not isinstance(value, str) or len(value) != TRACEPARENT_CHARS:
        return None
    version, trace, parent, flags = (value[0:2], value[3:35], value[36:52], value[53:55])
    if value[2] != "-" or value[35] != "-" or value[52] != "-" or version != "00":
        return None
    if not (set(trace) | set(parent) | set(flags)) <= HEX or trace == "0" * 32 or parent == "0" * 16:
        return None
    return trace


def with_trace(method: str, params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A client's call that can ask, with a trace context of its own when the client sent none (a new trace,
    not sampled), so that what its backend asks while serving it names it; and the trace id it goes with
    (None: no hint). A client's own traceparent is kept as it is, whatever it is; params whose `_meta` is
    not an object are left for the checks that refuse them. Copies, never edits."""
    if method not in CALLS_THAT_ASK:
        return params, None
    meta = params.get("_meta", {})
    if not isinstance(meta, dict):
        return params, None
    if TRACEPARENT in meta:
        return params, trace_id(params)
    ids = os.urandom(24).hex()  # a trace id (32 hex digits) and a parent id (16)
    traceparent = f"00-{ids[:32]}-{ids[32:]}-00"
    return {**params, "_meta": {**meta, TRACEPARENT: traceparent}}, ids[:32]
