"""The admin listener's ASGI app.

    GET /          the status page (page.html, page.js, page.css: static, no data in them)
    GET /healthz   200 "ok" while the process runs
    GET /readyz    200 once the first settle is done and every required backend is ready; else 503, and
                   the JSON body names who is not ready and why
    GET /metrics   Prometheus text format (exposition.py)
    GET /status    the tree as JSON (status.py)
    GET /events    server-sent events for the page: the tree and each backend's newest rate sample, at
                   once and then whenever something changes (a backend's state, or a sample each second)

Refusals come first: a method other than GET 405; on a loopback host, a Host header that does not name a
loopback address 421 (a page elsewhere must not read the status through DNS rebinding); with a token
configured, a request without `Authorization: Bearer <token>` 401, except the page's static files (the page
itself then sends the token, which it takes from the URL's #token=... or asks for).
"""

from __future__ import annotations

import hmac
from importlib.resources import files
from typing import Any, Final

import attrs
import orjson
import trio
from prometheus_client.registry import CollectorRegistry

from actors.admin.exposition import CONTENT_TYPE, render
from actors.admin.rates import RateSampler
from actors.admin.status import StatusModel
from actors.frontends.admission import LOOPBACK_NAMES, parse_host
from actors.frontends.auth import Refused
from actors.frontends.http.sse import SSE_HEADERS, Receive, Scope, Send, until_disconnect
from actors.runtime.watch import Watch

KEEPALIVE_S: Final = 15.0  # a comment this often on a quiet event stream, so proxies keep it open
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

    def __attrs_post_init__(self) -> None:
        self._files = {path: (_static(name), kind) for path, (name, kind) in STATIC.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        try:
            self._admit(scope, path)
        except Refused as refused:
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
            await _respond(send, 200, CONTENT_TYPE.encode(), render(self.registry))
        elif path == "/status":
            await _respond(send, 200, JSON, _json(self.model.status()))
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

    async def _events(self, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + SECURITY_HEADERS})

        async def stream() -> None:
            version = self.changed.version
            await _event(send, self._snapshot(whole=True))
            while True:
                with trio.move_on_after(KEEPALIVE_S) as quiet:
                    version, _ = await self.changed.wait_newer(version)
                if quiet.cancelled_caught:
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                else:
                    await _event(send, self._snapshot(whole=False))

        await until_disconnect(receive, stream)

    def _snapshot(self, *, whole: bool) -> dict[str, Any]:
        """The tree, and each backend's rate samples: every one kept (whole) or only the newest."""
        status = self.model.status()
        names = [backend["name"] for backend in status["backends"]]
        samples = {name: self.sampler.of(name) for name in names}
        if not whole:
            samples = {name: series[-1:] for name, series in samples.items()}
        return {"status": status, "samples": samples}


async def _event(send: Send, data: dict[str, Any]) -> None:
    body = b"event: status\ndata: " + orjson.dumps(data) + b"\n\n"
    await send({"type": "http.response.body", "body": body, "more_body": True})


async def _respond(
    send: Send, status: int, kind: bytes, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    extra = [(b"content-type", kind), (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": extra + (headers or [])})
    await send({"type": "http.response.body", "body": body})


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"
