"""The admin app on its own (ASGI called directly): routes, refusals, and the event stream."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio
import trio.testing
from catalog_double import crashed, make_catalog, make_model, ready, tell
from prometheus_client.parser import text_string_to_metric_families

from actors.admin.app import MAX_EVENT_READERS, SLOW_READER_S, AdminApp
from actors.admin.exposition import make_registry
from actors.admin.rates import RateSampler
from actors.catalog import Catalog
from actors.runtime.redact import REDACTOR
from actors.runtime.watch import Watch


def make_app(
    token: str | None = None, *, loopback: bool = True, catalog: Catalog | None = None
) -> tuple[AdminApp, Watch[float]]:
    if catalog is None:
        catalog = make_catalog("alpha")
        tell(catalog, ready("alpha", "add"))
    model = make_model(catalog)
    changed = Watch(0.0)
    app = AdminApp(
        model=model,
        sampler=RateSampler(model.meters, changed),
        changed=changed,
        registry=make_registry(model),
        token=token,
        loopback=loopback,
    )
    return app, changed


async def get(
    app: AdminApp, path: str, method: str = "GET", **headers: str
) -> tuple[int, dict[str, str], bytes]:
    headers.setdefault("host", "127.0.0.1:8767")
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    answer_headers = {name.decode(): value.decode() for name, value in start["headers"]}
    return start["status"], answer_headers, b"".join(message.get("body", b"") for message in sent[1:])


async def test_each_route_answers() -> None:
    app, _ = make_app()
    assert (await get(app, "/healthz"))[::2] == (200, b"ok\n")
    status, _, body = await get(app, "/readyz")
    assert status == 200 and orjson.loads(body) == {"ready": True, "settled": True}
    status, headers, body = await get(app, "/metrics")
    assert (
        status == 200
        and headers["content-type"].startswith("text/plain")
        and b"mcp_gateway_ready 1.0" in body
    )
    status, _, body = await get(app, "/status")
    assert status == 200 and orjson.loads(body)["backends"][0]["name"] == "alpha"
    status, headers, body = await get(app, "/")
    assert status == 200 and headers["content-type"].startswith("text/html") and b"/page.js" in body
    assert "default-src 'self'" in headers["content-security-policy"]
    for path in ("/page.js", "/page.css"):
        assert (await get(app, path))[0] == 200
    assert (await get(app, "/nope"))[0] == 404


async def test_refusals_come_before_any_route() -> None:
    app, _ = make_app(token="t0ken")
    status, headers, body = await get(app, "/status")
    assert status == 401 and headers["www-authenticate"].startswith("Bearer")
    assert orjson.loads(body) == {"error": "a bearer token is required (Authorization: Bearer ...)"}
    assert (await get(app, "/status", authorization="Bearer wrong"))[0] == 401
    assert (await get(app, "/status", authorization="Basic t0ken"))[0] == 401
    assert (await get(app, "/status", authorization="Bearer t0ken"))[0] == 200
    assert (await get(app, "/", authorization=""))[0] == 200  # the page's static files need no token
    assert (await get(app, "/status", "POST", authorization="Bearer t0ken"))[0] == 405
    assert (await get(app, "/status", host="evil.example", authorization="Bearer t0ken"))[0] == 421
    assert (await get(app, "/status", host="localhost:1", authorization="Bearer t0ken"))[0] == 200


async def test_off_loopback_any_host_with_the_token() -> None:
    app, _ = make_app(token="t0ken", loopback=False)
    assert (await get(app, "/healthz", host="gw.internal:8767", authorization="Bearer t0ken"))[0] == 200


async def test_the_event_stream_sends_at_once_then_at_each_change_until_the_client_goes() -> None:
    app, changed = make_app()
    gone = trio.Event()
    events: list[dict[str, Any]] = []
    arrived = trio.Event()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal arrived
        body = message.get("body", b"")
        if body.startswith(b"event: status\ndata: "):
            events.append(orjson.loads(body.split(b"data: ", 1)[1]))
            arrived.set()

    scope = {"type": "http", "method": "GET", "path": "/events", "headers": [(b"host", b"127.0.0.1")]}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(app, scope, receive, send)
        await arrived.wait()
        arrived = trio.Event()
        assert events[0]["status"]["backends"][0]["state"] == "ready" and events[0]["samples"] == {
            "alpha": []
        }
        changed.publish(1.0)
        await arrived.wait()
        assert len(events) == 2
        gone.set()  # the app returns once the client is gone


async def test_status_shows_backend_stderr_only_to_a_reader_with_the_token() -> None:
    for token, headers, shown in ((None, {}, False), ("t0ken", {"authorization": "Bearer t0ken"}, True)):
        catalog = make_catalog("alpha")
        tell(catalog, crashed("alpha", "process 7 exited with code 1", "ERROR: key sk-1"))
        app, _ = make_app(token, catalog=catalog)
        app.model.history.record(catalog.view())
        status, _, body = await get(app, "/status", **headers)
        assert status == 200 and (b"sk-1" in body) is shown


def events_scope() -> dict[str, Any]:
    return {"type": "http", "method": "GET", "path": "/events", "headers": [(b"host", b"127.0.0.1")]}


def disconnect_on(gone: trio.Event) -> Callable[[], Awaitable[dict[str, Any]]]:
    """An ASGI receive whose client goes away once `gone` is set."""

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    return receive


async def test_event_readers_are_capped_and_a_reader_leaving_makes_room() -> None:
    app, _ = make_app()
    gone = trio.Event()
    started: list[int] = []

    receive = disconnect_on(gone)

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            started.append(message["status"])

    async with trio.open_nursery() as nursery:
        for _ in range(MAX_EVENT_READERS):
            nursery.start_soon(app, events_scope(), receive, send)
        await trio.testing.wait_all_tasks_blocked()
        assert started == [200] * MAX_EVENT_READERS
        status, headers, body = await get(app, "/events")
        assert status == 503 and "too many event streams" in orjson.loads(body)["error"]
        assert headers["retry-after"] == "10"
        gone.set()
    status, _, _ = await get(app, "/healthz")
    assert status == 200
    admitted: list[int] = []

    async def leave() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def note(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            admitted.append(message["status"])

    await app(events_scope(), leave, note)  # every earlier reader has left: room again
    assert admitted == [200]


async def test_a_reader_that_takes_no_event_is_dropped(autojump_clock: trio.testing.MockClock) -> None:
    app, _ = make_app()
    blocked = trio.Event()

    async def receive() -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        if message.get("body", b"").startswith(b"event: status"):
            blocked.set()
            await trio.sleep_forever()  # the reader's socket is full: it reads nothing

    began = trio.current_time()
    with trio.fail_after(SLOW_READER_S * 10):
        await app(events_scope(), receive, send)  # returns: the stream was dropped
    assert blocked.is_set() and trio.current_time() - began >= SLOW_READER_S


async def test_each_change_is_encoded_once_for_every_reader() -> None:
    app, changed = make_app()
    gone = trio.Event()
    bodies: list[bytes] = []

    receive = disconnect_on(gone)

    async def send(message: dict[str, Any]) -> None:
        if message.get("body", b"").startswith(b"event: status"):
            bodies.append(message["body"])

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(app, events_scope(), receive, send)
        await trio.testing.wait_all_tasks_blocked()
        changed.publish(1.0)
        await trio.testing.wait_all_tasks_blocked()
        first, change = bodies[:3], bodies[3:]
        assert len(change) == 3 and change[0] is change[1] is change[2]  # one encoding, sent three times
        assert first[0] is not first[1]  # the whole snapshot is each reader's own
        gone.set()


async def test_every_page_is_redacted_as_it_is_sent() -> None:
    """A secret the gateway knows (here a backend's name, which nothing else redacts) is sent as its marker
    on /status, /metrics and /events, and each page still parses."""
    secret = "admin-secret-1679091c5a88"
    REDACTOR.know("test-admin", {"env:ADMIN_SECRET": secret})
    try:
        catalog = make_catalog(secret)
        tell(catalog, ready(secret, "add"))
        app, _ = make_app(catalog=catalog)
        pages = {path: (await get(app, path))[2] for path in ("/status", "/metrics")}
        gone, sent = trio.Event(), []

        async def send(message: dict[str, Any]) -> None:
            if message.get("body", b"").startswith(b"event: status"):
                sent.append(message["body"])
                gone.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(app, events_scope(), disconnect_on(gone), send)
        first = sent[0]
    finally:
        REDACTOR.know("test-admin", {})
    for body in (*pages.values(), first):
        assert secret.encode() not in body and b"[REDACTED:env:ADMIN_SECRET]" in body
    assert orjson.loads(pages["/status"])["backends"][0]["name"] == "[REDACTED:env:ADMIN_SECRET]"
    assert orjson.loads(first.split(b"data: ", 1)[1])["status"]["backends"][0]["name"].startswith("[REDACTED")
    assert b'backend="[REDACTED:env:ADMIN_SECRET]"' in pages["/metrics"]
    assert list(text_string_to_metric_families(pages["/metrics"].decode()))  # still Prometheus' text
