"""Server-sent events for the Streamable HTTP frontend: the framing, writing a stream as its events come,
and resumption.

Each event is `id: <stream>.<n>` (not for a modern request: nothing resumes), `event: message` and `data:`
one JSON-RPC message. With resumption on
(resume_window_s > 0) a stream opens with a priming event: an id to resume from and the `retry` delay. A
quiet stream gets a comment every KEEPALIVE_S. A client whose connection dropped comes back with a GET and
Last-Event-ID and gets the rest of that stream; a request stream nobody comes back for within
resume_window_s has its call cancelled at the backend.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Final

import trio
from loguru import logger

from actors.frontends.auth import Refused
from actors.frontends.http.sessions import HttpSession
from actors.frontends.http.transport import EventStream, HttpSessionTransport, RequestStream

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

RETRY_MS: Final = 1000  # the SSE retry field: how long a client waits before it reconnects
KEEPALIVE_S: Final = 15.0  # an SSE comment this often on a quiet stream, so proxies keep it open
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def stream_to_read(transport: HttpSessionTransport, last_event_id: str | None) -> tuple[EventStream, int]:
    """The stream a GET reads and the cursor it starts after: the one Last-Event-ID points into, else the
    standalone stream after what was written of it."""
    if last_event_id:
        found = transport.stream_for(last_event_id)
        if found is None:
            raise Refused(400, "Last-Event-ID names no stream of this session (it ended or expired)")
        stream, cursor = found
    else:
        stream, cursor = transport.standalone, transport.standalone.delivered
    if stream.attached:
        raise Refused(409, "that stream is already being read; one reader per stream")
    return stream, cursor


async def until_disconnect(receive: Receive, work: Callable[[], Awaitable[object]]) -> bool:
    """Run `work` while watching for the client going away: True when it finished, False when the client
    went first (then `work` is cancelled)."""
    finished = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await work()
        finished = True
        nursery.cancel_scope.cancel()
    return finished


async def pump(
    stream: EventStream,
    cursor: int,
    receive: Receive,
    send: Send,
    *,
    prime: bool,
    resumable: bool,
    numbered: bool = True,
) -> bool:
    """Write `stream`'s events after `cursor` as they come (each with its id when `numbered`); True once it
    is finished and written, False when the client went away first."""

    async def write() -> None:
        nonlocal cursor
        if prime and resumable:  # spec: an id to resume from, and how long to wait before trying
            priming = f"id: {stream.event_id(cursor)}\nretry: {RETRY_MS}\ndata: \n\n"
            await send({"type": "http.response.body", "body": priming.encode(), "more_body": True})
        while not stream.done_after(cursor):
            with trio.move_on_after(KEEPALIVE_S) as quiet:
                await stream.wait_beyond(cursor)
            if quiet.cancelled_caught:
                await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                continue
            chunks = []
            for number, frame in stream.after(cursor):
                if numbered:
                    chunks.append(b"id: %s\n" % stream.event_id(number).encode())
                chunks.append(b"event: message\ndata: %s\n\n" % frame)
                cursor = number
            await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
            stream.wrote(cursor)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return await until_disconnect(receive, write)


def released(
    entry: HttpSession, stream: RequestStream, *, finished: bool, window_s: float, nursery: trio.Nursery
) -> None:
    """The client stopped reading a request's stream: forgotten when it was written to its end; else the
    call is cancelled at the backend, at once or after `window_s` unless a GET with Last-Event-ID picks the
    stream up (in `nursery`)."""
    if finished or (stream.finished and stream.delivered >= stream.last_number):
        entry.transport.forget(stream)
        return
    if window_s <= 0 or entry.transport.closed:
        _cancel(entry, stream, nursery)
        return
    nursery.start_soon(_cancel_unless_resumed, entry, stream, stream.last_number, window_s, nursery)


async def _cancel_unless_resumed(
    entry: HttpSession, stream: RequestStream, seen: int, window_s: float, nursery: trio.Nursery
) -> None:
    await trio.sleep(window_s)
    if stream.attached:
        return
    if stream.finished:
        entry.transport.forget(stream)  # answered, but nobody came back for it
    elif stream.delivered <= seen:
        _cancel(entry, stream, nursery)


def _cancel(entry: HttpSession, stream: RequestStream, nursery: trio.Nursery) -> None:
    with logger.contextualize(session=entry.label):
        logger.info("the client closed the stream of request {!r}; cancelling it", stream.request_id)
    frame = entry.transport.cancel_frame(stream, "the client closed its response stream")
    nursery.start_soon(_deliver_quietly, entry.transport, frame)


async def _deliver_quietly(transport: HttpSessionTransport, frame: bytes) -> None:
    with suppress(trio.ClosedResourceError, trio.BrokenResourceError):  # ended: nothing left to cancel
        await transport.deliver(frame)
