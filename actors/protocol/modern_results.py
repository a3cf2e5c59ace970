"""How a result goes to a modern client (2026-07-28): `resultType`, caching hints, the server's identity.

A legacy client gets results exactly as the gateway always sent them; nothing here applies to it. A modern
result says whether it is final (`resultType`), the cacheable ones say how long and for whom they may be
kept (`ttlMs`, `cacheScope`), and every one names the server in `_meta`. The gateway decides the hints for
what it answers: the minimum over the backends a list comes from, public only when provably so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from actors.protocol.eras import CACHEABLE_METHODS, SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY

COMPLETE: Final = "complete"
INPUT_REQUIRED: Final = "input_required"
# In an input_required result inside the gateway: the answers the gateway gave on the client's behalf (a
# backend's configured roots, backends/round_roots.py); taken out before the result leaves the gateway.
GATEWAY_ANSWERS: Final = "gateway/answers"
PUBLIC: Final = "public"  # may be shared across authorization contexts
PRIVATE: Final = "private"  # may be reused only within the same one
MAX_TTL_MS: Final = 2**53 - 1  # the largest integer every JSON peer reads exactly (a JavaScript safe integer)
# What only 2026-07-28 puts on a result or a notification, and a client of the handshake era never gets
# (the trace keys and any other `_meta` key travel in either era).
MODERN_RESULT_FIELDS: Final = frozenset({"ttlMs", "cacheScope"})
MODERN_META_KEYS: Final = frozenset({SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY})
CacheHint = tuple[int | None, str | None]  # (ttlMs, cacheScope) a peer gave; None where it gave none


def modern_result(
    method: str,
    result: object,
    *,
    ttl_ms: int = 0,
    cache_scope: str = PRIVATE,
    server_info: dict[str, Any] | None,
) -> dict[str, Any]:
    """`result` (of a request for `method`) as a modern client gets it, in a new dict: `resultType` is
    "input_required" when the result says so and "complete" otherwise; a complete result of a cacheable
    method carries `ttl_ms` and `cache_scope` (these replace the result's own: the caller has merged them);
    `_meta` gains the server's identity (none when `server_info` is None). A result that is not an object
    cannot carry any of this and goes out as an empty one."""
    encoded: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
    encoded.pop(GATEWAY_ANSWERS, None)  # the gateway's, never a client's
    input_required = encoded.get("resultType") == INPUT_REQUIRED
    encoded["resultType"] = INPUT_REQUIRED if input_required else COMPLETE
    if method in CACHEABLE_METHODS and not input_required:
        encoded["ttlMs"] = ttl_ms
        encoded["cacheScope"] = cache_scope
    if server_info is not None:
        meta = encoded.get("_meta")
        encoded["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server_info}
    return encoded


def cache_hint_of(result: object) -> tuple[int | None, str | None]:
    """The caching hints a (modern) peer put on its result, each None when absent or invalid: `ttlMs` must
    be an integer from 0 to MAX_TTL_MS, `cacheScope` "public" or "private"."""
    if not isinstance(result, dict):
        return None, None
    ttl_ms, scope = result.get("ttlMs"), result.get("cacheScope")
    return (ttl_ms if _is_ttl(ttl_ms) else None), (scope if scope in (PUBLIC, PRIVATE) else None)


def merge_cache_hints(
    hints: Iterable[tuple[int | None, str | None]], per_caller_policy: bool
) -> tuple[int, str]:
    """The hints for an answer built from several contributors' (`(ttl_ms, scope)` each; a legacy backend
    gives `(None, None)`): the smallest ttl, a missing or invalid one counting as 0; "public" only when
    every contributor said public and no per-caller policy (auth, filters, middleware) shapes the answer.
    No contributors at all: (0, "private")."""
    ttl_ms: int | None = None
    public = not per_caller_policy
    for hint_ttl, hint_scope in hints:
        value = hint_ttl if _is_ttl(hint_ttl) else 0
        ttl_ms = value if ttl_ms is None else min(ttl_ms, value)
        public = public and hint_scope == PUBLIC
    if ttl_ms is None:
        return 0, PRIVATE
    return ttl_ms, PUBLIC if public else PRIVATE


def _is_ttl(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TTL_MS


def legacy_result(result: Any) -> Any:
    """A (modern) peer's result or notification params as a client of the handshake era gets them: without
    `resultType: "complete"`, the caching hints and the era's `_meta` keys (the server's identity, a listen's
    id), `_meta` dropped once empty; everything else kept. An `input_required` result is kept whole: it is
    for the gateway's shim (session/shim.py), which never shows it to the client. Copies, never edits; a
    result with nothing to strip (every legacy backend's) is returned as it is."""
    if not isinstance(result, dict) or result.get("resultType") == INPUT_REQUIRED:
        return result
    meta = result.get("_meta")
    modern_meta = isinstance(meta, dict) and not MODERN_META_KEYS.isdisjoint(meta)
    if "resultType" not in result and MODERN_RESULT_FIELDS.isdisjoint(result) and not modern_meta:
        return result
    legacy = {key: value for key, value in result.items() if key not in MODERN_RESULT_FIELDS}
    if legacy.get("resultType") == COMPLETE:
        del legacy["resultType"]
    if modern_meta:
        kept = {key: value for key, value in meta.items() if key not in MODERN_META_KEYS}  # type: ignore[union-attr]
        if kept:
            legacy["_meta"] = kept
        else:
            del legacy["_meta"]
    return legacy
