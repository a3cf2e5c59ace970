"""The Transport of a session that serves one modern POST: one frame in, one stream out.

The session's reader gets the request's frame, then nothing until the session ends (or, when the client
closed the response before the answer, a notifications/cancelled for the request, as a client would send
it). Everything the writer files goes on one stream: the notifications about the call (progress, the log
lines it asked for), then its answer, which ends the stream. A request for the client (the era has none) is
dropped: a modern response stream never carries one.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from typing import Final

import orjson
import trio
from loguru import logger

from actors.frontends.http.transport import EventStream, FilingTransport
from actors.protocol.codec import clip
from actors.protocol.messages import RequestId
from actors.protocol.on_behalf import OnBehalf

INBOUND_SIZE: Final = 2  # the request, and a cancel of it


class OneRequestTransport(FilingTransport):
    """Owns: the frames for the session's reader, and the stream of what is for the client.
    Receives: the writer's frames (`send_many`, `send_nowait`); `give_up` when the client went away first.
    Sends: the request's frame to the reader, then a cancel of it if the client gave up; events on `stream`.
    Stops when: the session closes it (`aclose`): the stream ends with what it has.
    Errors: none; a frame that comes after the answer is dropped.
    """

    def __init__(self, frame: bytes, request_id: RequestId) -> None:
        self.request_id = request_id
        self.stream = EventStream("m")
        self.error_code: int | None = None  # the answer's, when it is an error
        self.traceparent: str | None = None  # the POST's own trace context header, as sent
        self.on_behalf: OnBehalf | None = None  # the POST's token and forwardable headers, for its calls
        self._inbound_send, self._inbound = trio.open_memory_channel[bytes](INBOUND_SIZE)
        self._inbound_send.send_nowait(frame)

    # --- the session's side (and receive, send, send_many: FilingTransport's) --------------------------

    def send_nowait(self, frames: Sequence[bytes]) -> bool:
        for frame in frames:  # filing never waits
            self._file(frame)
        return True

    async def aclose(self) -> None:
        self._inbound_send.close()
        self._inbound.close()
        self.stream.finish()

    # --- the frontend's side --------------------------------------------------------------------------

    def http_context(self, request_id: RequestId) -> str | None:
        """The traceparent header of the POST (its request's span links to it)."""
        return self.traceparent if request_id == self.request_id else None

    def on_behalf_of(self, request_id: RequestId) -> OnBehalf | None:
        """What the POST gives its request's calls: its token, its forwardable headers."""
        return self.on_behalf if request_id == self.request_id else None

    def give_up(self, reason: str) -> None:
        """The client closed the response before the answer: the session hears the request cancelled, and
        its input ends (it ends once the cancel has reached the backend)."""
        params = {"requestId": self.request_id, "reason": reason}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        with suppress(trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            self._inbound_send.send_nowait(orjson.dumps(cancel))
        self._inbound_send.close()

    # --- filing ---------------------------------------------------------------------------------------

    def _file(self, frame: bytes) -> None:
        if self.stream.finished:
            return  # after the answer, or after the session ended: nobody reads it
        message = orjson.loads(frame)
        if "method" not in message:  # the answer: the last event
            error = message.get("error")
            self.error_code = error.get("code") if isinstance(error, dict) else None
            self.stream.push(frame, last=True)
        elif "id" in message:
            logger.warning(
                "dropped a {} request for a client of protocol 2026-07-28", clip(str(message["method"]))
            )
        else:
            self.stream.push(frame)
