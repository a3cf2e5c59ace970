"""The HTTP request served in this task, and how to cut it: a session that drops its client for leaving
too much unread (max_unread_bytes) cuts every request reading its streams, so nothing waits for a client
that does not read.

A request is served in a task of its own (hypercorn's); the listener's per-connection wrapper (edge.py)
runs it under a RequestCut and makes it `current_request()` for that task, so the transport can find the
requests that read its streams without the handlers passing it along.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import attrs
import trio

_CURRENT: ContextVar[RequestCut | None] = ContextVar("http_request", default=None)


@attrs.define(eq=False)
class RequestCut:
    """Owns: the cancel scope one HTTP request is served in.
    Receives: `cut`, from a transport whose session dropped its client.
    Sends: nothing; cancels the request and, when its answer is under way on an HTTP/1.x connection, closes
        that connection (a write blocked on a client that reads nothing ends only so: hypercorn shields it).
    Stops when: its request ends.
    Errors: none."""

    connection: trio.SocketStream | None  # HTTP/1.x: the one connection the request and its answer use
    answering: Callable[[], bool]  # whether its answer's start is sent (a write of it may be blocked)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    done: bool = False  # cut

    def cut(self) -> None:
        if self.done:
            return
        self.done = True
        self.scope.cancel()
        if self.connection is not None and self.answering():
            self.connection.socket.close()


def current_request() -> RequestCut | None:
    """The HTTP request this task serves (None outside one, or in a listener that does not cut)."""
    return _CURRENT.get()


@contextmanager
def serving(request: RequestCut) -> Iterator[None]:
    """Serve a request meanwhile, in its cancel scope, as `current_request()` of this task."""
    token = _CURRENT.set(request)
    try:
        with request.scope:
            yield
    finally:
        _CURRENT.reset(token)
