"""No response ends before its request's body has arrived, so a pooled HTTP/1.1 client never sends its
next request on a connection the server is closing.

An answer sent before the body is read (a refusal: 400, 401, 403, 404, 405, 413, 421, 429, 503...; or a
route that never reads one) used to end the exchange with the body still on its way: the server could not
start the connection's next exchange and closed it, without `Connection: close`, and a pooled client
(httpx) that had already picked that connection for its next request got "Server disconnected without
sending a response". Now, at the answer's start, the rest of the body is read and dropped, up to
`max_bytes` within DRAIN_S; a body that does not end by then (too big, too slow) gets `Connection: close`
on the answer instead (HTTP/1.x: HTTP/2 streams end alone), so the client opens a new connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from actors.frontends.http.sse import Receive, Scope, Send

DRAIN_S: Final = 2.0  # a refused body still on its way after this long: the connection closes instead
HTTP1: Final = frozenset({"1.0", "1.1"})  # where `Connection` means something (HTTP/2 forbids the header)
CLOSE: Final = (b"connection", b"close")

App = Callable[[Scope, Receive, Send], Awaitable[None]]


class WholeBody:
    """Owns: whether one HTTP request's body has arrived whole (its last chunk or the client's going).
    Receives: the app's `receive` calls (passed through, noted) and `send` calls.
    Sends: each message to the server; before the answer's start, reads and drops what is left of the body
        (at most `max_bytes`, within DRAIN_S), and says `Connection: close` when that was not all of it.
    Stops when: its request ends.
    Errors: none of its own."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
        self._receive = receive
        self._send = send
        self._max_bytes = max_bytes
        self.http1 = scope.get("http_version") in HTTP1
        self.complete = False  # the body's last chunk (or the client's going) has been received
        self.started = False  # the answer's start has been sent

    async def receive(self) -> dict[str, Any]:
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.complete = True
        return message

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            if not self.complete:
                await self._drain()
            if not self.complete and self.http1:
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            self.started = True
        await self._send(message)

    async def _drain(self) -> None:
        """Read and drop the rest of the body, while it is at most `max_bytes` and comes within DRAIN_S."""
        dropped = 0
        with trio.move_on_after(DRAIN_S):
            while not self.complete and dropped <= self._max_bytes:
                dropped += len((await self.receive()).get("body", b""))


def whole_bodies(app: App, max_bytes: Callable[[], int]) -> App:
    """`app`, each HTTP request of which is answered only once its body has arrived (WholeBody); a body past
    `max_bytes()` (read when the request comes: a reload's value counts) closes the connection instead."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = WholeBody(scope, receive, send, max_bytes())
        await app(scope, body.receive, body.send)

    return serve
