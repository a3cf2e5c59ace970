"""The Streamable HTTP frontend (spec 2025-11-25, transports): hypercorn's Trio worker serving a small ASGI
app of ours, one gateway session per `Mcp-Session-Id`.

    POST path   one JSON-RPC message. A request is answered with application/json, or with an SSE stream
                when something for the client (progress, a log line, a backend's request) comes before
                its response; a notification or a response gets 202.
    GET path    the session's standalone SSE stream (list_changed, backends' requests); with
                Last-Event-ID, the rest of a stream whose connection dropped.
    DELETE path ends the session.

Refusals come before any message reaches a session: wrong path 404, Host not allowed 421, Origin not
allowed 403, bad or missing token 401, body too large 413, body not arrived within body_timeout_s 408, a
client that has its share of sessions 429, unknown or expired session 404 (the client
initializes again), unsupported MCP-Protocol-Version 400. Session ids and tokens are never logged; a
session is logged by its number (http-N).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, Final

import attrs
import hypercorn.config
import orjson
import trio
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from loguru import logger

from actors.catalog import CatalogView
from actors.config import HttpSettings
from actors.frontends.admission import client_key
from actors.frontends.auth import Refused, check_bearer
from actors.frontends.http.transport import EventStream, HttpSessionTransport, RequestStream
from actors.frontends.listening import Acceptor, Endpoint
from actors.protocol import codec
from actors.protocol.errors import INVALID_REQUEST, MessageError
from actors.protocol.messages import Batch, Notification, Request, RequestId
from actors.protocol.versions import SUPPORTED_VERSIONS
from actors.runtime.watch import Watch
from actors.session.dispatcher import SessionSettings
from actors.session.session import Session

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
RETRY_MS: Final = 1000  # the SSE retry field: how long a client waits before it reconnects
KEEPALIVE_S: Final = 15.0  # an SSE comment this often on a quiet stream, so proxies keep it open
GRACEFUL_S: Final = 1.0  # for hypercorn to finish its connections once the listener is cancelled
SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
JSON_HEADERS: Final = [(b"content-type", b"application/json")]


@attrs.define(eq=False)
class HttpSession:
    label: str  # what the log calls it; the id itself is a secret
    transport: HttpSessionTransport
    session: Session
    subject: str | None
    client: str  # whom it counts against in max_sessions_per_client
    last_active: float
    busy: int = 0  # HTTP requests being served for it right now (an open GET stream is one)


@attrs.define(eq=False)
class HttpListener:
    """Owns: the listening socket (through hypercorn) and every HTTP session.
    Receives: HTTP requests.
    Sends: each message to its session; each session's messages on its SSE streams or as JSON.
    Stops when: cancelled; `stop_sessions()` first answers what every session has in flight.
    Errors: a session's crash is logged and ends that session alone; its id then gets 404.
    """

    settings: HttpSettings
    catalog: Watch[CatalogView]
    session_settings: SessionSettings
    _sessions: dict[str, HttpSession] = attrs.field(factory=dict)
    _numbers: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    _nursery: trio.Nursery | None = None
    _requests: int = 0  # HTTP requests being served, over all sessions
    _no_requests: trio.Event = attrs.field(factory=trio.Event)
    endpoint: Endpoint = attrs.field(init=False)
    _server: hypercorn.config.Config = attrs.field(init=False)
    _context: WorkerContext = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.endpoint = Endpoint.of("http", "http", self.settings)
        within = self.settings.initialize_timeout_s
        self.session_settings = attrs.evolve(self.session_settings, initialize_within_s=within)
        self._server = self._server_config()
        self._context = WorkerContext(None)

    @property
    def url(self) -> str:
        return self.endpoint.url

    async def run(
        self, connections: trio.Nursery, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One run of the listener as a supervised child: accept on the bound sockets; each connection is
        hypercorn's HTTP/1.1 or HTTP/2 server for it, as a contained task in `connections` (which also
        runs the sessions and outlives this run)."""
        sockets = await self.endpoint.for_run()
        self._nursery = connections
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._expire_idle)
            nursery.start_soon(Acceptor("http", self._connection).run, sockets, connections)
            task_status.started(self.url)

    async def _connection(self, stream: trio.SocketStream) -> None:
        """hypercorn's server for one connection; what it raises on a peer's bytes ends this one alone."""
        app = wrap_app(self.app, self._server.wsgi_max_body_size, "asgi")
        await TCPServer(app, self._server, self._context, ConnectionState({}), stream)  # type: ignore[arg-type]

    def sessions(self) -> list[Session]:
        return [entry.session for entry in self._sessions.values()]

    def stop_sessions(self) -> None:
        for entry in self._sessions.values():
            entry.session.stop()

    async def wait_sessions_done(self) -> None:
        """Until every session has ended and every response (an SSE stream's last chunk too) is written."""
        for entry in list(self._sessions.values()):
            await entry.session.done.wait()
        if self._requests:
            await self._no_requests.wait()

    def _server_config(self) -> hypercorn.config.Config:
        config = hypercorn.config.Config()
        config.accesslog = None
        config.errorlog = _hypercorn_log()
        config.graceful_timeout = GRACEFUL_S
        config.include_server_header = False
        return config

    # --- ASGI ---------------------------------------------------------------------------------------

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # a WebSocket upgrade here: refused by the server when the app returns
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        self._requests += 1
        try:
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
            body = _error_body(None, refused.reason)
            await _respond(send, refused.status, body, [*JSON_HEADERS, *refused.headers])
        finally:
            self._requests -= 1
            if not self._requests:
                self._no_requests.set()
                self._no_requests = trio.Event()

    async def _serve(self, scope: Scope, headers: dict[str, str], receive: Receive, send: Send) -> None:
        settings = self.settings
        if scope["path"] != settings.path:
            raise Refused(404, f"no MCP endpoint at {scope['path']}; try {settings.path}")
        self.endpoint.admission.check_host(headers.get("host"))
        self.endpoint.admission.check_origin(headers.get("origin"))
        subject = check_bearer(headers, settings.auth) if settings.auth is not None else None
        method = scope["method"]
        if method == "POST":
            client = scope.get("client")
            address = str(client[0]) if client else "?"
            await self._post(headers, subject, address, receive, send)
        elif method == "GET":
            await self._get(headers, subject, receive, send)
        elif method == "DELETE":
            entry = self._session_for(headers, subject)
            with logger.contextualize(session=entry.label):
                logger.info("the client ended the session (DELETE)")
            self._end(headers[SESSION_HEADER], entry)
            await _respond(send, 204, b"", [])
        else:
            raise Refused(405, f"{method} is not used here; MCP uses POST, GET and DELETE", _ALLOW)

    def _session_for(self, headers: dict[str, str], subject: str | None) -> HttpSession:
        session_id = headers.get(SESSION_HEADER)
        if not session_id:
            raise Refused(400, "the Mcp-Session-Id header is required; send initialize first")
        entry = self._sessions.get(session_id)
        if entry is None or entry.subject != subject:
            raise Refused(404, "unknown or expired session; initialize a new one")
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            supported = ", ".join(SUPPORTED_VERSIONS)
            raise Refused(400, f"unsupported MCP-Protocol-Version {version}; supported: {supported}")
        return entry

    # --- POST ---------------------------------------------------------------------------------------

    async def _post(
        self, headers: dict[str, str], subject: str | None, address: str, receive: Receive, send: Send
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
            await _respond(
                send, 400, _error_body(exc.request_id, exc.error.message, exc.error.code), JSON_HEADERS
            )
            return
        if isinstance(message, Batch):
            raise Refused(400, "send one JSON-RPC message per POST (batches are not part of Streamable HTTP)")
        if isinstance(message, Request) and message.method == "initialize":
            session_id, entry = self._open_session(subject, address)
        else:
            session_id, entry = headers.get(SESSION_HEADER, ""), self._session_for(headers, subject)
        entry.busy += 1
        try:
            with logger.contextualize(session=entry.label):
                if not isinstance(message, Request):
                    await self._deliver(entry, body)
                    if isinstance(message, Notification) and message.method == "notifications/cancelled":
                        entry.transport.cancelled((message.params or {}).get("requestId"))
                    await _respond(send, 202, b"", [])
                    return
                stream = entry.transport.open_request(message.id, _progress_token(message.params))
                if stream is None:
                    reason = f"request id {message.id!r} is already in flight in this session"
                    await _respond(send, 400, _error_body(None, reason, INVALID_REQUEST), JSON_HEADERS)
                    return
                try:
                    await self._deliver(entry, body)
                except Refused:
                    entry.transport.forget(stream)
                    raise
                extra = (
                    [(SESSION_HEADER.encode(), session_id.encode())] if message.method == "initialize" else []
                )
                await self._answer(session_id, entry, stream, message, extra, receive, send)
        finally:
            entry.busy -= 1
            entry.last_active = trio.current_time()

    async def _deliver(self, entry: HttpSession, frame: bytes) -> None:
        try:
            await entry.transport.deliver(frame)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise Refused(404, "the session has ended; initialize a new one") from None

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
        with _reading(stream):
            answered = await _until_disconnect(receive, partial(stream.wait_beyond, 0))
            if answered and stream.finished and stream.last_number <= 1:
                if stream.last_number == 0:  # cancelled by the client, or the session ended: no answer
                    entry.transport.forget(stream)
                    if entry.transport.closed:
                        raise Refused(404, "the session ended before answering; initialize a new one")
                    await _respond(send, 200, b"", SSE_HEADERS)  # spec: a stream that ends unanswered
                    return
                frame = stream.events[0][1]
                if request.method == "initialize" and "error" in orjson.loads(frame):
                    self._end(session_id, entry)  # no session for a client that did not get one started
                    extra = []
                await _respond(send, 200, frame, [*JSON_HEADERS, *extra])
                stream.delivered = 1
            elif answered:
                await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *extra]})
                answered = await self._pump(stream, 0, receive, send, prime=True)
        if answered:
            entry.transport.forget(stream)
        else:
            self._detached(entry, stream)

    # --- GET ----------------------------------------------------------------------------------------

    async def _get(self, headers: dict[str, str], subject: str | None, receive: Receive, send: Send) -> None:
        if "text/event-stream" not in headers.get("accept", ""):
            raise Refused(406, "GET opens an SSE stream: Accept must allow text/event-stream")
        entry = self._session_for(headers, subject)
        transport = entry.transport
        last_event_id = headers.get("last-event-id")
        stream: EventStream
        if last_event_id:
            found = transport.stream_for(last_event_id)
            if found is None:
                raise Refused(400, "Last-Event-ID names no stream of this session (it ended or expired)")
            stream, cursor = found
        else:
            stream, cursor = transport.standalone, transport.standalone.delivered
        if stream.attached:
            raise Refused(409, "that stream is already being read; one reader per stream")
        entry.busy += 1
        try:
            with logger.contextualize(session=entry.label):
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                with _reading(stream):
                    finished = await self._pump(stream, cursor, receive, send, prime=not last_event_id)
                if isinstance(stream, RequestStream):
                    if finished:
                        transport.forget(stream)
                    else:
                        self._detached(entry, stream)
        finally:
            entry.busy -= 1
            entry.last_active = trio.current_time()

    # --- streams ------------------------------------------------------------------------------------

    async def _pump(
        self, stream: EventStream, cursor: int, receive: Receive, send: Send, *, prime: bool
    ) -> bool:
        """Write `stream`'s events after `cursor` as they come; True once it is finished and written, False
        when the client went away first."""
        resumable = self.settings.resume_window_s > 0

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
                    chunks.append(
                        b"id: %s\nevent: message\ndata: %s\n\n" % (stream.event_id(number).encode(), frame)
                    )
                    cursor = number
                await send({"type": "http.response.body", "body": b"".join(chunks), "more_body": True})
                stream.delivered = max(stream.delivered, cursor)
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        return await _until_disconnect(receive, write)

    def _detached(self, entry: HttpSession, stream: RequestStream) -> None:
        """The client's connection to `stream` dropped before its response: the call is cancelled at the
        backend, at once or after resume_window_s unless a GET with Last-Event-ID picks the stream up."""
        if stream.finished and stream.delivered >= stream.last_number:
            entry.transport.forget(stream)
            return
        window = self.settings.resume_window_s
        if window <= 0 or entry.transport.closed:
            self._cancel(entry, stream)
            return
        assert self._nursery is not None
        self._nursery.start_soon(self._cancel_unless_resumed, entry, stream, stream.last_number, window)

    async def _cancel_unless_resumed(
        self, entry: HttpSession, stream: RequestStream, seen: int, window: float
    ) -> None:
        await trio.sleep(window)
        if stream.attached:
            return
        if stream.finished:
            entry.transport.forget(stream)  # answered, but nobody came back for it
        elif stream.delivered <= seen:
            self._cancel(entry, stream)

    def _cancel(self, entry: HttpSession, stream: RequestStream) -> None:
        with logger.contextualize(session=entry.label):
            logger.info("the client closed the stream of request {!r}; cancelling it", stream.request_id)
        frame = entry.transport.cancel_frame(stream, "the client closed its response stream")
        assert self._nursery is not None
        self._nursery.start_soon(_deliver_quietly, entry.transport, frame)

    # --- sessions -----------------------------------------------------------------------------------

    def _open_session(self, subject: str | None, address: str) -> tuple[str, HttpSession]:
        if len(self._sessions) >= self.settings.max_sessions:
            raise Refused(503, f"the gateway is at its limit of {self.settings.max_sessions} sessions")
        client = client_key(subject, address)
        self.endpoint.admission.open_session(client)
        session_id = secrets.token_urlsafe(32)  # 256 bits from the OS CSPRNG, visible ASCII only
        label = f"http-{next(self._numbers)}"
        transport = HttpSessionTransport()
        session = Session(label, transport, self.catalog, self.session_settings, subject=subject)
        entry = HttpSession(label, transport, session, subject, client, trio.current_time())
        self._sessions[session_id] = entry
        assert self._nursery is not None
        self._nursery.start_soon(self._run_session, session_id, entry)
        return session_id, entry

    async def _run_session(self, session_id: str, entry: HttpSession) -> None:
        with logger.contextualize(
            session=entry.label, **({"subject": entry.subject} if entry.subject else {})
        ):
            logger.info("session opened")
            try:
                await entry.session.run_temporary()
            finally:
                self.endpoint.admission.close_session(entry.client)
                if self._sessions.get(session_id) is entry:
                    del self._sessions[session_id]

    def _end(self, session_id: str, entry: HttpSession) -> None:
        """Forget the id at once (later requests get 404); the session answers what it has in flight."""
        if self._sessions.get(session_id) is entry:
            del self._sessions[session_id]
        entry.session.stop()

    async def _expire_idle(self) -> None:
        idle = self.settings.session_idle_s
        while True:
            await trio.sleep(max(0.01, min(idle / 4, 30.0)))
            now = trio.current_time()
            for session_id, entry in list(self._sessions.items()):
                if entry.busy == 0 and now - entry.last_active >= idle:
                    with logger.contextualize(session=entry.label):
                        logger.info("no request for {}s; closing the session", idle)
                    self._end(session_id, entry)


_ALLOW: Final = [(b"allow", b"GET, POST, DELETE")]


@contextmanager
def _reading(stream: EventStream) -> Iterator[None]:
    """A client is connected to `stream` meanwhile (messages about its call may go there)."""
    stream.attached += 1
    try:
        yield
    finally:
        stream.attached -= 1


async def _until_disconnect(receive: Receive, work: Callable[[], Awaitable[object]]) -> bool:
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


async def _deliver_quietly(transport: HttpSessionTransport, frame: bytes) -> None:
    with suppress(trio.ClosedResourceError, trio.BrokenResourceError):  # ended: nothing left to cancel
        await transport.deliver(frame)


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


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _error_body(request_id: RequestId | None, message: str, code: int = -32000) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _progress_token(params: dict[str, Any] | None) -> RequestId | None:
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _hypercorn_log() -> logging.Logger:
    """hypercorn logs with the standard library; its lines go to loguru like every other."""
    log = logging.getLogger("mcp_gateway.hypercorn")
    log.propagate = False
    log.setLevel(logging.INFO)
    if not log.handlers:
        log.addHandler(_ToLoguru())
    return log


class _ToLoguru(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logger.opt(depth=6).log(record.levelname, "http server: {}", record.getMessage())
