"""An issuer's keys fetched over real HTTP: its metadata found where RFC 8414 or OpenID Connect discovery put
it (a document naming another issuer is not its own), its JWKS used as long as its Cache-Control says
(within the configured bounds), and a server that answers with something else, or too slowly, is a failure,
not a key set."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from oauth_support import asgi_server

from actors.identity.fetch import FETCH_TIMEOUT_S
from actors.identity.keys import IssuerKeys, JwksSource, KeysKeeper
from actors.runtime.supervisor import ChildExitError


@asynccontextmanager
async def documents(
    routes: Callable[[str], dict[str, tuple[int, dict[str, str], Any]]],
) -> AsyncIterator[str]:
    """A loopback HTTP server answering each path from `routes(base_url)`; everything else 404."""
    table: dict[str, tuple[int, dict[str, str], Any]] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        status, headers, body = table.get(scope["path"], (404, {}, {"error": "not found"}))
        raw = body if isinstance(body, bytes) else orjson.dumps(body)
        listed = [
            (k.encode(), v.encode()) for k, v in {"content-type": "application/json", **headers}.items()
        ]
        await send({"type": "http.response.start", "status": status, "headers": listed})
        await send({"type": "http.response.body", "body": raw})

    async with asgi_server(app) as base:
        table.update(routes(base))
        yield base


JWKS = {
    "keys": [
        {
            "kty": "EC",
            "crv": "P-256",
            "kid": "ec-1",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        }
    ]
}


async def test_discovery_finds_the_jwks_and_its_cache_control_sets_the_next_fetch() -> None:
    def routes(base: str) -> dict[str, tuple[int, dict[str, str], Any]]:
        return {  # no RFC 8414 document here: the OpenID Connect one is used
            "/realms/mcp/.well-known/openid-configuration": (
                200,
                {},
                {"issuer": f"{base}/realms/mcp", "jwks_uri": f"{base}/certs"},
            ),
            "/certs": (200, {"cache-control": "public, max-age=120"}, JWKS),
        }

    async with documents(routes) as base:
        keys = IssuerKeys(f"{base}/realms/mcp")
        async with trio.open_nursery() as nursery:
            await nursery.start(KeysKeeper(JwksSource(refresh_min_s=60, refresh_max_s=3600), keys).run)
            assert keys.current is not None and set(keys.current.by_kid) == {"ec-1"}
            assert 119 <= keys.next_fetch_at - trio.current_time() <= 120
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("metadata", "certs", "reason"),
    [
        ({"issuer": "https://impostor.example", "jwks_uri": "/certs"}, JWKS, "names another issuer"),
        (None, b"<html>sign in</html>", "something other than JSON"),
        (None, {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, "no usable signing key"),
    ],
)
async def test_a_foreign_metadata_document_or_a_bad_jwks_is_a_failure(
    metadata: dict[str, str] | None, certs: Any, reason: str
) -> None:
    def routes(base: str) -> dict[str, tuple[int, dict[str, str], Any]]:
        document = metadata or {"issuer": base, "jwks_uri": f"{base}/certs"}
        document = {**document, "jwks_uri": f"{base}/certs"}
        return {"/.well-known/oauth-authorization-server": (200, {}, document), "/certs": (200, {}, certs)}

    async with documents(routes) as base:
        keys = IssuerKeys(base)
        with pytest.raises(ChildExitError, match=reason):
            await KeysKeeper(JwksSource(), keys).run()
        assert keys.current is None and keys.failures == 1


async def test_a_jwks_sent_a_byte_at_a_time_is_a_failure_once_the_fetch_takes_too_long(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each byte comes well within the HTTP client's read timeout; the whole answer never does. The keeper
    gives up after FETCH_TIMEOUT_S (its supervisor then retries with backoff), never waits forever."""

    async def trickle(stream: trio.SocketStream) -> None:
        await stream.receive_some()
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n"
        await stream.send_all(head)
        while True:
            await trio.sleep(FETCH_TIMEOUT_S / 4)
            await stream.send_all(b" ")

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, trickle, 0, host="127.0.0.1"))
        url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/certs"
        keys = IssuerKeys("https://idp.example")
        started = trio.current_time()
        with trio.fail_after(FETCH_TIMEOUT_S * 10), pytest.raises(ChildExitError, match="whole answer"):
            await KeysKeeper(JwksSource(jwks_url=url), keys).run()
        assert trio.current_time() - started <= FETCH_TIMEOUT_S + 1
        assert keys.current is None and keys.failures == 1
        nursery.cancel_scope.cancel()
