"""The Streamable HTTP frontend's ASGI app (spec 2025-11-25, transports): one JSON-RPC message per POST, to
the gateway session its `Mcp-Session-Id` names.

    POST path   one JSON-RPC message. A request is answered with application/json, or with an SSE stream
                when something for the client (progress, a log line, a backend's request) comes before
                its response; a notification or a response gets 202.
    GET path    the session's standalone SSE stream (list_changed, backends' requests); with
                Last-Event-ID, the rest of a stream whose connection dropped.
    DELETE path ends the session.

A POST of the 2026-07-28 era needs no session: modern.py serves it (ladder.py says which POSTs are). That
era is POST only: a GET or DELETE under a modern MCP-Protocol-Version header gets 405.

Refusals come before any message reaches a session: an MCP header (Mcp-Session-Id, MCP-Protocol-Version,
Mcp-Method, Mcp-Name, Mcp-Param-*) sent twice 400, wrong path 404, Host not allowed 421, Origin not
allowed 403, bad or missing token 401, body too large 413, body not arrived within body_timeout_s 408, a
client whose share of sessions are all busy 429 and a listener whose sessions are all busy 503 (both with
Retry-After; an idle one is ended to make room first: sessions.py), unknown or expired session 404 (the
client initializes again), unsupported MCP-Protocol-Version 400. Session ids and tokens are never logged; a
session is logged by its number (http-N).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger

from actors.config import HttpSettings
from actors.frontends.admission import Admission, client_key
from actors.frontends.auth import Principal, Refused
from actors.frontends.http.fleet_messages import served_in_fleet, tell_other_copies
from actors.frontends.http.fleet_sessions import note_answered
from actors.frontends.http.ladder import is_modern_post, modern_header
from actors.frontends.http.modern import ModernPosts
from actors.frontends.http.param_headers import request_headers
from actors.frontends.http.responses import (
    JSON_HEADERS,
    RequestRefused,
    error_body,
    refused_id,
    respond,
)
from actors.frontends.http.sessions import SESSION_HEADER, HttpSession, HttpSessions
from actors.frontends.http.sse import (
    SSE_HEADERS,
    Receive,
    Scope,
    Send,
    pump,
    released,
    stream_to_read,
    until_disconnect,
)
from actors.frontends.http.transport import EventStream, RequestStream
from actors.frontends.routing import route_at
from actors.identity.metadata import WELL_KNOWN
from actors.protocol import codec
from actors.protocol.codec import clip
from actors.protocol.errors import INVALID_REQUEST, MessageError
from actors.protocol.messages import Batch, Notification, Request, RequestId
from actors.protocol.on_behalf import OnBehalf, on_behalf
from actors.routes import RouteState

_ALLOW: Final = [(b"allow", b"GET, POST, DELETE")]
_POST: Final = [(b"allow", b"POST")]
_PUBLIC: Final = [(b"access-control-allow-origin", b"*")]  # metadata any web client may read


@attrs.define(eq=False, kw_only=True)
class HttpApp:
    """Owns: the count of HTTP requests being served, over all sessions.
    Receives: HTTP requests (ASGI), from hypercorn's server for each connection.
    Sends: each message to its session's transport; each session's messages back as JSON or on SSE streams.
    Stops when: never itself; each request ends with its response, or when its client goes away.
    Errors: a request that may not go on gets its refusal's status and a JSON-RPC error body, logged once.
    """

    settings: HttpSettings
    admission: Admission
    sessions: HttpSessions
    modern: ModernPosts  # POSTs of the 2026-07-28 era
    _requests: int = 0  # HTTP requests being served, over all sessions
    _no_requests: trio.Event = attrs.field(factory=trio.Event)

    async def wait_no_requests(self) -> None:
        """Until every response (an SSE stream's last chunk too) is written."""
        if self._requests:
            await self._no_requests.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await _refuse_websocket(scope, receive, send)
            return
        if scope["type"] != "http":  # lifespan: nothing to do
            return
        headers, repeated = request_headers(scope["headers"])
        self._requests += 1
        try:
            if repeated is not None:
                raise Refused(400, f"the {clip(repeated)} header comes more than once; send it once")
            await self._serve(scope, headers, receive, send)
        except Refused as refused:
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else "?"
            logger.warning(
                "refused {} {} from {}: HTTP {}: {}",
                scope["method"],
                scope["path"],
                peer,
                refused.status,
                refused.reason,
            )
            body = error_body(refused_id(refused), refused.reason)
            await respond(send, refused.status, body, [*JSON_HEADERS, *refused.headers])
        finally:
            self._requests -= 1
            if not self._requests:
                self._no_requests.set()
                self._no_requests = trio.Event()

    async def _serve(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        method = scope["method"]
        document = self._metadata(scope["path"]) if method == "GET" else None
        if document is not None:
            self.admission.check_host(headers.get("host"))
            await respond(send, 200, document, [*JSON_HEADERS, *_PUBLIC])
            return
        principal = await self.admission.check(scope["path"], headers.get("host"), headers)
        client = scope.get("client")
        address = str(client[0]) if client else "?"
        self._limit(principal, address)
        if method in ("GET", "DELETE") and modern_header(headers):
            raise Refused(405, f"{method} is for legacy sessions; protocol 2026-07-28 is POST only", _POST)
        route = route_at(self.admission.routes, scope["path"])
        if method == "POST":
            await self._post(headers, principal, address, receive, send, route)
        elif method == "GET":
            await self._get(headers, principal, address, receive, send, route)
        elif method == "DELETE":
            entry = await self.sessions.locate(headers, principal, address, route)
            with logger.contextualize(session=entry.label):
                logger.info("the client ended the session (DELETE)")
            self.sessions.end(headers[SESSION_HEADER], entry)
            await self.sessions.ended_by_client(headers[SESSION_HEADER])
            await respond(send, 204, b"", [])
        else:
            raise Refused(405, f"{method} is not used here; MCP uses POST, GET and DELETE", _ALLOW)

    def _limit(self, principal: Principal | None, address: str) -> None:
        """[limits] http_requests_per_s: per caller (the token's principal, else the address), whatever
        session the request is for; over it, 429 with Retry-After in whole seconds."""
        limiter = self.sessions.session_settings.limiter
        if limiter is None:
            return
        retry_s = limiter.admit_request(client_key(principal, address))
        if retry_s:
            retry = [(b"retry-after", str(retry_s).encode())]
            raise Refused(429, f"too many requests from this client; retry in {retry_s} s", retry)

    def _on_behalf(self, principal: Principal | None, headers: dict[str, str]) -> OnBehalf | None:
        """What a POST's calls carry for backends' credentials: its token, its forwardable headers."""
        names = self.sessions.session_settings.forward_headers
        return on_behalf(principal.token if principal is not None else None, headers, names)

    def _metadata(self, path: str) -> bytes | None:
        """RFC 9728 metadata is served when the listener checks tokens from issuers: its own, and each
        route's at the well-known path followed by the route's."""
        bearer = self.admission.bearer
        if bearer is None or bearer.oauth is None or not path.startswith(WELL_KNOWN):
            return None
        return bearer.document_at(path, self.settings.path, self.admission.routes)

    async def _post(
        self,
        headers: dict[str, str],
        principal: Principal | None,
        address: str,
        receive: Receive,
        send: Send,
        route: RouteState | None = None,
    ) -> None:
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise Refused(415, "POST a JSON-RPC message with Content-Type: application/json")
        accept = headers.get("accept", "*/*")
        if not any(kind in accept for kind in ("application/json", "text/event-stream", "*/*")):
            raise Refused(406, "Accept must allow application/json and text/event-stream")
        body = None
        with trio.move_on_after(self.settings.body_timeout_s):
            body = await _read_body(receive, self.settings.max_message_bytes)
        if body is None:
            raise Refused(408, f"the body did not arrive within {self.settings.body_timeout_s}s")
        try:
            message = codec.decode(body)
        except MessageError as exc:
            await respond(
                send, 400, error_body(exc.request_id, exc.error.message, exc.error.code), JSON_HEADERS
            )
            return
        if isinstance(message, Request) and message.method == "tools/call" and self.admission.bearer:
            params = message.params if isinstance(message.params, dict) else {}
            self.admission.bearer.check_call(principal, params.get("name"), route)
        if is_modern_post(headers, message):
            await self.modern.serve(headers, message, body, (principal, address), receive, send, route)
            return
        if isinstance(message, Batch):
            raise Refused(400, "send one JSON-RPC message per POST (batches are not part of Streamable HTTP)")
        if await served_in_fleet(self.sessions, headers, principal, message, body, send, route):
            return  # [fleet]: an answer or notification that needs no copy of its session here
        if isinstance(message, Request) and message.method == "initialize":
            try:
                session_id, entry = self.sessions.open(principal, address, route=route)
            except Refused as refused:
                raise RequestRefused(refused, message.id) from None
        else:
            session_id = headers.get(SESSION_HEADER, "")
            entry = await self.sessions.locate(headers, principal, address, route)
        self.sessions.enter(entry)  # busy from here: never ended to make room while its facts are written
        try:
            if isinstance(message, Request) and message.method == "initialize":
                await self.sessions.remember(session_id, principal, message.params, route)
            with logger.contextualize(session=entry.label):
                if not isinstance(message, Request):
                    await _deliver(entry, body)
                    if isinstance(message, Notification) and message.method == "notifications/cancelled":
                        entry.transport.cancelled(message.params)
                    tell_other_copies(self.sessions, session_id, message)
                    await respond(send, 202, b"", [])
                    return
                stream = entry.transport.open_request(message.id, _progress_token(message.params))
                if stream is None:
                    reason = f"request id {message.id!r} is already in flight in this session"
                    await respond(send, 400, error_body(None, reason, INVALID_REQUEST), JSON_HEADERS)
                    return
                stream.traceparent = headers.get("traceparent")  # what its span links to, when traced
                stream.on_behalf = self._on_behalf(principal, headers)  # what its calls carry for backends
                try:
                    await _deliver(entry, body)
                except Refused:
                    entry.transport.forget(stream)
                    raise
                extra = (
                    [(SESSION_HEADER.encode(), session_id.encode())] if message.method == "initialize" else []
                )
                await self._answer(session_id, entry, stream, message, extra, receive, send)
                await note_answered(self.sessions.fleet, session_id, message, stream)
        finally:
            self.sessions.leave(entry)

    async def _answer(
        self,
        session_id: str,
        entry: HttpSession,
        stream: RequestStream,
        request: Request,
        extra: list[tuple[bytes, bytes]],
        receive: Receive,
        send: Send,
    ) -> None:
        """JSON when the response is the first thing for the client; otherwise an SSE stream."""
        with entry.transport.reading(stream):
            answered = await until_disconnect(receive, partial(stream.wait_beyond, 0))
            if answered and stream.finished and stream.last_number <= 1:
                if stream.last_number == 0:  # cancelled by the client, or the session ended: no answer
                    entry.transport.forget(stream)
                    if entry.transport.closed:
                        raise Refused(404, "the session ended before answering; initialize a new one")
                    await respond(send, 200, b"", SSE_HEADERS)  # spec: a stream that ends unanswered
                    return
                frame = stream.events[0][1]
                if request.method == "initialize" and "error" in orjson.loads(frame):
                    await self.sessions.refused_initialize(session_id, entry)
                    extra = []
                await respond(send, 200, frame, [*JSON_HEADERS, *extra])
                stream.wrote(1)
            elif answered:
                await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *extra]})
                answered = await self._pump(stream, 0, receive, send, prime=True)
        self._released(entry, stream, answered)

    async def _get(
        self,
        headers: dict[str, str],
        principal: Principal | None,
        address: str,
        receive: Receive,
        send: Send,
        route: RouteState | None = None,
    ) -> None:
        if "text/event-stream" not in headers.get("accept", ""):
            raise Refused(406, "GET opens an SSE stream: Accept must allow text/event-stream")
        entry = await self.sessions.locate(headers, principal, address, route)
        last_event_id = headers.get("last-event-id")
        stream, cursor = stream_to_read(entry.transport, last_event_id)
        self.sessions.enter(entry)
        try:
            with logger.contextualize(session=entry.label):
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                with entry.transport.reading(stream):
                    async with self.sessions.standalone_stream(headers[SESSION_HEADER], entry, stream):
                        finished = await self._pump(stream, cursor, receive, send, prime=not last_event_id)
                if isinstance(stream, RequestStream):
                    self._released(entry, stream, finished)
        finally:
            self.sessions.leave(entry)

    async def _pump(
        self, stream: EventStream, cursor: int, receive: Receive, send: Send, *, prime: bool
    ) -> bool:
        resumable = self.settings.resume_window_s > 0
        return await pump(stream, cursor, receive, send, prime=prime, resumable=resumable)

    def _released(self, entry: HttpSession, stream: RequestStream, finished: bool) -> None:
        window_s, nursery = self.settings.resume_window_s, self.sessions.nursery
        released(entry, stream, finished=finished, window_s=window_s, nursery=nursery)


async def _deliver(entry: HttpSession, frame: bytes) -> None:
    try:
        await entry.transport.deliver(frame)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        raise Refused(404, "the session has ended; initialize a new one") from None


async def _read_body(receive: Receive, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refused(400, "the client went away before sending its whole body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"the message is larger than max_message_bytes ({limit} bytes)")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _progress_token(params: dict[str, Any] | None) -> RequestId | None:
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


async def _refuse_websocket(scope: Scope, receive: Receive, send: Send) -> None:
    """A WebSocket upgrade sent to the Streamable HTTP listener: refused (403), said once in the log;
    WebSocket clients are served by the [websocket] listener."""
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "?"
    logger.warning("refused a WebSocket upgrade from {}: this is the Streamable HTTP listener", peer)
    if (await receive())["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008})
