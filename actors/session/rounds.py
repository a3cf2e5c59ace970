"""The rounds of one call, and the states the gateway hands out for them, spent once.

A call that needs the client's input takes rounds: the first request, then each retry (a modern client's,
carrying the requestState the gateway sealed; or one the shim makes for a legacy client). Every round is
the same call to the middleware and the audit: one call id, a round number counted from 1.

A sealed state the gateway wraps around a modern backend's own is good for one retry: its id is remembered
as spent until the state expires anyway, so a replay is refused. The table is the gateway's, and no one
client fills it for the others: a client (its principal, on every session it opens; without a token, its
address, as sessions are counted) holds at most MAX_SPENT_PER_CLIENT ids and past that its own new retries
are refused until its oldest states expire. When the whole table is full, room is made from the client
holding the most: its oldest id goes, and so that state cannot be replayed, every state of that client
expiring no later is refused from then on (its `floor`). A session's ids go when the session ends.
"""

from __future__ import annotations

import math
import secrets
from typing import TYPE_CHECKING, Final

import attrs

if TYPE_CHECKING:
    from actors.session.approval_asks import Verdict

MAX_SPENT: Final = 65_536  # spent state ids remembered gateway-wide
MAX_SPENT_PER_CLIENT: Final = 2048  # of those, one client's (1/32): several clients at their cap fill it
ANONYMOUS: Final = "anonymous"  # whose a state is when nothing tells its client apart (unit tests)
USED: Final = "used already"
FORGOTTEN: Final = "used already, or older than states of this client dropped from a full table"
OVER_CLIENT_CAP: Final = "too many retries pending for this client: start the call again later"


def new_call_id() -> str:
    return secrets.token_hex(8)


@attrs.define(slots=True)
class CallRound:
    """Which call a request is a round of, and which round: 1 for the first request."""

    call_id: str = attrs.field(factory=new_call_id)
    number: int = 1
    verdict: Verdict | None = None  # the user's answer to the gateway's approval this round carries


@attrs.frozen(slots=True)
class _Spent:
    expiry: float
    client: str
    session: str | None


@attrs.define(kw_only=True)
class SpentStates:
    """Owns: the ids of states spent and not yet expired (each with its expiry, client and session), each
    client's ids oldest first, and the floors of clients a full table took ids from.
    Receives: a retry's state id (`spend`), a session's end (`forget_session`), sweeps.
    Stops when: the gateway does; an id leaves at its expiry (swept as new ones come and as sessions end), at
        its session's end, or to make room (the fullest client's oldest); a floor leaves once passed."""

    total: int = MAX_SPENT
    per_client: int = MAX_SPENT_PER_CLIENT
    _until: dict[str, _Spent] = attrs.field(factory=dict)  # state id -> what it was spent as; oldest first
    _of_client: dict[str, dict[str, None]] = attrs.field(factory=dict)  # client -> its ids, oldest first
    _of_session: dict[str, set[str]] = attrs.field(factory=dict)
    _holding: dict[int, dict[str, None]] = attrs.field(factory=dict)  # count -> the clients holding that many
    _most: int = 0  # the highest count in `_holding`
    _floor: dict[str, float] = attrs.field(factory=dict)  # client -> its states expiring by then are refused

    def __len__(self) -> int:
        return len(self._until)

    def held_by(self, client: str) -> int:
        return len(self._of_client.get(client, ()))

    def spend(
        self, state_id: str, *, client: str, session: str | None, expiry: float, now: float
    ) -> str | None:
        """Mark a state spent; None when it was fresh, else why the retry is refused."""
        self._sweep_front(now)
        if state_id in self._until:
            return USED
        if expiry <= self._floor.get(client, -math.inf):
            return FORGOTTEN
        if self.held_by(client) >= self.per_client:
            self._sweep_client(client, now)
            if self.held_by(client) >= self.per_client:
                return OVER_CLIENT_CAP
        while len(self._until) >= self.total:
            self._drop_oldest_of_fullest()
        self._until[state_id] = _Spent(expiry, client, session)
        self._of_client.setdefault(client, {})[state_id] = None
        if session is not None:
            self._of_session.setdefault(session, set()).add(state_id)
        self._recount(client, +1)
        return None

    def forget_session(self, session: str) -> None:
        """A session has ended: the states bound to it can no longer be presented."""
        for state_id in self._of_session.pop(session, ()):
            self._drop(state_id)

    def sweep(self, now: float) -> None:
        """Forget what has expired (at the front; what is left waits for the next sweep or spend)."""
        self._sweep_front(now)

    def _sweep_front(self, now: float) -> None:
        """The oldest entries and floors, while passed (each comes in about the order it passes: one TTL;
        one that did not waits for the next sweep, its client's cap or its session's end)."""
        while self._until:
            state_id, spent = next(iter(self._until.items()))
            if spent.expiry > now:
                break
            self._drop(state_id)
        while self._floor:
            client, floor = next(iter(self._floor.items()))
            if floor > now:
                return
            del self._floor[client]  # every state it refused has expired anyway

    def _sweep_client(self, client: str, now: float) -> None:
        """One client's oldest entries, while expired: what its cap may be waiting on."""
        mine = self._of_client.get(client, {})
        while mine:
            state_id = next(iter(mine))
            if self._until[state_id].expiry > now:
                return
            self._drop(state_id)

    def _drop_oldest_of_fullest(self) -> None:
        """Room in a full table, from the client holding the most: its oldest id goes, and its floor rises to
        that id's expiry, so the state cannot be replayed now that it is forgotten."""
        fullest = next(iter(self._holding[self._most]))
        state_id = next(iter(self._of_client[fullest]))
        floor = max(self._floor.pop(fullest, -math.inf), self._until[state_id].expiry)
        self._floor[fullest] = floor  # last in: the floors stay in about the order they pass
        if len(self._floor) > self.total:  # a floor per client that ever held an id: as many as ids
            del self._floor[next(iter(self._floor))]  # the one set longest ago (about the lowest)
        self._drop(state_id)

    def _drop(self, state_id: str) -> None:
        spent = self._until.pop(state_id)
        mine = self._of_client[spent.client]
        del mine[state_id]
        if not mine:
            del self._of_client[spent.client]
        if spent.session is not None:
            ids = self._of_session.get(spent.session)
            if ids is not None:
                ids.discard(state_id)
                if not ids:
                    del self._of_session[spent.session]
        self._recount(spent.client, -1)

    def _recount(self, client: str, change: int) -> None:
        """Move `client` to the count it holds now (it has just changed by `change`)."""
        now = self.held_by(client)
        before = now - change
        if before:
            bucket = self._holding[before]
            del bucket[client]
            if not bucket:
                del self._holding[before]
        if now:
            self._holding.setdefault(now, {})[client] = None
        self._most = max(self._most, now)
        while self._most and self._most not in self._holding:
            self._most -= 1
