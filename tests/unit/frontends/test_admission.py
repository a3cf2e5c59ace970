"""Host and Origin parsing, the request checks and the session counts, as both listeners apply them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.config import JwtAuth
from actors.config.listener_schema import ForwardedHeader
from actors.frontends.admission import (
    LOOPBACK_CLIENT,
    RETRY_AFTER_S,
    Admission,
    client_key,
    parse_host,
    parse_origin,
)
from actors.frontends.auth import Principal, Refused
from actors.policy import caller_of

ALICE: Final = Principal(None, "alice")
BOB: Final = Principal(None, "bob")


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("localhost", ("localhost", None)),
        ("LocalHost:8765", ("localhost", 8765)),
        ("127.0.0.1:8766", ("127.0.0.1", 8766)),
        ("[::1]:8766", ("::1", 8766)),
        ("[::1]", ("::1", None)),
        ("127.0.0.1:1@evil.com", None),
        ("evil.com#127.0.0.1", None),
        ("127.0.0.1:99999", None),
        ("127.0.0.1:", None),
        ("user@localhost", None),
        ("localhost:80:80", None),
        ("", None),
        ("local\x1bhost", None),
        ("::1", None),  # an IPv6 literal needs its brackets
    ],
)
def test_hosts(value: str, parsed: tuple[str, int | None] | None) -> None:
    assert parse_host(value) == parsed


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("http://localhost:8766", ("http", "localhost", 8766)),
        ("https://app.example", ("https", "app.example", 443)),
        ("http://127.0.0.1", ("http", "127.0.0.1", 80)),
        ("http://[::1]:8765", ("http", "::1", 8765)),
        ("http://127.0.0.1:1@evil.com", None),
        ("http://localhost:8766/path", None),
        ("null", None),
        ("file://", None),
        ("javascript:alert(1)", None),
    ],
)
def test_origins(value: str, parsed: tuple[str, str, int] | None) -> None:
    assert parse_origin(value) == parsed


def admission(**overrides: object) -> Admission:
    settings = {
        "path": "/mcp",
        "auth": None,
        "allowed_hosts": ("127.0.0.1", "localhost", "::1"),
        "allowed_origins": ("https://app.example",),
        "max_sessions": 3,
        "max_sessions_per_client": 2,
        "oauth": None,
        "trusted_proxies": (),
        "proxy_protocol": False,
        "forwarded_header": ForwardedHeader.X_FORWARDED_FOR,
        **overrides,
    }
    settings["checks_tokens"] = settings["auth"] is not None or settings["oauth"] is not None
    gate = Admission.of(SimpleNamespace(**settings))  # type: ignore[arg-type]
    gate.port = 8766
    return gate


def refusal(check: object, *args: object) -> int | None:
    try:
        check(*args)  # type: ignore[operator]
    except Refused as refused:
        return refused.status
    return None


def test_host_header_refusals() -> None:
    gate = admission()
    assert refusal(gate.check_host, "localhost:8766") is None
    assert refusal(gate.check_host, "[::1]:8766") is None
    assert refusal(gate.check_host, "127.0.0.1:1@evil.com") == 421
    assert refusal(gate.check_host, "evil.example") == 421
    assert refusal(gate.check_host, None) == 421
    assert refusal(admission(allowed_hosts=("*",)).check_host, "anything.example") is None


def test_only_pages_of_the_listener_itself_or_listed_origins_are_allowed() -> None:
    gate = admission()
    assert refusal(gate.check_origin, None) is None  # not a browser
    assert refusal(gate.check_origin, "http://localhost:8766") is None  # a page this listener serves
    assert refusal(gate.check_origin, "https://app.example") is None  # listed
    assert refusal(gate.check_origin, "http://localhost:3000") == 403  # another local server's page
    assert refusal(gate.check_origin, "http://127.0.0.1:1@evil.com") == 403
    assert refusal(gate.check_origin, "http://evil.example:8766") == 403
    assert refusal(gate.check_origin, "null") == 403


async def test_the_path_comes_first_and_auth_only_when_configured() -> None:
    gate = admission()

    async def refused(gate: Admission, *args: object) -> int | None:
        try:
            await gate.check(*args)  # type: ignore[arg-type]
        except Refused as refused:
            return refused.status
        return None

    assert await refused(gate, "/other", "evil.example", {}) == 404
    assert await refused(gate, "/mcp", "evil.example", {}) == 421
    assert await refused(gate, "/mcp", "localhost:8766", {"origin": "http://localhost:3000"}) == 403
    assert await gate.check("/mcp", "localhost:8766", {}) is None  # no auth: no subject
    auth = JwtAuth(key="k" * 32, algorithms=("HS256",), audience=None, issuer=None)
    assert await refused(admission(auth=auth), "/mcp", "localhost:8766", {}) == 401


def test_sessions_are_counted_per_client() -> None:
    gate = admission(max_sessions=10)
    alice = client_key(ALICE, "10.0.0.1")
    assert gate.open_session(ALICE, "10.0.0.1", 0) == alice
    gate.open_session(ALICE, "10.0.0.2", 0)  # the principal counts, not the address
    assert refusal(gate.open_session, ALICE, "10.0.0.1", 0) == 429
    gate.open_session(None, "10.0.0.1", 0)  # the same address without a token is another client
    gate.close_session(alice)
    gate.open_session(ALICE, "10.0.0.1", 0)
    assert refusal(gate.open_session, ALICE, "10.0.0.1", 0) == 429


def test_a_listener_at_its_limit_refuses_before_counting() -> None:
    gate = admission()
    assert refusal(gate.open_session, BOB, "10.0.0.1", 3) == 503
    gate.open_session(BOB, "10.0.0.1", 2)
    gate.open_session(BOB, "10.0.0.1", 2)  # the 503 did not count against bob


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "::ffff:127.0.0.3", "0:0:0:0:0:0:0:1"]
)
def test_every_loopback_address_is_one_client(address: str) -> None:
    assert client_key(None, address) == LOOPBACK_CLIENT


def test_an_address_is_one_client_in_every_spelling() -> None:
    assert client_key(None, "::ffff:10.0.0.1") == client_key(None, "10.0.0.1") == "address:10.0.0.1"
    assert client_key(None, "2001:DB8:0::1") == client_key(None, "2001:db8::1")
    assert client_key(None, "10.0.0.1") != client_key(None, "10.0.0.2")
    assert client_key(None, "?") == "address:?"  # no address known: one client, never a crash


def test_with_a_token_the_client_is_its_issuer_and_subject_never_the_address() -> None:
    assert client_key(ALICE, "10.0.0.1") == client_key(ALICE, "127.0.0.1")
    assert client_key(ALICE, "10.0.0.1") != client_key(BOB, "10.0.0.1")
    assert client_key(Principal("https://a.example", "alice"), "?") != client_key(
        Principal("https://b.example", "alice"), "?"
    )
    # no spelling of an issuer and a subject stands for another pair
    assert client_key(Principal("a", "b c"), "?") != client_key(Principal("a b", "c"), "?")
    assert client_key(Principal(None, "loopback"), "?") != LOOPBACK_CLIENT


def test_loopback_aliases_share_one_clients_sessions() -> None:
    gate = admission(max_sessions=10)
    gate.open_session(None, "127.0.0.1", 0)
    gate.open_session(None, "127.0.0.2", 1)
    assert refusal(gate.open_session, None, "::1", 2) == 429
    gate.open_session(None, "10.0.0.1", 2)  # another host has its own share


def test_a_refusal_says_when_to_try_again() -> None:
    gate = admission(max_sessions=10)
    for _ in range(2):
        gate.open_session(ALICE, "10.0.0.1", 0)
    with pytest.raises(Refused) as refused:
        gate.open_session(ALICE, "10.0.0.1", 2)
    assert refused.value.status == 429
    assert (b"retry-after", str(RETRY_AFTER_S).encode()) in refused.value.headers
    with pytest.raises(Refused) as full:
        gate.open_session(BOB, "10.0.0.1", 10)
    assert full.value.status == 503 and full.value.headers == refused.value.headers


def test_at_its_share_a_client_makes_room_by_ending_one_of_its_own_sessions() -> None:
    gate = admission(max_sessions=10)
    alice = client_key(ALICE, "?")
    asked: list[str | None] = []

    def make_room(client: str | None, limit: str) -> bool:
        asked.append(client)
        assert limit == "max_sessions_per_client = 2"
        gate.close_session(alice)  # the listener ended one of alice's idle sessions
        return True

    gate.open_session(ALICE, "?", 0)
    gate.open_session(ALICE, "?", 1)
    assert gate.open_session(ALICE, "?", 2, make_room) == alice
    assert asked == [alice]  # one of its own, and the listener's total went down with it
    assert refusal(gate.open_session, ALICE, "?", 2, lambda client, limit: False) == 429  # all busy


def test_a_full_listener_makes_room_from_the_clients_own_idle_sessions_first_then_anyones() -> None:
    gate = admission(max_sessions=3)
    asked: list[str | None] = []

    def make_room(client: str | None, limit: str) -> bool:
        asked.append(client)
        assert limit == "max_sessions = 3"
        return client is None  # bob has no idle session of his own; someone else has

    gate.open_session(BOB, "?", 3, make_room)
    assert asked == [client_key(BOB, "?"), None]
    assert refusal(gate.open_session, BOB, "?", 3, lambda client, limit: False) == 503


@given(st.text(max_size=80))
def test_any_host_or_origin_text_is_parsed_or_refused_never_raises(value: str) -> None:
    gate = admission()
    parse_host(value)
    parse_origin(value)
    assert refusal(gate.check_host, value) in (None, 421)
    assert refusal(gate.check_origin, value) in (None, 403)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("127.0.0.1", "websocket"), ("127.0.0.2", "http")),
        (("127.0.0.1", "http"), ("::1", "http")),
        (("10.0.0.1", "websocket"), ("::ffff:10.0.0.1", "http")),
    ],
)
def test_limits_count_a_client_as_sessions_do_whatever_listener_or_spelling(
    first: tuple[str, str], second: tuple[str, str]
) -> None:
    """Without auth, another loopback address or the other listener is the same client for [limits] as for
    max_sessions_per_client: it never gets a fresh bucket."""
    one, other = caller_of(None, *first), caller_of(None, *second)
    assert one.key == other.key == client_key(None, first[0]) == client_key(None, second[0])


def test_with_a_token_limits_count_the_principal_as_sessions_do() -> None:
    alice = Principal("https://id.example", "alice", claims={})
    assert caller_of(alice, "10.0.0.1", "http").key == client_key(alice, "127.0.0.1")
    assert caller_of(alice, "10.0.0.1", "http").key != caller_of(None, "10.0.0.1", "http").key
