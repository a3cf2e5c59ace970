"""POSTs of the 2026-07-28 era on the Streamable HTTP front: each one a request served on its own.

No session id (an Mcp-Session-Id header is ignored), no initialize, no GET stream. A modern POST passes the
checks of ladder.py, then those that read the catalog: a method whose feature no backend offers now is
unknown (404 -32601), and a tools/call's Mcp-Param-* headers must agree with its arguments (400 -32020).
It is then served by a gateway Session of its own (HttpSessions.open_one_request), counted against the
listener's session limits (503, 429). Its answer goes out as JSON when it is the first thing for the client,
else on an SSE stream of the call's notifications and then the answer, with no event ids and no priming
event (nothing resumes). In-band errors ride a 200, but for -32021 (a capability the client did not
declare), which is 400 whenever it is not behind notifications already sent. The session is stopped once
the answer is written; a client that closes the response before it cancels the call, at the backend too.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Final

import attrs
import trio
from loguru import logger

from actors.catalog import CatalogView
from actors.frontends.auth import Principal, Refused
from actors.frontends.http import ladder
from actors.frontends.http.fleet_retries import Retry, release, served_by_fleet
from actors.frontends.http.one_request import OneRequestTransport
from actors.frontends.http.param_headers import DeclaredHeaders, param_mismatch
from actors.frontends.http.responses import JSON_HEADERS, EdgeRefusal, RequestRefused, respond
from actors.frontends.http.sessions import HttpSessions
from actors.frontends.http.sse import SSE_HEADERS, Receive, Send, pump, until_disconnect
from actors.protocol.codec import clip
from actors.protocol.eras import http_status
from actors.protocol.errors import INTERNAL_ERROR, rpc_error
from actors.protocol.messages import Message, Request
from actors.protocol.on_behalf import on_behalf
from actors.routes import RouteState
from actors.session.discover import undeclared
from actors.session.session import Session

CLIENT_CLOSED: Final = "the client closed its response before the answer"
UNANSWERED: Final = rpc_error(
    INTERNAL_ERROR, "Internal error: the gateway ended the request without answering it"
)


@attrs.define(eq=False, kw_only=True)
class ModernPosts:
    """Owns: what each published tool declares as Mcp-Param headers (read once per tool list).
    Receives: modern POSTs from the app (`serve`).
    Sends: each request that passes the checks to a session of its own; its answer to the client.
    Stops when: never itself; each request ends with its answer, or when its client goes away.
    Errors: a request that fails a check gets its refusal (status, JSON-RPC error naming its id); Refused
        (as RequestRefused) past the session limits.
    """

    sessions: HttpSessions
    declared: DeclaredHeaders = attrs.field(factory=DeclaredHeaders)

    async def serve(
        self,
        headers: Mapping[str, str],
        message: Message,
        frame: bytes,
        client: tuple[Principal | None, str],
        receive: Receive,
        send: Send,
        route: RouteState | None = None,
    ) -> None:
        """One modern POST, `message` as decoded from `frame`; `client` is (token principal, address);
        `route`: the [[routes]] entry its path reaches."""
        refusal = ladder.refusal(headers, message)
        if refusal is None and isinstance(message, Request):
            refusal = self._catalog_refusal(await self._settled_view(), headers, message)
        if refusal is not None:
            logger.debug("refused a modern POST: {} {}", refusal.error.code, refusal.error.message)
            await respond(send, refusal.status, refusal.body(), JSON_HEADERS)
            return
        if not isinstance(message, Request):
            await respond(send, 202, b"", [])  # a notification: nothing it could say over HTTP
            return
        states = self.sessions.fleet_states
        retry = Retry.NOT_CLAIMED
        if states is not None:
            subject = client[0].subject if client[0] is not None else None
            path = route.config.paths[0] if route is not None and route.config.paths else None
            retry = await served_by_fleet(states, headers, frame, message, send, subject, path)
            if retry is Retry.ANSWERED:
                return
        try:
            session, transport = self.sessions.open_one_request(*client, frame, message.id, route)
        except Refused as refused:
            if states is not None and retry is Retry.CLAIMED:
                await release(states, message)  # 429, 503: the retry it is told to make is served
            raise RequestRefused(refused, message.id) from None
        transport.traceparent = headers.get("traceparent")
        names = self.sessions.session_settings.forward_headers
        transport.on_behalf = on_behalf(client[0].token if client[0] is not None else None, headers, names)
        with logger.contextualize(session=session.id):
            logger.debug("modern {} (request {})", clip(message.method), clip(repr(message.id)))
            await self._answer(session, transport, receive, send)

    async def _settled_view(self) -> CatalogView:
        """The catalog once every backend has become ready or ended its first start (as a session would
        hold the request; once for the gateway), so the checks read the tools a client will be shown."""
        catalog, hold = self.sessions.catalog, self.sessions.session_settings.first_settle
        if not hold.over:
            with trio.move_on_after(self.sessions.session_settings.settle_timeout_s):
                version = catalog.version
                while not catalog.value.settled:
                    version, _ = await catalog.wait_newer(version)
            hold.over = True
        return catalog.value

    def _catalog_refusal(
        self, view: CatalogView, headers: Mapping[str, str], request: Request
    ) -> EdgeRefusal | None:
        error = undeclared(view, request.method)
        if error is not None:
            return EdgeRefusal(request.id, error)
        if request.method != "tools/call" or not isinstance(request.params, dict):
            return None
        name = request.params.get("name")
        declared = self.declared.of(view, name) if isinstance(name, str) else ()
        mismatch = param_mismatch(headers, declared, request.params.get("arguments")) if declared else None
        return None if mismatch is None else EdgeRefusal(request.id, mismatch)

    async def _answer(
        self, session: Session, transport: OneRequestTransport, receive: Receive, send: Send
    ) -> None:
        """JSON when the answer is the first thing for the client; otherwise an SSE stream."""
        stream, answered = transport.stream, False
        try:
            if not await until_disconnect(receive, partial(stream.wait_beyond, 0)):
                return
            if stream.finished and stream.last_number <= 1:
                await self._respond_json(transport, send)
                answered = True
                return
            await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
            answered = await pump(stream, 0, receive, send, prime=False, resumable=False, numbered=False)
        finally:
            if answered or stream.finished:
                session.stop()
            else:
                logger.info(
                    "the client closed the response of request {}; cancelling it",
                    clip(repr(transport.request_id)),
                )
                transport.give_up(CLIENT_CLOSED)

    async def _respond_json(self, transport: OneRequestTransport, send: Send) -> None:
        stream = transport.stream
        if stream.last_number == 0:  # the session ended and owed nothing: it never took the request
            body = EdgeRefusal(transport.request_id, UNANSWERED).body()
            await respond(send, 500, body, JSON_HEADERS)
            return
        code = transport.error_code
        status = 200 if code is None else http_status(code, at_edge=False)
        await respond(send, status, stream.events[0][1], JSON_HEADERS)
