"""The numbered SSE events of one stream of an HTTP session, kept until an HTTP response writes them, and
the tally of what a session's streams keep unwritten (counted against its max_unread_bytes).

Each event is one frame; a stream keeps the last REPLAY_EVENTS for a client that reconnects with
Last-Event-ID. An event counts in its stream's tally from its push until a response has written it
(`wrote`), it is pushed out of a full stream, or the stream is given up (`uncount`): once, whichever comes
first.
"""

from __future__ import annotations

from collections import deque
from typing import Final

import trio
from loguru import logger

from actors.framing.transport import UnreadLedger
from actors.protocol.codec import compact
from actors.protocol.messages import RequestId
from actors.protocol.on_behalf import OnBehalf

REPLAY_EVENTS: Final = 256  # events kept per stream for a client that reconnects with Last-Event-ID


class Tally:
    """The bytes a session's streams keep and have not written to its client, counted in its ledger."""

    def __init__(self) -> None:
        self.unwritten = 0
        self.ledger: UnreadLedger | None = None

    def add(self, size: int) -> None:
        self.unwritten += size
        if self.ledger is not None:
            if size >= 0:
                self.ledger.hold(size)
            else:
                self.ledger.written(-size)


class EventStream:
    """The numbered SSE events of one stream. Readers keep a cursor, so a reader that reconnects resumes
    where it was; `finished` once the last event (a response) is in."""

    __slots__ = (
        "_changed",
        "attached",
        "delivered",
        "events",
        "finished",
        "key",
        "last_number",
        "overflowed",
        "tally",
    )

    def __init__(self, key: str, tally: Tally | None = None) -> None:
        self.key = key
        self.tally = tally  # where its unwritten bytes count (None: nowhere, or no longer)
        self.events: deque[tuple[int, bytes]] = deque(maxlen=REPLAY_EVENTS)
        self.last_number = 0
        self.delivered = 0  # the highest number a reader has written out
        self.finished = False
        self.attached = 0  # readers connected now
        self.overflowed = False  # said once in the log, not at every event lost
        self._changed = trio.Event()

    def push(self, frame: bytes, *, last: bool = False) -> None:
        if self.finished:
            return
        if len(self.events) == self.events.maxlen:
            number, oldest = self.events[0]
            if number > self.delivered:  # pushed out unwritten: it no longer waits for the client
                self._count(-len(oldest))
            if not self.overflowed:
                self.overflowed = True
                logger.warning(
                    "stream {}: no reader for {} events; dropping the oldest", self.key, REPLAY_EVENTS
                )
        self.last_number += 1
        self.events.append((self.last_number, compact(frame)))  # kept until read, and for a resume
        self._count(len(frame))
        self.finished = last
        self._wake()

    def wrote(self, cursor: int) -> None:
        """Its events up to `cursor` are written to the client: they no longer count as unread."""
        if cursor <= self.delivered:
            return
        self._count(-sum(len(frame) for number, frame in self.events if self.delivered < number <= cursor))
        self.delivered = cursor

    def uncount(self) -> None:
        """Nobody will write it any more: what it keeps unwritten no longer counts, now or later."""
        self._count(-sum(len(frame) for number, frame in self.events if number > self.delivered))
        self.tally = None

    def _count(self, size: int) -> None:
        if self.tally is not None and size:
            self.tally.add(size)

    def finish(self) -> None:
        self.finished = True
        self._wake()

    def after(self, cursor: int) -> list[tuple[int, bytes]]:
        return [event for event in self.events if event[0] > cursor]

    def done_after(self, cursor: int) -> bool:
        """Nothing more will come for a reader at `cursor`."""
        return self.finished and cursor >= self.last_number

    async def wait_beyond(self, cursor: int) -> None:
        """Until there is an event after `cursor` or the stream is finished."""
        while cursor >= self.last_number and not self.finished:
            await self._changed.wait()

    def event_id(self, number: int) -> str:
        return f"{self.key}.{number}"

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()


class RequestStream(EventStream):
    __slots__ = ("on_behalf", "progress_token", "request_id", "traceparent")

    def __init__(
        self, key: str, request_id: RequestId, progress_token: RequestId | None, tally: Tally | None = None
    ) -> None:
        super().__init__(key, tally)
        self.request_id = request_id
        self.progress_token = progress_token
        self.traceparent: str | None = None  # the POST's own trace context header, as sent
        self.on_behalf: OnBehalf | None = None  # the POST's token and forwardable headers, for its calls
