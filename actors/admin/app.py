"""The admin listener's ASGI app.

    GET /          the status page (page.html, page.js, page.css: static, no data in them)
    GET /healthz   200 "ok" while the process runs
    GET /readyz    200 once the first settle is done and every required backend is ready; else 503, and
                   the JSON body names who is not ready and why
    GET /metrics   Prometheus text format (exposition.py)
    GET /status    the tree as JSON (status.py)
    GET /events    server-sent events for the page: the tree and each backend's newest rate sample, at
                   once and then whenever something changes (a backend's state, or a sample each second);
                   at most MAX_EVENT_READERS at once (then 503), and a reader that has not taken an event
                   within SLOW_READER_S is dropped. Each change is encoded once for every reader.

Refusals come first: a method other than GET 405; on a loopback host, a Host header that does not name a
loopback address 421 (a page elsewhere must not read the status through DNS rebinding); with a token
configured, a request without `Authorization: Bearer <token>` 401, except the page's static files (the page
itself then sends the token, which it takes from the URL's #token=... or asks for).

Every body but the static files is redacted (runtime/redact.py) as it is sent: no secret the gateway knows,
and no text shaped like a credential, is on any page, whoever reads it.

Backends' stderr lines (in /status and /events) are shown only to a reader that gave the token, or for a
backend whose `expose_backend_stderr` is true: with no token, any local process may read this listener.
"""

from __future__ import annotations

import hmac
from functools import partial
from importlib.resources import files
from typing import Any, Final

import attrs
import orjson
import trio
from loguru import logger
from prometheus_client.registry import CollectorRegistry

from actors.admin.exposition import CONTENT_TYPE, render
from actors.admin.rates import RateSampler
from actors.admin.status import StatusModel
from actors.frontends.admission import LOOPBACK_NAMES, parse_host
from actors.frontends.auth import Refused
from actors.frontends.http.sse import SSE_HEADERS, Receive, Scope, Send, until_disconnect
from actors.runtime.redact import redact
from actors.runtime.watch import Watch

KEEPALIVE_S: Final = 15.0  # a comment this often on a quiet event stream, so proxies keep it open
MAX_EVENT_READERS: Final = 16  # status pages open at once: a few operators' tabs, not a crowd
SLOW_READER_S: Final = 10.0  # a reader whose socket takes no event for this long is dropped
BUSY: Final = [(b"retry-after", b"10")]
STATIC: Final = {
    "/": ("page.html", b"text/html; charset=utf-8"),
    "/page.js": ("page.js", b"text/javascript; charset=utf-8"),
    "/page.css": ("page.css", b"text/css; charset=utf-8"),
}
SECURITY_HEADERS: Final = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'"),
]
JSON: Final = b"application/json"
CHALLENGE: Final = [(b"www-authenticate", b'Bearer realm="mcp-gateway-admin"')]


def _static(name: str) -> bytes:
    return files("actors.admin").joinpath(name).read_bytes()


@attrs.define(kw_only=True)
class AdminApp:
    """Owns: the static files of the page, read once.
    Receives: HTTP requests (ASGI) from hypercorn's server for each admin connection.
    Sends: the answer of each route; on /events, a stream until the client goes away.
    Stops when: never itself; each request ends with its response or its client.
    Errors: a request that may not go on gets its status and a JSON body {"error": why}.
    """

    model: StatusModel
    sampler: RateSampler
    changed: Watch[float]
    registry: CollectorRegistry  # the gateway's own (exposition.py)
    token: str | None = attrs.field(default=None, repr=False)
    loopback: bool = True
    _files: dict[str, tuple[bytes, bytes]] = attrs.field(init=False)
    _readers: int = attrs.field(init=False, default=0)  # /events streams open now
    _latest: tuple[int, bytes] = attrs.field(init=False, default=(-1, b""))  # (version, its event)

    def __attrs_post_init__(self) -> None:
        self._files = {path: (_static(name), kind) for path, (name, kind) in STATIC.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        try:
            self._admit(scope, path)
        except Refused as refused:
            client = scope.get("client")
            peer = f"{client[0]}:{client[1]}" if client else "?"
            logger.info(
                "admin: refused {} {} from {}: HTTP {}: {}",
                scope["method"],
                path,
                peer,
                refused.status,
                refused.reason,
            )
            await _respond(send, refused.status, JSON, _json({"error": refused.reason}), refused.headers)
            return
        if path in self._files:
            body, kind = self._files[path]
            await _respond(send, 200, kind, body)
        elif path == "/healthz":
            await _respond(send, 200, b"text/plain; charset=utf-8", b"ok\n")
        elif path == "/readyz":
            ready, body = self.model.readiness()
            await _respond(send, 200 if ready else 503, JSON, _json(body))
        elif path == "/metrics":
            await _respond(send, 200, CONTENT_TYPE.encode(), _redacted(render(self.registry)))
        elif path == "/status":
            await _respond(send, 200, JSON, _json(self.model.status(stderr=self.stderr)))
        elif path == "/events":
            await self._events(receive, send)
        else:
            await _respond(send, 404, JSON, _json({"error": f"no such page: {path}"}))

    def _admit(self, scope: Scope, path: str) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            raise Refused(405, "only GET", [(b"allow", b"GET")])
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        if self.loopback:
            host = parse_host(headers.get("host", ""))
            if host is None or host[0] not in LOOPBACK_NAMES:
                raise Refused(421, "the admin listener answers only to a loopback Host")
        if self.token is None or path in self._files:
            return
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            raise Refused(401, "a bearer token is required (Authorization: Bearer ...)", CHALLENGE)
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise Refused(401, "wrong bearer token", CHALLENGE)

    @property
    def stderr(self) -> bool:
        """Readers may see every backend's stderr: they gave the token (admission checked it)."""
        return self.token is not None

    async def _events(self, receive: Receive, send: Send) -> None:
        if self._readers >= MAX_EVENT_READERS:
            why = f"too many event streams open (at most {MAX_EVENT_READERS}); try again later"
            await _respond(send, 503, JSON, _json({"error": why}), BUSY)
            return
        self._readers += 1
        try:
            await send(
                {"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + SECURITY_HEADERS}
            )
            await until_disconnect(receive, partial(self._stream, send))
        finally:
            self._readers -= 1

    async def _stream(self, send: Send) -> None:
        """The whole snapshot, then one event per change (or a keepalive), until a send takes too long."""
        version = self.changed.version
        body = _event(self._snapshot(whole=True))
        while await _within(SLOW_READER_S, send, body):
            with trio.move_on_after(KEEPALIVE_S) as quiet:
                version, _ = await self.changed.wait_newer(version)
            body = b": keepalive\n\n" if quiet.cancelled_caught else self._change(version)
        logger.info("dropped a slow /events reader: no event taken for {}s", SLOW_READER_S)

    def _change(self, version: int) -> bytes:
        """The event of `version`, encoded once for every reader."""
        if self._latest[0] != version:
            self._latest = (version, _event(self._snapshot(whole=False)))
        return self._latest[1]

    def _snapshot(self, *, whole: bool) -> dict[str, Any]:
        """The tree, and each backend's rate samples: every one kept (whole) or only the newest."""
        status = self.model.status(stderr=self.stderr)
        names = [backend["name"] for backend in status["backends"]]
        samples = {name: self.sampler.of(name) for name in names}
        if not whole:
            samples = {name: series[-1:] for name, series in samples.items()}
        return {"status": status, "samples": samples}


def _event(data: dict[str, Any]) -> bytes:
    return b"event: status\ndata: " + _redacted(orjson.dumps(data)) + b"\n\n"


async def _within(limit_s: float, send: Send, body: bytes) -> bool:
    """Send a piece of the stream: False when the reader did not take it within `limit_s`."""
    with trio.move_on_after(limit_s):
        await send({"type": "http.response.body", "body": body, "more_body": True})
        return True
    return False


async def _respond(
    send: Send, status: int, kind: bytes, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    extra = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": extra + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def _json(value: Any) -> bytes:
    return _redacted(orjson.dumps(value, option=orjson.OPT_INDENT_2)) + b"\n"


def _redacted(body: bytes) -> bytes:
    """What a page is sent, redacted as the text it is (no redaction marker or pattern can span two JSON
    strings, so JSON stays JSON; a label is written as in Prometheus' text, so /metrics stays parseable)."""
    text = body.decode("utf-8", "replace")
    clean = redact(text)
    return body if clean is text else clean.encode()
