"""Verified tokens remembered until they expire, so that a session's every request does not pay for an RS256
verification again. Bounded (least recently used first out); only verified tokens are kept, never
failures, so many distinct bad tokens cost no memory. Keyed by a digest: the token itself is not kept."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Final

import attrs

from actors.identity.principal import Principal

MAX_ENTRIES: Final = 4096  # a token per client session; past this the least recently used is dropped


@attrs.define(eq=False)
class VerifiedTokens:
    """Owns: the digests of verified tokens, each with its principal and expiry (wall clock seconds)."""

    max_entries: int = MAX_ENTRIES
    _entries: OrderedDict[bytes, tuple[Principal, float]] = attrs.field(factory=OrderedDict)

    def get(self, token: str) -> Principal | None:
        key = _digest(token)
        found = self._entries.get(key)
        if found is None:
            return None
        if found[1] <= time.time():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, token: str, principal: Principal) -> None:
        """Remember a verified token until its `exp`; one without `exp` is not remembered."""
        expires = principal.claims.get("exp")
        if not isinstance(expires, int | float) or isinstance(expires, bool) or expires <= time.time():
            return
        self._entries[_digest(token)] = (principal, float(expires))
        self._entries.move_to_end(_digest(token))
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
