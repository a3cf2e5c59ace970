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

Every event has an id `<stream>.<n>`; a client whose connection dropped comes back with a GET and
`Last-Event-ID` and gets what it missed on that stream (resumability, spec 2025-11-25).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import orjson
import trio
from loguru import logger

from actors.framing.transport import receive_or_end
from actors.protocol.codec import is_id
from actors.protocol.messages import RequestId
from actors.protocol.on_behalf import OnBehalf

INBOUND_SIZE: Final = 16  # POSTed messages queued before a POST waits for the session's reader
REPLAY_EVENTS: Final = 256  # events kept per stream for a client that reconnects with Last-Event-ID
STANDALONE: Final = "s"  # the key of the standalone (GET) stream
CALL_RELATED: Final = frozenset({"notifications/message", "notifications/cancelled"})


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
    )

    def __init__(self, key: str) -> None:
        self.key = key
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
        if len(self.events) == self.events.maxlen and not self.overflowed:
            self.overflowed = True
            logger.warning("stream {}: no reader for {} events; dropping the oldest", self.key, REPLAY_EVENTS)
        self.last_number += 1
        self.events.append((self.last_number, frame))
        self.finished = last
        self._wake()

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

    def __init__(self, key: str, request_id: RequestId, progress_token: RequestId | None) -> None:
        super().__init__(key)
        self.request_id = request_id
        self.progress_token = progress_token
        self.traceparent: str | None = None  # the POST's own trace context header, as sent
        self.on_behalf: OnBehalf | None = None  # the POST's token and forwardable headers, for its calls


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
    Stops when: the session closes it (`aclose`): no more input, and every stream ends after what it has.
    Errors: `deliver` raises trio.ClosedResourceError once the session is closing."""

    def __init__(self) -> None:
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes](INBOUND_SIZE)
        self._requests: dict[tuple[type, Any], RequestStream] = {}
        self._by_progress: dict[tuple[type, Any], RequestStream] = {}
        self._streams: dict[str, EventStream] = {}
        self._numbers = iter(range(1, 1 << 62))
        self.standalone = EventStream(STANDALONE)
        self._streams[STANDALONE] = self.standalone
        self.closed = False
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
        """A stream for the answer to `request_id`, or None while a request with that id is in flight."""
        key = _id_key(request_id)
        if key in self._requests:
            return None
        stream = RequestStream(f"r{next(self._numbers)}", request_id, progress_token)
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
