"""The token broker's memory: tokens it was granted, each until shortly before it expires, and the requests
that failed, each for `negative_ttl_s`.

Keyed by (issuer, subject, backend, target): whose token it is (the caller's principal for an exchange, the
gateway's client for its own token), for which backend, and what it was asked for (audience, resource,
scope). A principal therefore holds one entry per backend whatever the number of its tokens or sessions,
and a backend's broker at most `max_entries` (the least recently used leaves first). Every entry is
dropped when it is found past its time, when it is pushed out, when the backend refused its token (401),
or with the broker (a reload that changes the backend makes a new one). Times are wall-clock seconds.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

import attrs

TokenKey = tuple[str, str, str, str]  # (issuer, subject, backend, target)
MAX_REFUSALS: Final = 4096  # negative entries kept per broker; the oldest leaves first


@attrs.frozen
class Minted:
    """A token in use: its key, the header value that carries it, and until when the broker hands it out
    (wall clock)."""

    key: TokenKey
    token: str = attrs.field(repr=False)
    serve_until: float
    header_value: str = attrs.field(default="", repr=False)


def serve_until(now: float, lifetime_s: float, skew_s: float, subject_expires_at: float | None) -> float:
    """Until when a token granted now for `lifetime_s` is handed out: `skew_s` before it expires, but never
    less than half its lifetime, and never past the subject token's own expiry."""
    until = now + lifetime_s - min(skew_s, lifetime_s / 2)
    return until if subject_expires_at is None else min(until, subject_expires_at)


@attrs.define(eq=False)
class TokenCache:
    """Owns: granted tokens by key (least recently used first), refusals by key (oldest first), and why
    the last token of a key left (for the audit's `cause`), as many as tokens are kept."""

    max_entries: int
    _tokens: OrderedDict[TokenKey, Minted] = attrs.field(factory=OrderedDict)
    _refusals: OrderedDict[TokenKey, tuple[float, str]] = attrs.field(factory=OrderedDict)
    _gone: OrderedDict[TokenKey, str] = attrs.field(factory=OrderedDict)

    def get(self, key: TokenKey, now: float) -> Minted | None:
        minted = self._tokens.get(key)
        if minted is None:
            return None
        if minted.serve_until <= now:
            del self._tokens[key]
            self._left(key, "expired")
            return None
        self._tokens.move_to_end(key)
        return minted

    def put(self, minted: Minted) -> None:
        self._tokens[minted.key] = minted
        self._tokens.move_to_end(minted.key)
        self._gone.pop(minted.key, None)
        while len(self._tokens) > self.max_entries:
            self._left(self._tokens.popitem(last=False)[0], "evicted")

    def drop(self, minted: Minted) -> bool:
        """Forget `minted` (a backend refused it), unless a newer token has taken its key; True if it did."""
        if self._tokens.get(minted.key) is minted:
            del self._tokens[minted.key]
            self._left(minted.key, "refused_by_backend")
            return True
        return False

    def cause(self, key: TokenKey) -> str:
        """Why a token is asked for `key`: first, or why its last one left (expired, evicted,
        refused_by_backend)."""
        return self._gone.get(key, "first")

    def _left(self, key: TokenKey, why: str) -> None:
        self._gone[key] = why
        self._gone.move_to_end(key)
        while len(self._gone) > self.max_entries:
            self._gone.popitem(last=False)

    def refused(self, key: TokenKey, until: float, reason: str, now: float) -> None:
        """Remember that a request for `key` failed, until `until`; past entries leave as new ones come."""
        self._refusals.pop(key, None)
        self._refusals[key] = (until, reason)
        while self._refusals and (
            len(self._refusals) > MAX_REFUSALS or next(iter(self._refusals.values()))[0] <= now
        ):
            self._refusals.popitem(last=False)

    def refusal(self, key: TokenKey, now: float) -> str | None:
        """Why the last request for `key` failed, while it is remembered."""
        found = self._refusals.get(key)
        if found is None:
            return None
        if found[0] <= now:
            del self._refusals[key]
            return None
        return found[1]

    def __len__(self) -> int:
        return len(self._tokens)

    @property
    def refusals(self) -> int:
        return len(self._refusals)
