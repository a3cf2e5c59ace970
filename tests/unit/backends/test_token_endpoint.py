"""One request to a token endpoint (backends/token_endpoint.py), against a loopback server answering what
each test says: the form and client authentication sent; an answer used only when it is a Bearer token a
header can carry, with a sane lifetime; a 4xx a refusal naming its OAuth error, anything else the endpoint
out of order; no error text holding a token."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qs

import httpx2
import orjson
import pytest
import trio
from oauth_support import asgi_server, free_port

from actors.backends.token_endpoint import (
    DEFAULT_LIFETIME_S,
    MAX_LIFETIME_S,
    TokenRequestError,
    request_token,
)
from actors.config.auth_schema import ClientAuthMethod, ClientCredentialsAuth, TokenExchangeAuth
from actors.config.secret import Secret, SecretSource
from actors.protocol.on_behalf import CallerToken

SECRET = "s3cret/with:odd chars"


def auth(url: str, kind: type = ClientCredentialsAuth, **changes: Any) -> Any:
    return kind(
        token_url=url,
        client_id="gw:1",
        client_secret=Secret(SecretSource.VALUE, "t", value=SECRET),
        **changes,
    )


@asynccontextmanager
async def endpoint(status: int, body: bytes, seen: list[dict[str, Any]] | None = None) -> AsyncIterator[str]:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        form = b""
        while True:
            event = await receive()
            form += event.get("body", b"")
            if not event.get("more_body"):
                break
        if seen is not None:
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            seen.append({"form": parse_qs(form.decode()), "authorization": headers.get("authorization")})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async with asgi_server(app) as url:
        yield f"{url}/token"


async def ask(url: str, **changes: Any) -> Any:
    async with httpx2.AsyncClient() as client:
        return await request_token(client, auth(url, **changes), None)


def ok(**answer: Any) -> bytes:
    return orjson.dumps({"access_token": "tok-123", "token_type": "Bearer", "expires_in": 60, **answer})


async def test_the_form_and_basic_client_authentication() -> None:
    seen: list[dict[str, Any]] = []
    async with endpoint(200, ok(), seen) as url, httpx2.AsyncClient() as client:
        caller = CallerToken("https://idp", "alice", None, token="subject-token-value")
        exchange = auth(url, TokenExchangeAuth, audience=("a", "b"), resource=("https://r/mcp",), scope="x y")
        granted = await request_token(client, exchange, caller)
        await request_token(client, auth(url, client_auth=ClientAuthMethod.POST), None)
    assert (granted.token, granted.lifetime_s) == ("tok-123", 60.0)
    basic = base64.b64decode(seen[0]["authorization"].removeprefix("Basic ")).decode()
    assert basic == "gw%3A1:s3cret%2Fwith%3Aodd%20chars"  # form-encoded first (RFC 6749 2.3.1)
    assert seen[0]["form"] == {
        "grant_type": ["urn:ietf:params:oauth:grant-type:token-exchange"],
        "subject_token": ["subject-token-value"],
        "subject_token_type": ["urn:ietf:params:oauth:token-type:access_token"],
        "requested_token_type": ["urn:ietf:params:oauth:token-type:access_token"],
        "audience": ["a", "b"],
        "resource": ["https://r/mcp"],
        "scope": ["x y"],
    }
    assert seen[1]["authorization"] is None
    assert seen[1]["form"] == {
        "grant_type": ["client_credentials"],
        "client_id": ["gw:1"],
        "client_secret": [SECRET],
    }


@pytest.mark.parametrize(
    ("answer", "lifetime_s"),
    [
        (orjson.dumps({"access_token": "tok", "token_type": "bearer"}), DEFAULT_LIFETIME_S),
        (orjson.dumps({"access_token": "t", "token_type": "N_A"}), DEFAULT_LIFETIME_S),
        (ok(expires_in=10**12), MAX_LIFETIME_S),
        (ok(expires_in=0.5), 0.5),
    ],
)
async def test_a_lifetime_is_taken_as_given_within_bounds(answer: bytes, lifetime_s: float) -> None:
    async with endpoint(200, answer) as url:
        assert (await ask(url)).lifetime_s == lifetime_s


@pytest.mark.parametrize(
    ("status", "body", "outcome", "reason"),
    [
        (200, b"<html>", "failed", "answered 200 with no JSON"),
        (200, b"[1]", "failed", "answered 200 with no JSON object"),
        (200, orjson.dumps({"token_type": "Bearer"}), "failed", "answered 200 with no access_token"),
        (200, ok(access_token="two words"), "failed", "answered an access_token no header can carry"),
        (200, ok(access_token="line\r\nX-Evil: 1"), "failed", "answered an access_token no header can carry"),
        (200, ok(access_token="x" * 20000), "failed", "answered an access_token no header can carry"),
        (200, ok(token_type="DPoP"), "failed", "answered token_type 'DPoP', not Bearer"),
        (200, ok(expires_in="300"), "failed", "answered expires_in '300'"),
        (200, ok(expires_in=-5), "failed", "answered expires_in -5"),
        (200, ok(expires_in=True), "failed", "answered expires_in True"),
        (200, b" " * 70000, "failed", "answered more than 65536 bytes"),
        (400, orjson.dumps({"error": "invalid_grant", "error_description": "gone\n"}), "refused",
         "refused: invalid_grant: gone\\n"),
        (401, orjson.dumps({"error": "invalid_client"}), "refused", "refused: invalid_client"),
        (403, b"nope", "refused", "refused: HTTP 403"),
        (502, orjson.dumps({"error": "bad_gateway"}), "failed", "answered HTTP 502"),
    ],
)  # fmt: skip
async def test_what_is_not_a_usable_token_is_an_error_saying_what(
    status: int, body: bytes, outcome: str, reason: str
) -> None:
    async with endpoint(status, body) as url:
        with pytest.raises(TokenRequestError) as caught:
            await ask(url)
    assert reason in str(caught.value) and str(caught.value).startswith(url)
    assert caught.value.outcome == outcome and caught.value.down is (outcome != "refused")
    assert "two words" not in str(caught.value) and "X-Evil" not in str(caught.value)


async def test_an_endpoint_out_of_reach_or_too_slow_is_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}/token"
    with pytest.raises(TokenRequestError, match=re.escape(f"cannot reach {url}")) as caught:
        await ask(url)
    assert caught.value.outcome == "unreachable" and caught.value.status is None

    async def silent(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await trio.sleep_forever()

    async with asgi_server(silent) as base:
        with pytest.raises(TokenRequestError, match=r"did not answer within 0\.2s"):
            await ask(f"{base}/token", timeout_s=0.2)
