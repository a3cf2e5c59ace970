"""One Streamable HTTP session as a Transport, so the session's reader, dispatcher and writer are the same
actors as for stdio and WebSocket.

Frames in: each POST hands its message to `deliver`; `receive` gives them to the reader in order.
Frames out: the writer's `send_many` files each message on an SSE stream, never on two:
  - a response on the stream of the POST that carried its request (which then ends);
  - progress on the stream of the request that carried its progressToken;
  - a backend's request for the client (sampling, elicitation, roots) and log messages on the oldest
    request stream a client is reading, since they are about a call in flight; else on the standalone
    stream (the client's GET);
  - everything else (list_changed, resources/updated) on the standalone stream.
The standalone stream keeps what arrives while no GET is open, up to REPLAY_EVENTS, for the next GET.

What a stream keeps and has not yet written to its client counts against the session's max_unread_bytes
(framing.transport.HoldsFrames) from the moment the writer files it until an HTTP response has written it
(or it is dropped: the stream forgotten, its oldest events pushed out). A client past the budget is dropped
as on WebSocket: every HTTP request reading one of the session's streams is cut (request_cut.py). A session
has at most `max_streams` request streams at once (answers being waited for, written, or kept for a client
to resume): a POST past it gets 429.

Every event has an id `<stream>.<n>`; a client whose connection dropped comes back with a GET and
`Last-Event-ID` and gets what it missed on that stream (resumability, spec 2025-11-25).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import orjson
import trio
from loguru import logger

from actors.config.listener_schema import MAX_STREAMS_PER_SESSION
from actors.framing.transport import UnreadLedger, receive_or_end
from actors.frontends.auth import Refused, RequestRefused
from actors.frontends.http.event_stream import REPLAY_EVENTS as REPLAY_EVENTS
from actors.frontends.http.event_stream import EventStream as EventStream
from actors.frontends.http.event_stream import RequestStream as RequestStream
from actors.frontends.http.event_stream import Tally
from actors.frontends.http.request_cut import RequestCut, current_request
from actors.protocol.codec import is_id
from actors.protocol.messages import RequestId
from actors.protocol.on_behalf import OnBehalf

INBOUND_SIZE: Final = 16  # POSTed messages queued before a POST waits for the session's reader
STANDALONE: Final = "s"  # the key of the standalone (GET) stream
CALL_RELATED: Final = frozenset({"notifications/message", "notifications/cancelled"})
STREAMS_RETRY_S: Final = 5  # a session at max_streams: the client may try again after this long


def _id_key(value: Any) -> tuple[type, Any]:
    return (type(value), value)  # 1 and "1" are different ids


class FilingTransport:
    """The session's side of an HTTP transport: frames in from a queue the frontend fills, each frame out
    filed on a stream by the subclass's `_file` (which never waits: the HTTP side writes streams out at
    its own pace)."""

    _inbound: trio.MemoryReceiveChannel[bytes]

    async def receive(self) -> bytes | None:
        return await receive_or_end(self._inbound)

    async def send(self, frame: bytes) -> None:
        self._file(frame)

    async def send_many(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            self._file(frame)

    def _file(self, frame: bytes) -> None:
        raise NotImplementedError


class HttpSessionTransport(FilingTransport):
    """Owns: the session's streams and its inbound queue.
    Receives: POSTed frames (`deliver`), the writer's frames (`send_many`).
    Sends: frames to the reader (`receive`), events to whoever reads a stream.
    Stops when: the session closes it (`aclose`): no more input, and every stream ends after what it has;
        or drops its client (`drop_client`): every HTTP request reading a stream is cut.
    Errors: `deliver` raises trio.ClosedResourceError once the session is closing; `open_request` a
        RequestRefused (429) past `max_streams`."""

    def __init__(self, max_streams: int = MAX_STREAMS_PER_SESSION) -> None:
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes](INBOUND_SIZE)
        self._requests: dict[tuple[type, Any], RequestStream] = {}
        self._by_progress: dict[tuple[type, Any], RequestStream] = {}
        self._streams: dict[str, EventStream] = {}
        self._numbers = iter(range(1, 1 << 62))
        self.tally = Tally()
        self.max_streams = max_streams
        self.standalone = EventStream(STANDALONE, self.tally)
        self._streams[STANDALONE] = self.standalone
        self.closed = False
        self.dropped = False  # its client was dropped for leaving too much unread
        self._readers: set[RequestCut] = set()  # the HTTP requests reading its streams now
        # [fleet]: standalone events while no GET reads them here go to the replica whose GET does (given
        # the frame and where to keep it if no replica took it)
        self.relay: Callable[[bytes, Callable[[bytes], None]], None] | None = None

    # --- the session's side ---------------------------------------------------------------------------

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        return False  # the writer files every frame: one place decides which stream it goes to

    async def aclose(self) -> None:
        """The session has ended: no more input; every stream ends after what it has."""
        self.closed = True
        self._inbound_send.close()
        for stream in self._streams.values():
            stream.finish()

    def count_unread_in(self, ledger: UnreadLedger) -> None:
        """HoldsFrames: what the streams keep unwritten counts in the session's `ledger`."""
        self.tally.ledger = ledger
        if self.tally.unwritten:
            ledger.hold(self.tally.unwritten)

    def drop_client(self) -> None:
        """HoldsFrames: the client left more unread than max_unread_bytes. Nothing kept counts any more,
        and every HTTP request reading a stream of the session is cut (a write blocked on a client that
        reads nothing too: its connection is closed), so nothing is kept for it; requests that come later
        are cut as they start reading."""
        self.dropped = True
        for stream in self._streams.values():
            stream.uncount()
        for reader in list(self._readers):
            reader.cut()

    # --- the frontend's side --------------------------------------------------------------------------

    async def deliver(self, frame: bytes) -> None:
        await self._inbound_send.send(frame)

    def end_input(self) -> None:
        """The client is done (DELETE, idle): the reader sees the end of the stream."""
        self._inbound_send.close()

    def quiet(self) -> bool:
        """No request is unanswered and no request's stream waits for a reader: ending the session now
        would lose its client nothing."""
        return not self._requests and len(self._streams) == 1  # the standalone stream alone

    def open_request(self, request_id: RequestId, progress_token: RequestId | None) -> RequestStream | None:
        """A stream for the answer to `request_id`, or None while a request with that id is in flight;
        RequestRefused (429, Retry-After) when the session has `max_streams` request streams already."""
        key = _id_key(request_id)
        if key in self._requests:
            return None
        if len(self._streams) - 1 >= self.max_streams:  # the standalone stream is not one of them
            reason = (
                f"this session has {self.max_streams} requests open or unread (max_streams_per_session); "
                f"read their answers, or try again in {STREAMS_RETRY_S}s"
            )
            retry = [(b"retry-after", str(STREAMS_RETRY_S).encode())]
            raise RequestRefused(Refused(429, reason, retry), request_id)
        stream = RequestStream(f"r{next(self._numbers)}", request_id, progress_token, self.tally)
        self._requests[key] = stream
        self._streams[stream.key] = stream
        if progress_token is not None:
            self._by_progress[_id_key(progress_token)] = stream
        return stream

    def http_context(self, request_id: RequestId) -> str | None:
        """The traceparent header of the POST that carried `request_id` (its span links to it)."""
        stream = self._requests.get(_id_key(request_id))
        return stream.traceparent if stream is not None else None

    def on_behalf_of(self, request_id: RequestId) -> OnBehalf | None:
        """What the POST that carried `request_id` gives its calls: its token, its forwardable headers."""
        stream = self._requests.get(_id_key(request_id))
        return stream.on_behalf if stream is not None else None

    def forget(self, stream: EventStream) -> None:
        """Nobody will read `stream` again; an answer that still comes for it is dropped."""
        if isinstance(stream, RequestStream):
            self._drop_routes(stream)
        if stream is not self.standalone:
            self._streams.pop(stream.key, None)
            stream.uncount()

    @contextmanager
    def reading(self, stream: EventStream) -> Iterator[None]:
        """An HTTP request reads `stream` meanwhile (messages about its call may go there); the request is
        cut if the session drops its client (at once if it has)."""
        stream.attached += 1
        reader = current_request()
        if reader is not None:
            self._readers.add(reader)
            if self.dropped:
                reader.cut()
        try:
            yield
        finally:
            stream.attached -= 1
            self._readers.discard(reader)  # type: ignore[arg-type]

    def cancelled(self, params: object) -> None:
        """The client cancelled a request (`params` of its notifications/cancelled, as it sent them): no
        answer will come, so that request's stream ends with what it has. Params without an id of a
        request are ignored here: the session drops the notification and logs why."""
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not is_id(request_id):
            return
        stream = self._requests.get(_id_key(request_id))
        if stream is not None:
            self._drop_routes(stream)
            stream.finish()

    def stream_for(self, event_id: str) -> tuple[EventStream, int] | None:
        """The stream a Last-Event-ID points into and the cursor after it, or None when it is unknown."""
        key, _, number = event_id.rpartition(".")
        stream = self._streams.get(key)
        if stream is None or not number.isdigit():
            return None
        return stream, int(number)

    def cancel_frame(self, stream: RequestStream, reason: str) -> bytes:
        """notifications/cancelled for the request `stream` answers, as the client would have sent it."""
        self.forget(stream)
        params = {"requestId": stream.request_id, "reason": reason}
        return orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params})

    # --- filing ---------------------------------------------------------------------------------------

    def _file(self, frame: bytes) -> None:
        message = orjson.loads(frame)
        method = message.get("method")
        if method is None:  # a response
            stream = self._requests.get(_id_key(message.get("id")))
            if stream is None:
                logger.debug("dropped an answer nobody waits for (its stream was cancelled)")
                return
            self._drop_routes(stream)
            stream.push(frame, last=True)
            return
        if method == "notifications/progress":
            token = (message.get("params") or {}).get("progressToken")
            stream = self._by_progress.get(_id_key(token))
            if stream is not None:
                stream.push(frame)
                return
        if "id" in message or method in CALL_RELATED or method == "notifications/elicitation/complete":
            target = self._read_request_stream(self._requests.values())
            if target is not None:
                target.push(frame)
                return
        if self.relay is not None and not self.standalone.attached:
            self.relay(frame, self.standalone.push)
            return
        self.standalone.push(frame)

    def _read_request_stream(self, streams: Iterable[RequestStream]) -> RequestStream | None:
        return next((stream for stream in streams if stream.attached and not stream.finished), None)

    def _drop_routes(self, stream: RequestStream) -> None:
        if self._requests.get(_id_key(stream.request_id)) is stream:
            del self._requests[_id_key(stream.request_id)]
        if stream.progress_token is not None:
            token = _id_key(stream.progress_token)
            if self._by_progress.get(token) is stream:
                del self._by_progress[token]
