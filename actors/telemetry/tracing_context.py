"""W3C trace context in MCP's `_meta`: read from a request (`carried`), checked (`parse_traceparent`), and
written into what the gateway sends on (`with_context`). Reserved un-prefixed in `_meta` by MCP 2026-07-28
(traceparent, tracestate, baggage); the only carrier over stdio."""

from __future__ import annotations

import re
from typing import Any, Final

from actors.protocol.eras import request_meta

MAX_TRACESTATE_CHARS: Final = 512  # W3C's limit for propagation
MAX_TRACESTATE_MEMBERS: Final = 32  # W3C's limit of list-members
# A tracestate list-member as W3C writes it: a key (lower case, or tenant@system) "=" a value of printable
# ASCII but "," and "=", not ending in a space
TRACESTATE_MEMBER: Final = re.compile(
    r"(?:[a-z][a-z0-9_*/-]{0,255}|[a-z0-9][a-z0-9_*/-]{0,240}@[a-z][a-z0-9_*/-]{0,13})"
    r"=[ !-+\--<>-~]{0,255}[!-+\--<>-~]"
)
Context = tuple[int, int, int, str]  # trace id, span id, flags, tracestate


def carried(params: object) -> Context | None:
    """The W3C trace context a request carries in `_meta` (traceparent, tracestate), or None."""
    meta = request_meta(params)
    if meta is None:
        return None
    parsed = parse_traceparent(meta.get("traceparent"))
    if parsed is None:
        return None
    state = meta.get("tracestate")
    return (*parsed, state if is_tracestate(state) else "")


def is_tracestate(value: object) -> bool:
    """A W3C tracestate the gateway may pass on: at most 32 list-members with distinct keys, each
    well-formed, in 512 characters. One that is not is not passed on at all, as W3C asks."""
    if not isinstance(value, str) or len(value) > MAX_TRACESTATE_CHARS:
        return False
    members = [member.strip(" \t") for member in value.split(",")]
    members = [member for member in members if member]  # W3C allows empty members
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return False
    if not all(TRACESTATE_MEMBER.fullmatch(member) for member in members):
        return False
    return len({member.partition("=")[0] for member in members}) == len(members)


def parse_traceparent(value: object) -> tuple[int, int, int] | None:
    """Trace id, parent id and flags of a W3C traceparent (version 00, or a later one read as 00 says),
    else None: wrong type, length, case or separators, all-zero ids, version ff."""
    if not isinstance(value, str) or len(value) < 55:
        return None
    if value[2] != "-" or value[35] != "-" or value[52] != "-":
        return None
    version = value[:2]
    if version == "ff" or (version == "00" and len(value) != 55) or (len(value) > 55 and value[55] != "-"):
        return None
    try:
        if not all(c in "0123456789abcdef" for c in value[:55].replace("-", "")):
            return None
        trace_id, parent_id, flags = int(value[3:35], 16), int(value[36:52], 16), int(value[53:55], 16)
    except ValueError:
        return None
    if trace_id == 0 or parent_id == 0:
        return None
    return trace_id, parent_id, flags


def with_context(params: dict[str, Any], context: Context) -> dict[str, Any]:
    """`params` with this context's traceparent (and tracestate) in `_meta`, in place of any there: a copy."""
    trace_id, span_id, flags, state = context
    meta = params.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["traceparent"] = "00-%032x-%016x-%02x" % (trace_id, span_id, flags)  # noqa: UP031  # faster here
    if state:
        meta["tracestate"] = state
    else:
        meta.pop("tracestate", None)
    return {**params, "_meta": meta}
