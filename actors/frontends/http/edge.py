"""What the Streamable HTTP listener wraps around its app for each connection it accepts.

For each HTTP request: the answer waits for the request's whole body (whole_body.py), and the request is
served under a RequestCut (request_cut.py), so a session that drops its client for leaving too much unread
cuts it; one cut before its answer started is answered 404 here (the session has ended).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio

from actors.frontends.http.request_cut import RequestCut, serving
from actors.frontends.http.responses import JSON_HEADERS, error_body, respond
from actors.frontends.http.sse import Receive, Scope, Send
from actors.frontends.http.whole_body import App, WholeBody

DROPPED: Final = "the session has ended: its client left more than max_unread_bytes unread; initialize again"


def per_connection(app: App, connection: trio.SocketStream, max_bytes: Callable[[], int]) -> App:
    """`app` for the requests of one `connection`; a body past `max_bytes()` (read as each request comes)
    closes the connection instead of being read before an answer."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = WholeBody(scope, receive, send, max_bytes())
        request = RequestCut(connection if body.http1 else None, lambda: body.started)
        with serving(request):
            await app(scope, body.receive, body.send)
        if request.done and not body.started:
            await respond(body.send, 404, error_body(None, DROPPED), JSON_HEADERS)

    return serve
