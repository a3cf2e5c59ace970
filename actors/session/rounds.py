"""The rounds of one call, and the states the gateway hands out for them, spent once.

A call that needs the client's input takes rounds: the first request, then each retry (a modern client's,
carrying the requestState the gateway sealed; or one the shim makes for a legacy client). Every round is
the same call to the middleware and the audit: one call id, a round number counted from 1.

A sealed state the gateway wraps around a modern backend's own is good for one retry: its id is remembered
as spent until the state expires anyway, so a replay is refused. The memory is bounded: at most
MAX_SPENT_PER_OWNER ids per owner (the session the states are bound to; for a stateless request, its
principal) and MAX_SPENT in all; an owner past its cap is refused new retries until its oldest states
expire. A session's entries go when the session ends.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Final

import attrs

MAX_SPENT: Final = 65_536  # spent state ids remembered gateway-wide
MAX_SPENT_PER_OWNER: Final = 4096  # of those, one owner's: a client cannot fill the memory for others
ANONYMOUS: Final = "anonymous"  # the owner of a stateless request with no principal (a modern HTTP POST)


def new_call_id() -> str:
    return secrets.token_hex(8)


@attrs.define(slots=True)
class CallRound:
    """Which call a request is a round of, and which round: 1 for the first request."""

    call_id: str = attrs.field(factory=new_call_id)
    number: int = 1


def owner_of(principal: str | None, session: str | None) -> str:
    """Whose a spent state is: the session's it is bound to, else (a stateless request's) its principal's."""
    if session is not None:
        return f"session:{session}"
    return f"principal:{principal}" if principal is not None else ANONYMOUS


@attrs.define(kw_only=True)
class SpentStates:
    """Owns: the ids of states spent and not yet expired, each with its expiry and owner.
    Receives: a retry's state id (`spend`), a session's end (`forget_owner`).
    Stops when: the gateway does; entries leave at expiry (swept as new ones come and as sessions end) or
        at their session's end."""

    total: int = MAX_SPENT
    per_owner: int = MAX_SPENT_PER_OWNER
    _until: dict[str, tuple[float, str]] = attrs.field(factory=dict)  # state id -> (expiry, owner)
    _count: Counter[str] = attrs.field(factory=Counter)

    def __len__(self) -> int:
        return len(self._until)

    def spend(self, state_id: str, owner: str, expiry: float, now: float) -> str | None:
        """Mark a state spent; None when it was fresh, else why the retry is refused."""
        self._sweep_front(now)
        if state_id in self._until:
            return "used already"
        if self._count[owner] >= self.per_owner or len(self._until) >= self.total:
            self._sweep_all(now)
            if self._count[owner] >= self.per_owner or len(self._until) >= self.total:
                return "too many retries pending: start the call again later"
        self._until[state_id] = (expiry, owner)
        self._count[owner] += 1
        return None

    def forget_owner(self, owner: str) -> None:
        """A session has ended: the states bound to it can no longer be presented."""
        if not self._count.get(owner):
            return
        for state_id in [key for key, (_, who) in self._until.items() if who == owner]:
            self._drop(state_id)

    def sweep(self, now: float) -> None:
        """Forget what has expired (at the front; what is left waits for the next sweep or spend)."""
        self._sweep_front(now)

    def _sweep_front(self, now: float) -> None:
        """The oldest entries, while expired (entries come in about the order they expire)."""
        while self._until:
            state_id, (expiry, _) = next(iter(self._until.items()))
            if expiry > now:
                return
            self._drop(state_id)

    def _sweep_all(self, now: float) -> None:
        for state_id in [key for key, (expiry, _) in self._until.items() if expiry <= now]:
            self._drop(state_id)

    def _drop(self, state_id: str) -> None:
        _, owner = self._until.pop(state_id)
        self._count[owner] -= 1
        if not self._count[owner]:
            del self._count[owner]
