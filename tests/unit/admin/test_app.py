"""The admin app on its own (ASGI called directly): routes, refusals, and the event stream."""

from __future__ import annotations

from typing import Any

import orjson
import trio
from catalog_double import make_catalog, make_model, ready, tell

from actors.admin.app import AdminApp
from actors.admin.exposition import make_registry
from actors.admin.rates import RateSampler
from actors.runtime.watch import Watch


def make_app(token: str | None = None, *, loopback: bool = True) -> tuple[AdminApp, Watch[float]]:
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
