"""What the Streamable HTTP listener wraps around its app for each connection it accepts.

For each request: `scope["client"]` is the client's address (the one a trusted proxy names, by its PROXY
header or, per request, its forwarded header: client_address.py; a header it cannot be read from is
answered 400 here), so everything after (admission, [limits], policy, the audit, the log) keys by it; the
answer waits for the request's whole body (whole_body.py); and the request is served under a RequestCut
(request_cut.py), so a session that drops its client for leaving too much unread cuts it (one cut before
its answer started is answered 404 here: the session has ended).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import trio
from loguru import logger

from actors.frontends.admission import Admission
from actors.frontends.auth import Refused
from actors.frontends.http.request_cut import RequestCut, serving
from actors.frontends.http.responses import JSON_HEADERS, error_body, respond
from actors.frontends.http.sse import Receive, Scope, Send
from actors.frontends.http.whole_body import App, WholeBody
from actors.frontends.listening import shown
from actors.frontends.proxy_protocol import Peer

DROPPED: Final = "the session has ended: its client left more than max_unread_bytes unread; initialize again"


def per_connection(
    app: App, connection: trio.SocketStream, peer: Peer, admission: Admission, max_bytes: Callable[[], int]
) -> App:
    """`app` for the requests of one `connection` from `peer` (its PROXY header's client, or its own
    address), admitted by `admission`'s trusted proxies; a body past `max_bytes()` (read as each request
    comes) closes the connection instead of being read before an answer."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        scope["client"] = peer
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        body = WholeBody(scope, receive, send, max_bytes())
        try:
            scope["client"] = (admission.proxies.client_of(peer[0], scope["headers"]), 0)
        except Refused as refused:
            logger.warning(
                "refused {} {} from {}: HTTP 400: {}", scope["method"], scope["path"], shown(peer), refused
            )
            await respond(body.send, 400, error_body(None, refused.reason), JSON_HEADERS)
            return
        if scope["client"][0] == peer[0]:
            scope["client"] = peer  # its port too
        request = RequestCut(connection if body.http1 else None, lambda: body.started)
        with serving(request):
            await app(scope, body.receive, body.send)
        if request.done and not body.started:
            await respond(body.send, 404, error_body(None, DROPPED), JSON_HEADERS)

    return serve
