"""What one request and one client may cost the gateway in memory: a byte budget counted on what is kept.

A request is counted at its raw size (its frame's bytes: the cheap proxy; decoded into Python objects it
costs about 7 to 12 times that for ordinary JSON and up to 24 times for a frame of empty objects, see
docs/performance.md). A client is counted as the sum of its requests in flight and the bytes its parked
calls keep (session/bridge.py keeps them raw). A request past either budget is refused before any handler
or backend sees it, with an error that names the budget, its limit and what is used.

The ledger is the gateway's, shared by every session; a client is its token principal, else its session
(`client_of`). Each charge has one owner that gives it back: an InFlight entry when it leaves its table
(answered, cancelled, timed out, its session ended), a parked call when it closes (answered, failed,
expired, dropped, its session ended).
"""

from __future__ import annotations

from collections import deque
from typing import Final

import attrs
import orjson
import trio

from actors.config.schema import MAX_CLIENT_BYTES, MAX_REQUEST_BYTES, MAX_UNREAD_BYTES
from actors.protocol.errors import rpc_error
from actors.protocol.messages import Request, RpcError

OVER_BUDGET: Final = -32000  # the implementation's range, as max_inflight's: a resource limit


def client_of(subject: str | None, session: str) -> str:
    """Whom a request is counted against: its token principal (on every connection it uses), else its
    session."""
    return f"principal:{subject}" if subject is not None else f"session:{session}"


def request_bytes(request: Request) -> int:
    """A request's raw size: its frame's when it came alone, else (in a batch) its params encoded."""
    if request.size or request.params is None:
        return request.size
    try:
        return len(orjson.dumps(request.params))
    except TypeError:  # what no frame decodes to (an integer past 64 bits, made in code): its text
        return len(repr(request.params))


@attrs.define(eq=False)
class ByteBudget:
    """Owns: the bytes each client holds now (`used`: only clients holding some are in it).
    Receives: checks (`refusal`), charges (`keep`: a request taken, a parked call's answers), releases.
    Stops when: the gateway does; every owner releases what it charged, so `used` empties when idle."""

    max_request_bytes: int = MAX_REQUEST_BYTES
    max_client_bytes: int = MAX_CLIENT_BYTES
    max_unread_bytes: int = MAX_UNREAD_BYTES  # answers waiting for one session's client (session/inflight.py)
    used: dict[str, int] = attrs.field(factory=dict)

    def limit(
        self, max_request_bytes: int, max_client_bytes: int, max_unread_bytes: int | None = None
    ) -> None:
        """The config's budgets (at start and on a reload: what is held stays, new requests meet them)."""
        self.max_request_bytes, self.max_client_bytes = max_request_bytes, max_client_bytes
        if max_unread_bytes is not None:
            self.max_unread_bytes = max_unread_bytes

    def refusal(self, client: str, size: int) -> RpcError | None:
        """Why a request of `size` bytes may not be taken for `client`, or None."""
        if size > self.max_request_bytes:
            return over_budget("max_request_bytes", self.max_request_bytes, size, "this request")
        used = self.used.get(client, 0)
        if used + size > self.max_client_bytes:
            return over_budget("max_client_bytes", self.max_client_bytes, used + size, "this client")
        return None

    def keep(self, client: str, size: int) -> None:
        """Charge bytes the client now holds; they count against its next requests until released."""
        if size > 0:
            self.used[client] = self.used.get(client, 0) + size

    def release(self, client: str, size: int) -> None:
        if size <= 0:
            return
        left = self.used.get(client, 0) - size
        if left > 0:
            self.used[client] = left
        else:
            self.used.pop(client, None)


def over_budget(budget: str, limit: int, used: int, whose: str) -> RpcError:
    message = f"Request refused: {whose} would hold {used} bytes, over {budget} ({limit})"
    return rpc_error(OVER_BUDGET, message, budget=budget, limit=limit, used=used)


@attrs.define(eq=False)
class QueuedBytes:
    """Owns: the sizes of a session's frames decoded and waiting in its dispatcher's inbox, oldest first.
    Receives: the reader's `reserve` before it decodes a frame, `queued` or `release` after; the
        dispatcher's `taken` for each message it takes from its inbox.
    Sends: nothing; the reader waits while a frame would take what waits past one request's budget, so a
        busy dispatcher holds at most one largest request decoded ahead of it, not a full inbox of them
        (what the reader waits on is the transport's, raw).
    Stops when: its session does."""

    budget: ByteBudget
    sizes: deque[int] = attrs.field(factory=deque)
    total: int = 0
    _room: trio.Event | None = None

    async def reserve(self, size: int) -> None:
        while self.total and self.total + size > self.budget.max_request_bytes:
            if self._room is None:
                self._room = trio.Event()
            await self._room.wait()
        self.total += size

    def queued(self, size: int) -> None:
        """The frame reserved went into the inbox as a message."""
        self.sizes.append(size)

    def release(self, size: int) -> None:
        self.total -= size
        if self._room is not None:
            self._room.set()
            self._room = None

    def taken(self) -> None:
        """The dispatcher took the oldest message from its inbox."""
        if self.sizes:
            self.release(self.sizes.popleft())
