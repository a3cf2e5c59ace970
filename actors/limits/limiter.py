"""The [limits] table and the gateway's limiter: a sustained rate with a burst (GCRA) and a cap on calls in
flight, keyed by the caller's identity (the token's principal, else the peer's address) and, as the config
says, by backend or by tool. Identity, not session, is the key: a new session does not refill a bucket.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Callable
from typing import Final

import attrs

from actors.limits.gcra import RateBuckets
from actors.limits.inflight import InFlightCaps

MAX_KEYS_DEFAULT: Final = 10_000  # callers tracked at once by each table


MIN_RATE_PER_S: Final = 1 / 86400  # the slowest rate [limits] takes: one call a day


class LimitKey(enum.StrEnum):
    """[limits] per: what one bucket counts."""

    PRINCIPAL = "principal"  # all of a caller's calls
    BACKEND = "backend"  # a caller's calls to one backend
    TOOL = "tool"  # a caller's calls to one tool


def _not_negative(_instance: object, _attribute: object, value: float) -> None:
    if value < 0:
        raise ValueError("must be 0 (no limit) or more")


def _rate(_instance: object, _attribute: object, value: float) -> None:
    """0 (no limit), or a rate a bucket can keep: one call a day or more (a rate of 1e-310 made its interval
    infinite, which admitted every call, and its Retry-After hundreds of digits long)."""
    if value != 0 and not value >= MIN_RATE_PER_S:
        raise ValueError(f"must be 0 (no limit) or at least {MIN_RATE_PER_S:.7f} (one a day)")


def _at_least_one(_instance: object, _attribute: object, value: int) -> None:
    if value < 1:
        raise ValueError("must be 1 or more")


@attrs.frozen(kw_only=True)
class LimitSettings:
    """[limits]."""

    calls_per_s: float = attrs.field(default=0.0, validator=_rate)  # sustained rate; 0: none
    burst: int = attrs.field(default=10, validator=_at_least_one)  # calls at once after a quiet spell
    max_inflight: int = attrs.field(default=0, validator=_not_negative)  # calls in flight per key; 0: no cap
    per: LimitKey = LimitKey.PRINCIPAL
    # the HTTP listener's requests (every POST, GET and DELETE) per caller; over it: 429 with Retry-After
    http_requests_per_s: float = attrs.field(default=0.0, validator=_rate)  # 0: no limit
    http_burst: int = attrs.field(default=20, validator=_at_least_one)
    max_keys: int = attrs.field(default=MAX_KEYS_DEFAULT, validator=_at_least_one)


@attrs.frozen
class Refusal:
    """Over a limit: why (`rate` or `inflight`), the words for the model, and when to try again."""

    kind: str
    message: str
    retry_after_s: float


@attrs.define(eq=False)
class Limiter:
    """Owns: its buckets and in-flight counts (each bounded by max_keys). One per gateway."""

    settings: LimitSettings | None = None  # None: no [limits], every call goes
    rates: RateBuckets | None = attrs.field(init=False, default=None)
    caps: InFlightCaps | None = attrs.field(init=False, default=None)
    requests: RateBuckets | None = attrs.field(init=False, default=None)  # the HTTP listener's
    refusals: Counter[str] = attrs.field(factory=Counter)  # rate | inflight | http -> count
    admitted: int = 0

    def __attrs_post_init__(self) -> None:
        self._build(self.settings)

    def reconfigure(self, settings: LimitSettings | None) -> None:
        """A reload's [limits]: the same ones keep their buckets; changed ones start afresh (calls in flight
        release into the table they entered)."""
        if settings != self.settings:
            self.settings = settings
            self._build(settings)

    def _build(self, s: LimitSettings | None) -> None:
        self.rates = RateBuckets(s.calls_per_s, s.burst, s.max_keys) if s and s.calls_per_s else None
        self.caps = InFlightCaps(s.max_inflight, s.max_keys) if s and s.max_inflight else None
        self.requests = (
            RateBuckets(s.http_requests_per_s, s.http_burst, s.max_keys)
            if s and s.http_requests_per_s
            else None
        )

    def admit_request(self, caller_key: str) -> int:
        """An HTTP request counted against its caller: 0, or the whole seconds until it may come."""
        wait_s = self.requests.admit(caller_key) if self.requests is not None else 0.0
        if wait_s <= 0:
            return 0
        self.refusals["http"] += 1
        return max(1, math.ceil(wait_s))

    @property
    def active(self) -> bool:
        return self.rates is not None or self.caps is not None

    def key(self, caller_key: str, backend: str, tool: str) -> str:
        per = self.settings.per if self.settings is not None else LimitKey.PRINCIPAL
        if per is LimitKey.BACKEND:
            return f"{caller_key}\x00{backend}"
        if per is LimitKey.TOOL:
            return f"{caller_key}\x00{backend}\x00{tool}"
        return caller_key

    def admit(self, caller_key: str, backend: str, tool: str) -> Callable[[], None] | Refusal:
        """A call's release (call it when the call ends), or why it may not go now."""
        key = self.key(caller_key, backend, tool)
        release = self.caps.enter(key) if self.caps is not None else _nothing
        if release is None:
            self.refusals["inflight"] += 1
            assert self.caps is not None
            if self.caps.in_flight(key) or len(self.caps) < self.caps.max_keys:
                message = (
                    f"rate limited: {self.caps.max_calls} calls already in flight for this caller; retry in"
                    " 1 s, once one of them has finished"
                )
            else:  # this caller has none in flight: the table of callers is full (max_keys)
                message = (
                    f"rate limited: the gateway has calls in flight for {self.caps.max_keys} callers, as many"
                    " as it keeps count of; retry in 1 s"
                )
            return Refusal("inflight", message, 1.0)
        wait_s = self.rates.admit(key) if self.rates is not None else 0.0
        if wait_s > 0:
            release()
            self.refusals["rate"] += 1
            seconds = max(1, math.ceil(wait_s))
            return Refusal("rate", f"rate limited, retry in {seconds} s", float(seconds))
        self.admitted += 1
        return release


def _nothing() -> None:
    return None
