"""What a request to a remote backend carries (backends/credentials.py, protocol/on_behalf.py): of a client's
headers only those some backend names, as ASCII text of a bounded size, and to a backend only its own; the
gateway's own requests nothing of a client's; a call on a token_exchange backend without a caller's token
refused, never sent as the gateway; a caller's token never shown by its repr."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from actors.backends.credentials import NO_TOKEN, Credentials
from actors.backends.token_broker import TokenBroker, TokenUnavailableError
from actors.config.auth_schema import OwnRequests, StaticAuth, TokenExchangeAuth
from actors.config.backend_schema import RemoteBackend
from actors.config.secret import Secret, SecretSource
from actors.identity.principal import Principal
from actors.protocol.envelopes import Call, ReplySlot
from actors.protocol.on_behalf import MAX_FORWARDED_VALUE_BYTES, CallerToken, on_behalf

SECRET = Secret(SecretSource.VALUE, "t", value="static-secret-value")


def remote(**changes: Any) -> RemoteBackend:
    return RemoteBackend(name="b", url="https://b.example/mcp", **changes)


def test_only_named_headers_of_ascii_text_and_bounded_size_are_kept() -> None:
    headers = {
        "authorization": "Bearer client-token",
        "cookie": "a=b",
        "x-tenant": "acme",
        "x-trace": "é",  # latin-1 as a frontend decodes it: not ASCII, never passed on
        "x-long": "x" * (MAX_FORWARDED_VALUE_BYTES + 1),
        "x-other": "y",
    }
    carried = on_behalf(None, headers, frozenset({"x-tenant", "x-trace", "x-long", "x-absent"}))
    assert carried is not None and dict(carried.headers) == {"x-tenant": "acme"}
    assert on_behalf(None, headers, frozenset()) is None


def test_a_callers_token_is_shown_by_its_principal_only() -> None:
    principal = Principal("https://idp", "alice", claims={"exp": 1_900_000_000}).bearing(
        "the-raw-token-value"
    )
    assert principal.token is not None and principal.token.expires_at == 1_900_000_000.0
    assert principal.token.reveal() == "the-raw-token-value"
    assert "the-raw-token-value" not in repr(principal) + repr(principal.token)
    assert principal == Principal("https://idp", "alice")  # the same principal, whatever its token


async def test_a_backend_gets_its_static_credential_and_only_its_own_forwarded_headers() -> None:
    backend = remote(
        auth=StaticAuth(header="X-Key", format="k={secret}", secret=SECRET), forward_headers=("X-Tenant",)
    )
    credentials = Credentials.of(backend, None)
    carried = on_behalf(None, {"x-tenant": "acme", "x-region": "eu"}, frozenset({"x-tenant", "x-region"}))
    assert credentials.static == {"X-Key": "k=static-secret-value"}
    assert await credentials.headers_for(carried, own=False) == ({"x-tenant": "acme"}, None)
    assert await credentials.headers_for(carried, own=True) == ({}, None)  # the gateway's own: nothing


async def test_a_call_without_a_callers_token_is_refused_on_a_token_exchange_backend() -> None:
    auth = TokenExchangeAuth(token_url="https://idp/token", client_id="gw", client_secret=SECRET)
    backend = remote(auth=auth)
    credentials = Credentials.of(backend, TokenBroker(backend="b", auth=auth))
    with pytest.raises(TokenUnavailableError) as caught:
        await credentials.headers_for(on_behalf(None, {"x": "y"}, frozenset({"x"})), own=False)
    assert str(caught.value) == NO_TOKEN
    quiet = Credentials.of(remote(auth=attrs.evolve(auth, own_requests=OwnRequests.NONE)), None)
    assert await quiet.headers_for(None, own=True) == ({}, None)


def test_a_message_is_the_callers_only_while_its_call_is_in_flight() -> None:
    credentials = Credentials.of(remote(forward_headers=("x-tenant",)), None)
    carried = on_behalf(CallerToken("i", "alice", None, token="t"), {}, frozenset())
    client_call = Call(7, "tools/call", {}, "http-1", ReplySlot(), on_behalf=carried)
    own_call = Call(8, "tools/list", {}, "gateway", ReplySlot())
    table = {7: client_call, 8: own_call}
    request = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    assert credentials.whose(request, table.get) == (carried, False)
    assert credentials.whose({**request, "id": 8}, table.get) == (None, True)
    assert credentials.whose({**request, "id": 9}, table.get) == (None, True)
    assert credentials.whose({"jsonrpc": "2.0", "id": 7, "result": {}}, table.get) == (None, True)
